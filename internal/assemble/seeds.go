package assemble

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/crawl"
	"github.com/polite-crawler/polite/frontier"
	"golang.org/x/sync/errgroup"
)

// ErrUsage is matched (errors.Is) by the errors the user fixes by changing
// the seeds or the settings, rather than Redis or the network: no seeds, a
// seed that is not an absolute http(s) URL or too long, a scope that
// conflicts with the crawl's stored one. Their text is the message alone.
var ErrUsage = errors.New("assemble: bad seeds or settings")

// usageError is an error of ErrUsage: msg, wrapping err (if any).
type usageError struct {
	msg string
	err error
}

func (e usageError) Error() string        { return e.msg }
func (e usageError) Unwrap() error        { return e.err }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// Seeds is what a run crawls from: args when there are any (they replace
// the settings' seeds: list, as flags replace the file's settings), else
// cfg.Seeds. It fails with ErrUsage when there are none, unless --forever
// (the process joins a crawl others seed), and when a seed does not
// normalise to an absolute http(s) URL (frontier.Normalize).
func Seeds(cfg *config.Config, args []string) ([]string, error) {
	seeds := args
	if len(seeds) == 0 {
		seeds = cfg.Seeds
	}
	if len(seeds) == 0 && !cfg.Forever {
		return nil, usageError{msg: "no seed URLs (give at least one, or a seeds: list in the --config file, or --forever to join a crawl others seed)"}
	}
	for _, s := range seeds {
		if strings.HasPrefix(s, "-") {
			return nil, usageError{msg: fmt.Sprintf("seed %q: flags go before the seed URLs", s)}
		}
		if _, _, err := frontier.Normalize(s); err != nil {
			hint := ""
			if !strings.Contains(s, "://") {
				if _, _, err := frontier.Normalize("http://" + s); err == nil {
					hint = fmt.Sprintf(" (did you mean http://%s?)", s)
				}
			}
			return nil, usageError{msg: fmt.Sprintf("seed %q: want an absolute http(s) URL%s", s, hint), err: err}
		}
	}
	return seeds, nil
}

// Seed queues seeds for the crawl (crawl.Crawler.Seed) and logs that the
// crawl started, and when every seed was seen before, that none is fetched
// again. A seed too long or a scope that conflicts with the crawl's stored
// one fails with ErrUsage, naming the setting to change; an error of Redis
// whose ACL refused a key, channel or command says which (config.Config.WithPermHint).
func (c *Crawl) Seed(ctx context.Context, seeds []string) error {
	added, err := c.Crawler.Seed(ctx, seeds)
	if err != nil {
		return seedError(c.cfg, err)
	}
	cfg := c.cfg
	c.log.Info("crawl started", "crawl", cfg.Crawl, "redis", cfg.RedisAddrs(), "seeds", len(seeds), "new", added,
		"workers", cfg.Workers, "max_per_site", cfg.MaxPerSite, "site_key", cfg.SiteKey, "max_per_ip", cfg.MaxPerIP, "resolve", c.pins, "semaphore", cfg.Semaphore)
	if len(seeds) > 0 && added == 0 {
		c.log.Info("every seed was already seen in this crawl, so none is fetched again; the process works on what the crawl still has queued (crawler status shows what was done; another --crawl starts afresh)", "crawl", cfg.Crawl)
	}
	return nil
}

// seedError is what Seed says of err, an error of crawl.Crawler.Seed.
func seedError(cfg *config.Config, err error) error {
	switch {
	case errors.Is(err, frontier.ErrScopeConflict):
		return usageError{msg: err.Error(), err: err}
	case errors.Is(err, crawl.ErrURLTooLong):
		return usageError{msg: err.Error() + " (see --max-url-length)", err: err}
	}
	return cfg.WithPermHint(fmt.Errorf("seeding: %w", err))
}

// goneTimeout bounds Run's look at whether the crawl's keys are still there.
const goneTimeout = 5 * time.Second

// Run crawls until the crawl is done for the whole fleet (or forever with
// --forever) or ctx ends (crawl.Crawler.Run). Beside the crawl it runs
// watch, when not nil, with a channel closed once the crawl is over;
// when both have returned, it logs what this process did. A crawl that
// ended by itself but has no keys left went from under the process: when
// crawler delete deleted it, Run returns an error wrapping
// frontier.ErrCrawlGone (Frontier.WhyGone), as when the process finds
// that out mid-crawl, unless the crawl was done when deleted; when Redis
// lost them, it warns. When the crawl
// ended by itself and every seed this process gave turned out
// unreachable, it returns crawl.Crawler.SeedsFailed's error; when Redis's
// ACL stopped it (crawl.ErrRefused), that error with what the user lacks
// (config.Config.WithPermHint).
func (c *Crawl) Run(ctx context.Context, watch func(ctx context.Context, over <-chan struct{})) error {
	g, gctx := errgroup.WithContext(ctx)
	over := make(chan struct{})
	if watch != nil {
		g.Go(func() error { watch(gctx, over); return nil })
	}
	start := time.Now()
	g.Go(func() error { defer close(over); return c.Crawler.Run(gctx) })
	err := g.Wait()
	if err == nil && ctx.Err() == nil && !c.cfg.Forever {
		// Done: but a crawl deleted under this process (between its
		// fetches: delete refuses only fetches in flight), or whose keys
		// Redis lost, looks done too. Deleted with work left, it is an
		// error (Run's, as when the process finds out mid-crawl:
		// frontier.ErrCrawlGone); deleted once done, it is done; lost, a
		// warning, as the crawl's state went with Redis.
		lctx, cancel := context.WithTimeout(ctx, goneTimeout)
		var why string
		switch why, err = c.Frontier.WhyGone(lctx); why {
		case frontier.GoneLost:
			c.log.Warn("the crawl's keys are gone: Redis lost them (a restart without its data, a failover) or they were deleted by hand "+
				"while this process worked on it, and what was queued went with them", "crawl", c.cfg.Crawl)
		case frontier.GoneFinished:
			c.log.Info("the crawl was deleted (crawler delete) once it was done", "crawl", c.cfg.Crawl)
		}
		cancel()
	}
	c.log.Info("crawl finished", append(c.Crawler.Progress().Summary(time.Since(start)), "stopped", ctx.Err() != nil,
		"redis_round_trips", c.Metrics.RoundTrips(), "redis_round_trips_robots", c.Metrics.RobotsRoundTrips())...)
	if err == nil && ctx.Err() == nil {
		err = c.Crawler.SeedsFailed() // every seed it gave unreachable: the run failed
	}
	return c.cfg.WithPermHint(err)
}
