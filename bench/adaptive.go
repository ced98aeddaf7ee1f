package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
	"github.com/redis/go-redis/v9"
)

// FragileRow is a crawl of the fragile site (testserver preset "fragile":
// 50 ms alone, ×3 per other request in flight, 503 without Retry-After
// above 2 in flight), measured at the site.
type FragileRow struct {
	Adaptive       bool
	Procs, Workers int
	Pages          int64   // answered 200
	Seconds        float64 // until every process ended
	PagesPerSec    float64
	Overloaded     int64   // 503s without Retry-After the site sent
	P50, P95       float64 // the site's page latency, ms
	MaxAtOnce      int
	Failed         int64 // URLs given up after --max-attempts, as the crawlers counted
	// The site's health in Redis when the crawl ended (adaptive on).
	Cap        int
	ExtraDelay time.Duration
	TTFB       time.Duration
}

// fragileArgs scale the adaptive hold-offs down to the bench's seconds:
// the defaults (60 s, doubling, forgiven after 30 min) would hold a
// 10-second crawl off for most of a minute.
var fragileArgs = []string{"--adaptive-backoff", "1s", "--adaptive-backoff-max", "10s", "--adaptive-forgive", "10s"}

// fragileCrawls crawls one fragile site with procs processes of workers each,
// adaptive off and then on (and so on, runs times, the median by pages/s
// kept), and reads what the site saw.
func fragileCrawls(ctx context.Context, s CrawlSpec, procs, workers, pages, runs int) ([]FragileRow, error) {
	var out []FragileRow
	for _, on := range []bool{false, true} {
		var all []FragileRow
		for range runs {
			row, err := s.fragile(ctx, on, procs, workers, pages)
			if err != nil {
				return nil, err
			}
			all = append(all, row)
		}
		slices.SortFunc(all, func(a, b FragileRow) int { return cmp.Compare(a.PagesPerSec, b.PagesPerSec) })
		out = append(out, all[len(all)/2])
	}
	return out, nil
}

func (s CrawlSpec) fragile(ctx context.Context, adaptive bool, procs, workers, pages int) (FragileRow, error) {
	p, err := testserver.Preset("fragile", 1, 7)
	if err != nil {
		return FragileRow{}, err
	}
	p.Agent = robots.ProductToken(s.UserAgent)
	p.Sites[0].Pages = pages
	ts, err := testserver.New(p, testserver.WithControl(""))
	if err != nil {
		return FragileRow{}, err
	}
	if err := ts.Start(); err != nil {
		return FragileRow{}, err
	}
	defer ts.Close()
	site := ts.Sites()[0]
	crawl := fmt.Sprintf("bench-fragile-%d", time.Now().UnixNano())
	args := append(s.runArgs(crawl, workers, "--redis", "redis://"+s.RedisAddr),
		"--max-attempts", "5", "--sitemaps=false", "--adaptive="+strconv.FormatBool(adaptive))
	args = append(args, fragileArgs...)
	args = append(args, site.URL+"/")
	start := time.Now()
	kids, err := startChildren(ctx, s.Exe, procs, func() []string { return args })
	if err != nil {
		return FragileRow{}, err
	}
	<-kids.done()
	if err := errors.Join(kids.errs...); err != nil {
		return FragileRow{}, fmt.Errorf("bench: fragile crawl: %w", err)
	}
	st := ts.Stats().Sites[0]
	row := FragileRow{Adaptive: adaptive, Procs: procs, Workers: workers, Pages: st.Status2xx - st.RobotsFetches, Seconds: time.Since(start).Seconds(),
		Overloaded: st.Overloaded, P50: st.Latency.P50Ms, P95: st.Latency.P95Ms, MaxAtOnce: st.MaxInFlight}
	if row.Seconds > 0 {
		row.PagesPerSec = float64(row.Pages) / row.Seconds
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr})
	defer rdb.Close()
	lim := limiter.New(rdb, &limiter.Options{Prefix: crawl})
	defer lim.Close()
	u, err := url.Parse(site.URL)
	if err != nil {
		return FragileRow{}, err
	}
	if h, err := lim.Status(ctx, robots.Site(u), siteCap); err == nil {
		row.Cap, row.ExtraDelay, row.TTFB = h.Cap, h.ExtraDelay, h.TTFB
	}
	return row, nil
}

// healthyAdaptive crawls the bench's healthy sites with one process in
// mode, adaptive on and off by turns, runs times each, and returns the
// median row of each (off first): the controller must not take a busy
// machine's noise for a suffering site. The turns go off, on, then on,
// off, and so on, so that neither setting always runs second (after its
// twin has warmed, or tired, the machine).
func healthyAdaptive(ctx context.Context, s CrawlSpec, mode string, workers, runs int) ([]CrawlRow, error) {
	var off, on []CrawlRow
	for i := range runs {
		for _, adaptive := range healthyTurns(i) {
			name := fmt.Sprintf("polite %s, 1 process, adaptive %s", mode, map[bool]string{true: "on", false: "off"}[adaptive])
			row, err := s.politeArgs(ctx, name, mode, 1, workers, "--adaptive="+strconv.FormatBool(adaptive))
			if err != nil {
				return nil, err
			}
			if adaptive {
				on = append(on, row)
			} else {
				off = append(off, row)
			}
		}
	}
	return []CrawlRow{medianOf(off), medianOf(on)}, nil
}

// healthyTurns is round i's order of the healthy crawls: adaptive off
// then on in even rounds, on then off in odd ones.
func healthyTurns(i int) []bool {
	if i%2 == 1 {
		return []bool{true, false}
	}
	return []bool{false, true}
}
