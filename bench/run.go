package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/polite-crawler/polite/internal/redisinfo"
	"github.com/polite-crawler/polite/limiter"
	"github.com/redis/go-redis/v9"
)

// Options configure Run.
type Options struct {
	Quick     bool      // under a minute: small counts, for CI smoke runs
	Only      []string  // sections to run (default all)
	Exe       string    // the crawler binary (worker processes run it)
	RedisAddr string    // a redis-server of the run's own: it is flushed (its data, scripts and functions), MONITORed and its stats reset
	RedisPID  int       // that redis-server's process ID when the run started it: the crawl section pins it to a CPU of its own for a few crawls (0: not pinned, nor measured so)
	UserAgent string    // for the crawls (default "politebot/0.1")
	Command   string    // how the run was started, for the report
	Log       io.Writer // a line per step as the run goes, "bench: …" (default: discarded)
}

// Report is everything one run measured: a section that did not run
// leaves its fields empty, and Write and Summary leave it out. Its figures
// are judged against the bench's goals only when written (Write).
type Report struct {
	Started     time.Time
	Took        time.Duration
	Command     string
	Machine     map[string]string
	Quick       bool
	Uncontended []LatencyRow
	Throughput  []ThroughputRow // the PING baseline first
	HotSite     []HandoffRow    // the token list, our anchor, first; then ours and the book's
	HotSpec     HotSiteSpec
	Footprint   *Footprint
	Crawl       []CrawlRow // polite rows by processes and mode, then colly alone
	CrawlSpec   CrawlSpec
	Busy        []BusyRow  // a crawl of each mode replayed back to back: what a busy Redis spends a page
	Wake        *WakeCost  // what a wake costs this Redis
	OwnCore     []CrawlRow // 1 process of each mode with Redis on a CPU of its own
	OwnCoreNot  string     // why OwnCore is missing, or ""
	Scale       []CrawlRow
	Seen        *SeenRow
	Cluster     []ClusterRow
	Fragile     []FragileRow // adaptive off, then on
	Healthy     []CrawlRow   // the healthy crawl, adaptive off, then on
	Burst       []BurstRow
	Robots      []RobotsRow
}

// SafetyHeld reports whether our limiter kept every cap: at the hot site's
// counting server (the token list, our anchor, too) and at every test site
// of every polite crawl (the busy Redis's captured crawls too), where no
// site may have seen a violation either
// (testserver.SiteStats.Violation).
func (r *Report) SafetyHeld() bool {
	for _, h := range r.HotSite {
		if (h.Alg == AlgLocked || h.Alg == AlgAtomic || h.Alg == AlgTokenList) && !h.keptCap(r.HotSpec.Limit) {
			return false
		}
	}
	crawls := slices.Concat(r.Crawl, r.OwnCore, r.Scale, r.Healthy)
	for _, c := range r.Cluster {
		crawls = append(crawls, c.CrawlRow)
	}
	for _, b := range r.Busy {
		crawls = append(crawls, b.Crawl)
	}
	for _, c := range crawls {
		if !c.Peer && (!c.keptCap() || c.Disallowed > 0 || c.Impolite > 0) {
			return false
		}
	}
	return true
}

// Run measures the chosen sections, in order, and returns the report. It
// flushes o.RedisAddr first; it fails on an unknown section, and on the
// first section that fails.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := CheckSections(o.Only); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	o.UserAgent = cmp.Or(o.UserAgent, "politebot/0.1")
	if o.Log == nil {
		o.Log = io.Discard
	}
	r := &Report{Started: time.Now(), Command: o.Command, Quick: o.Quick}
	rdb := redis.NewClient(&redis.Options{Addr: o.RedisAddr})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, fmt.Errorf("bench: redis at %s: %w", o.RedisAddr, err)
	}
	r.Machine = machine(ctx, rdb)
	run := &runner{o: o, r: r, rdb: rdb, n: fullSizes}
	if o.Quick {
		run.n = quickSizes
	}
	if slices.ContainsFunc(Sections, func(s string) bool { return s != "robots" && run.on(s) }) { // robots takes no permits
		if err := waitGuard(ctx, rdb, run.logf); err != nil {
			return nil, err
		}
	}
	r.HotSpec = HotSiteSpec{Exe: o.Exe, RedisAddr: o.RedisAddr, Procs: 4, WaitersPerProc: 8, Limit: 3, Hold: 2 * time.Millisecond, Duration: run.n.hot, Rounds: run.n.hotRounds}
	r.CrawlSpec = CrawlSpec{Exe: o.Exe, RedisAddr: o.RedisAddr, UserAgent: o.UserAgent, Sites: 20, Pages: run.n.crawlPages, Latency: 50 * time.Millisecond}
	for _, s := range sections {
		if !run.on(s.name) {
			continue
		}
		if err := s.run(run, ctx); err != nil {
			return nil, err
		}
	}
	r.Took = time.Since(r.Started)
	return r, nil
}

// waitGuard waits until a fresh Redis grants permits: the limiter's
// restart guard refuses them on a server younger than the lease (the
// crawler's default, 10 s) + 1 s, which would count in every figure.
func waitGuard(ctx context.Context, rdb *redis.Client, logf func(string, ...any)) error {
	lim := limiter.New(rdb, nil)
	defer lim.Close()
	left, err := lim.GuardLeft(ctx)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if left > 0 {
		logf("waiting %s: a Redis this young grants no permits (the limiter's restart guard)", left)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(left):
		}
	}
	return nil
}

func machine(ctx context.Context, rdb *redis.Client) map[string]string {
	m := map[string]string{"go": runtime.Version(), "cores": fmt.Sprint(runtime.NumCPU()), "os/arch": runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m["cpu"] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if line, _, ok := strings.Cut(string(b), "\n"); ok {
			m["memory"] = strings.Join(strings.Fields(strings.TrimPrefix(line, "MemTotal:")), " ")
		}
	}
	if f, err := info(ctx, rdb, "server"); err == nil {
		m["redis"] = f["redis_version"]
	}
	return m
}

// info reads one section of INFO as field: value.
func info(ctx context.Context, rdb *redis.Client, section string) (map[string]string, error) {
	text, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("bench: INFO %s: %w", section, err)
	}
	return redisinfo.Fields(text), nil
}
