// Package assemble builds one `crawler run` process's crawl from its
// settings (a validated *config.Config) and a Redis client: the limiter,
// the robots.txt cache, the frontier, the crawler, its metrics, its WARC
// archive and its --out file, each with the options the settings name. The
// command only loads the settings, connects, and runs what New returns.
package assemble

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/crawl"
	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/clock"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/metrics"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/warc"
	"github.com/redis/go-redis/v9"
)

// Crawl is one process's share of a crawl, ready to Seed and Run. Its
// parts are there for the command's progress report and /metrics; the
// crawl owns them.
type Crawl struct {
	Crawler  *crawl.Crawler
	Frontier *frontier.Frontier
	Limiter  *limiter.Limiter
	Robots   *robots.Cache
	Metrics  *metrics.Metrics
	Server   *metrics.Server // serves Metrics on --metrics-addr; nil without it

	cfg     *config.Config
	log     *slog.Logger
	archive *warc.Writer // nil without --warc
	out     *os.File     // nil without --out
	pins    int          // hosts --resolve pins

	robotsClosed bool // closeRobots has run
}

// New builds the crawl cfg describes on rdb, logging to log. It reads
// the settings first (--semaphore, --site-key, --resolve: ErrUsage, which
// Validate has ruled out), then binds --metrics-addr before it opens any
// file, so that a port already taken fails first; an error says which
// setting failed ("--metrics-addr: …", "--warc: …", "--out: …"), and
// whatever New had opened by then is closed again. cfg must have passed
// Validate. Call Finish and then Close when done.
func New(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, log *slog.Logger) (_ *Crawl, err error) {
	c := &Crawl{cfg: cfg, log: log, Metrics: metrics.New()}
	defer func() {
		if err != nil { // undo what was opened
			c.Finish()
			c.Close()
		}
	}()
	if skew := clock.Skew(); skew != 0 {
		log.Warn("test build: this process's clock is shifted", "by", skew)
	}
	siteKey, pins, err := parsed(cfg)
	if err != nil {
		return nil, err
	}
	if c.Limiter, err = newLimiter(ctx, rdb, cfg, log); err != nil {
		return nil, err
	}
	if cfg.MetricsAddr != "" {
		if c.Server, err = c.Metrics.Listen(cfg.MetricsAddr); err != nil {
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	c.Metrics.CountRoundTrips(rdb)
	c.Metrics.Adaptive(c.Limiter)
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := c.build(rdb, siteKey, pins); err != nil {
		return nil, err
	}
	return c, nil
}

// open opens the files the crawl writes: the WARC archive (--warc) and
// the results (--out, appended to).
func (c *Crawl) open() (err error) {
	if c.cfg.WARC != "" {
		c.archive, err = warc.Open(c.cfg.WARC, &warc.Options{Prefix: c.cfg.Crawl, IsPartOf: c.cfg.Crawl, MaxFileSize: int64(c.cfg.WARCSize)})
		if err != nil {
			return fmt.Errorf("--warc: %w", err)
		}
	}
	if c.cfg.Out != "" {
		if c.out, err = os.OpenFile(c.cfg.Out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	return nil
}

// build makes the network, the robots.txt cache, the frontier and the
// crawler, and shows them in the metrics.
func (c *Crawl) build(rdb redis.UniversalClient, siteKey robots.SiteKey, pins fetch.Pins) error {
	cfg := c.cfg
	c.pins = len(pins)
	network, err := crawl.NewNet(c.Limiter, &crawl.NetOptions{Cap: cfg.MaxPerSite, Pins: pins, MaxPerIP: cfg.MaxPerIP, WARC: c.archive})
	if err != nil {
		return err
	}
	c.Robots = crawl.NewRobotsCacheOn(rdb, c.Limiter, network, siteKey, robotsOptions(cfg, c.log), c.Metrics)
	c.Metrics.Robots(c.Robots)
	c.Frontier = frontier.New(rdb, frontierOptions(cfg, siteKey))
	o := crawlOptions(cfg, siteKey, network, c.log, c.Metrics)
	if c.out != nil {
		o.Out = c.out
	}
	c.Crawler = crawl.New(c.Frontier, c.Limiter, c.Robots, o)
	c.Metrics.Progress(func() int64 { return c.Crawler.Progress().InFlight }, metrics.FrontierFleet(c.Frontier))
	c.Metrics.Outcomes(c.Crawler.Outcomes)
	return nil
}

// closeRobots ends the robots.txt loads still under way (robots.Cache.Close),
// once.
func (c *Crawl) closeRobots() {
	if c.Robots == nil || c.robotsClosed {
		return
	}
	c.robotsClosed = true
	ctx, cancel := context.WithTimeout(context.Background(), robotsCloseTimeout)
	defer cancel()
	if err := c.Robots.Close(ctx); err != nil {
		c.log.Warn("robots.txt fetches still under way at exit; other processes wait out their fetch leases", "err", err)
	}
}

// robotsCloseTimeout bounds how long Close waits for the robots.txt loads
// it ended to give their leases back.
const robotsCloseTimeout = 10 * time.Second

// Finish ends what the crawl wrote: it ends the robots.txt loads still
// under way (robots.Cache.Close: they give their fetch leases back), then
// closes the WARC archive, after the crawl's last exchanges, and logs where it is and what it holds (or that
// it is not finished), and closes --out (logging an error if that fails:
// its last results may be lost). Call it after Run; a second
// call does nothing.
func (c *Crawl) Finish() {
	c.closeRobots() // first: a load still under way would record its exchange after the WARC files close
	if c.archive != nil {
		if err := c.archive.Close(); err != nil {
			c.log.Error("WARC files not finished", "dir", c.archive.Dir(), "err", err)
		}
		s := c.archive.Stats()
		c.log.Info("WARC written", "dir", c.archive.Dir(), "exchanges", s.Exchanges, "files", s.Files, "truncated", s.Truncated,
			"errors", s.Errors, "last_error", c.archive.Err())
		c.archive = nil
	}
	if c.out != nil {
		if err := c.out.Close(); err != nil {
			c.log.Error("--out not finished: its last results may be lost", "file", c.cfg.Out, "err", err)
		}
		c.out = nil
	}
}

// Close stops serving /metrics, ends the robots.txt fetches still under
// way if Finish did not (they give their fetch leases back, so that other
// processes need not wait them out) and closes the limiter. Call it after Finish, and
// after the metrics server has lingered, if it does, and before closing
// the Redis client.
func (c *Crawl) Close() {
	if c.Server != nil {
		c.Server.Close()
	}
	c.closeRobots() // if Finish did not
	if c.Limiter != nil {
		c.Limiter.Close()
	}
}
