package bench

import (
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

// Sections of a run, in the order they run; Options.Only picks some.
var Sections = []string{"limiter", "hotsite", "crawl", "scale", "cluster", "adaptive", "robots"}

// Options configure Run.
type Options struct {
	Quick     bool     // under a minute: small counts, for CI smoke runs
	Only      []string // sections to run (default all)
	Exe       string   // the crawler binary (worker processes run it)
	RedisAddr string   // a redis-server of the run's own: it is flushed and its stats reset
	UserAgent string   // for the crawls (default "politebot/0.1")
	Command   string   // how the run was started, for the report
	Log       io.Writer
}

// Report is everything one run measured.
type Report struct {
	Started     time.Time
	Took        time.Duration
	Command     string
	Machine     map[string]string
	Quick       bool
	Uncontended []LatencyRow
	Throughput  []ThroughputRow // the PING baseline first
	HotSite     []HandoffRow    // in HotSiteAlgorithms order: the token list first
	HotSpec     HotSiteSpec
	Footprint   *Footprint
	Crawl       []CrawlRow // polite rows by processes and mode, then colly alone
	CrawlSpec   CrawlSpec
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
// of every polite crawl.
func (r *Report) SafetyHeld() bool {
	for _, h := range r.HotSite {
		if (h.Alg == AlgLocked || h.Alg == AlgAtomic || h.Alg == AlgTokenList) && !h.keptCap(r.HotSpec.Limit) {
			return false
		}
	}
	crawls := slices.Concat(r.Crawl, r.Scale, r.Healthy)
	for _, c := range r.Cluster {
		crawls = append(crawls, c.CrawlRow)
	}
	for _, c := range crawls {
		if !c.Peer && (!c.keptCap() || c.Disallowed > 0) {
			return false
		}
	}
	return true
}

// Run measures the chosen sections, in order, and returns the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	for _, s := range o.Only {
		if !slices.Contains(Sections, s) {
			return nil, fmt.Errorf("bench: unknown section %q (known: %s)", s, strings.Join(Sections, ", "))
		}
	}
	if o.UserAgent == "" {
		o.UserAgent = "politebot/0.1"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	on := func(s string) bool { return len(o.Only) == 0 || slices.Contains(o.Only, s) }
	logf := func(format string, a ...any) { fmt.Fprintf(o.Log, "bench: "+format+"\n", a...) }
	r := &Report{Started: time.Now(), Command: o.Command, Quick: o.Quick}
	rdb := redis.NewClient(&redis.Options{Addr: o.RedisAddr})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, fmt.Errorf("bench: redis at %s: %w", o.RedisAddr, err)
	}
	r.Machine = machine(ctx, rdb)
	if slices.ContainsFunc(Sections, func(s string) bool { return s != "robots" && on(s) }) { // robots takes no permits
		if err := waitGuard(ctx, rdb, logf); err != nil {
			return nil, err
		}
	}

	pairs, tput, hot, crawlPages, procs, runs, scaleSecs := 3000, 5*time.Second, 10*time.Second, 300, []int{1, 2, 4}, 3, 4.0
	if o.Quick {
		pairs, tput, hot, crawlPages, procs, runs, scaleSecs = 300, time.Second, 2*time.Second, 25, []int{1, 2}, 1, 0.5
	}
	r.HotSpec = HotSiteSpec{Exe: o.Exe, RedisAddr: o.RedisAddr, Procs: 4, WaitersPerProc: 8, Limit: 3, Hold: 2 * time.Millisecond, Duration: hot}
	r.CrawlSpec = CrawlSpec{Exe: o.Exe, RedisAddr: o.RedisAddr, UserAgent: o.UserAgent, Sites: 20, Pages: crawlPages, Latency: 50 * time.Millisecond}
	var err error
	if on("limiter") {
		logf("limiter: uncontended acquire+release, %d pairs per algorithm", pairs)
		if r.Uncontended, err = Uncontended(ctx, o.RedisAddr, pairs); err != nil {
			return nil, err
		}
		logf("limiter: throughput, 64 goroutines over 1000 sites, %s per algorithm", tput)
		if r.Throughput, err = Throughput(ctx, o.RedisAddr, 64, 1000, tput); err != nil {
			return nil, err
		}
		logf("limiter: Redis footprint of 1000 active sites, then idle")
		fp, err := MeasureFootprint(ctx, rdb, 1000)
		if err != nil {
			return nil, err
		}
		r.Footprint = &fp
		rounds := 5
		if o.Quick {
			rounds = 1
		}
		logf("limiter: a burst of 300 callers on a busy site, in 1 and 4 processes, %d rounds per algorithm", rounds)
		if r.Burst, err = Burst(ctx, o.RedisAddr, 300, []int{1, 4}, rounds); err != nil {
			return nil, err
		}
	}
	if on("hotsite") {
		logf("hot site: %d processes x %d waiters, limit %d, %s holds, %s per algorithm",
			r.HotSpec.Procs, r.HotSpec.WaitersPerProc, r.HotSpec.Limit, r.HotSpec.Hold, hot)
		if r.HotSite, err = HotSite(ctx, r.HotSpec); err != nil {
			return nil, err
		}
	}
	if on("crawl") {
		logf("crawl: %d sites x %d pages, %s each, cap %d; polite %v with %v processes, %d crawls each", r.CrawlSpec.Sites, crawlPages, r.CrawlSpec.Latency, siteCap, CrawlModes, procs, runs)
		if r.Crawl, err = Utilisation(ctx, r.CrawlSpec, procs, r.CrawlSpec.workers(), runs); err != nil {
			return nil, err
		}
		collyProcs := []int{1, 4} // 1 is the reference; 4 shows what colly alone does to a site
		if o.Quick {
			collyProcs = []int{1}
		}
		for _, n := range collyProcs {
			logf("crawl: colly alone, %d process(es)", n)
			row, err := CollyAlone(ctx, r.CrawlSpec, n)
			if err != nil {
				return nil, err
			}
			r.Crawl = append(r.Crawl, row)
		}
		relateToColly(r.Crawl)
	}
	if on("scale") {
		sites, workers := []int{10, 100, 1000}, []int{1, 4, 16, 64}
		if o.Quick {
			sites, workers = []int{10, 100}, []int{1, 16}
		}
		logf("scale: %v sites; %v workers in one process", sites, workers)
		if r.Scale, err = Scale(ctx, r.CrawlSpec, sites, workers, scaleSecs); err != nil {
			return nil, err
		}
		n := 100000
		if o.Quick {
			n = 5000
		}
		logf("scale: Redis memory per URL seen, %d URLs", n)
		seen, err := SeenMemory(ctx, rdb, n)
		if err != nil {
			return nil, err
		}
		r.Seen = &seen
	}
	if on("cluster") {
		logf("cluster: the crawl on a Redis Cluster of %d masters, %d processes, %d shards, %v", clusterMasters, clusterProcs, clusterShards, CrawlModes)
		workers := r.CrawlSpec.workers() / clusterProcs
		if r.Cluster, err = ClusterCrawl(ctx, r.CrawlSpec, clusterMasters, clusterProcs, workers, clusterShards); err != nil {
			return nil, err
		}
	}
	if on("adaptive") {
		fpages, runs := 200, 3
		if o.Quick {
			fpages, runs = 60, 1
		}
		logf("adaptive: the fragile site, %d pages, %d processes x %d workers, adaptive off then on, %d crawls each", fpages, fragileProcs, fragileWorkers, runs)
		if r.Fragile, err = Fragile(ctx, r.CrawlSpec, fragileProcs, fragileWorkers, fpages, runs); err != nil {
			return nil, err
		}
		logf("adaptive: the healthy crawl, atomic, 1 process, adaptive off and on by turns, %d crawls each", runs)
		if r.Healthy, err = HealthyAdaptive(ctx, r.CrawlSpec, "atomic", r.CrawlSpec.workers(), runs); err != nil {
			return nil, err
		}
	}
	if on("robots") {
		logf("robots: Allowed on an 8 KiB path against hostile robots.txt files")
		if r.Robots, err = Robots(8, 200); err != nil {
			return nil, err
		}
	}
	r.Took = time.Since(r.Started)
	return r, nil
}

// The cluster section's crawl: 3 masters (the Redis Cluster minimum), the
// crawler's default shard count.
const clusterMasters, clusterProcs, clusterShards = 3, 2, 16

// The adaptive section's fragile crawl: 4 processes (issue 15), each with
// as many workers as the site's cap, so that without the controller the
// fleet keeps the cap full.
const fragileProcs, fragileWorkers = 4, 3

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
