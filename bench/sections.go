package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// sections are a run's parts, in the order they run.
var sections = []struct {
	name string
	run  func(*runner, context.Context) error
}{
	{"limiter", (*runner).limiter}, {"hotsite", (*runner).hotSite}, {"crawl", (*runner).crawl}, {"scale", (*runner).scale},
	{"cluster", (*runner).cluster}, {"adaptive", (*runner).adaptive}, {"robots", (*runner).robots},
}

// Sections names a run's parts, in the order they run; Options.Only picks
// some.
var Sections = func() []string {
	var names []string
	for _, s := range sections {
		names = append(names, s.name)
	}
	return names
}()

// CheckSections returns an error naming the first of names that is not
// one of Sections, and nil when all are.
func CheckSections(names []string) error {
	for _, s := range names {
		if !slices.Contains(Sections, s) {
			return fmt.Errorf("unknown section %q (known: %s)", s, strings.Join(Sections, ", "))
		}
	}
	return nil
}

// sizes are a run's counts and durations.
type sizes struct {
	pairs                    int           // uncontended acquire+release pairs per algorithm
	tput, hot                time.Duration // per algorithm: throughput, hot site
	rounds                   int           // burst rounds per algorithm
	hotRounds                int           // hot-site rounds (hot is split between them)
	crawlPages               int           // per site
	procs, collyProcs        []int         // processes of our crawls, of colly alone's besides the one-process reference (crawl)
	runs                     int           // crawls per row, the median kept
	ownRuns                  int           // crawls per row with Redis on a CPU of its own (OwnCore)
	scaleSites, scaleWorkers []int
	scaleSecs                float64 // how long each scale crawl is sized to last
	seenURLs, fragilePages   int
	pings                    int // each way, for WakeCost
}

var (
	fullSizes = sizes{pairs: 3000, tput: 5 * time.Second, hot: 12 * time.Second, hotRounds: 4, rounds: 5, crawlPages: 300, procs: []int{1, 2, 4},
		collyProcs: []int{4}, runs: 3, ownRuns: 5, scaleSites: []int{10, 100, 1000}, scaleWorkers: []int{1, 4, 16, 64}, scaleSecs: 4,
		seenURLs: 100000, fragilePages: 200, pings: 4000}
	// quickSizes are --quick's: under a minute, for CI smoke runs.
	quickSizes = sizes{pairs: 300, tput: time.Second, hot: 2 * time.Second, rounds: 1, crawlPages: 25, procs: []int{1, 2},
		runs: 1, ownRuns: 1, scaleSites: []int{10, 100}, scaleWorkers: []int{1, 16}, scaleSecs: 0.5,
		seenURLs: 5000, fragilePages: 60, pings: 500}
)

// runner is one Run: its options, the report it fills and its counts.
type runner struct {
	o   Options
	r   *Report
	rdb *redis.Client
	n   sizes
}

func (run *runner) on(section string) bool {
	return len(run.o.Only) == 0 || slices.Contains(run.o.Only, section)
}

func (run *runner) logf(format string, a ...any) { fmt.Fprintf(run.o.Log, "bench: "+format+"\n", a...) }

func (run *runner) limiter(ctx context.Context) (err error) {
	r, addr := run.r, run.o.RedisAddr
	run.logf("limiter: uncontended acquire+release, %d pairs per algorithm", run.n.pairs)
	if r.Uncontended, err = measureUncontended(ctx, addr, run.n.pairs); err != nil {
		return err
	}
	run.logf("limiter: throughput, 64 goroutines over 1000 sites, %s per algorithm", run.n.tput)
	if r.Throughput, err = measureThroughput(ctx, addr, 64, 1000, run.n.tput); err != nil {
		return err
	}
	run.logf("limiter: Redis footprint of 1000 active sites, then idle")
	fp, err := measureFootprint(ctx, run.rdb, 1000)
	if err != nil {
		return err
	}
	r.Footprint = &fp
	run.logf("limiter: a burst of 300 callers on a busy site, in 1 and 4 processes, %d rounds per algorithm", run.n.rounds)
	r.Burst, err = measureBurst(ctx, addr, 300, []int{1, 4}, run.n.rounds)
	return err
}

func (run *runner) hotSite(ctx context.Context) (err error) {
	s := run.r.HotSpec
	run.logf("hot site: %d processes x %d waiters, limit %d, %s holds, %s per algorithm in %d round(s)", s.Procs, s.WaitersPerProc, s.Limit, s.Hold, s.Duration, s.rounds())
	run.r.HotSite, err = measureHotSite(ctx, s)
	return err
}

func (run *runner) crawl(ctx context.Context) (err error) {
	r, s := run.r, run.r.CrawlSpec
	run.logf("crawl: %d sites x %d pages, %s each, cap %d; polite %v with %v processes; %d round(s): colly alone in 1 process, then one crawl of each row", s.Sites, s.Pages, s.Latency, siteCap, crawlModes, run.n.procs, run.n.runs)
	// The reference, colly alone in one process, is crawled first in each
	// round of our rows (its median is the row), so that a drift of the
	// machine over the section moves it as it moves ours.
	var ref []CrawlRow
	before := func() error {
		row, err := collyAlone(ctx, s, 1)
		ref = append(ref, row)
		return err
	}
	polite := func(procs int, mode string) (CrawlRow, error) {
		return s.polite(ctx, fmt.Sprintf("polite %s, %d process(es)", mode, procs), mode, procs, (s.workers()+procs-1)/procs)
	}
	if r.Crawl, err = utilisation(run.n.procs, run.n.runs, before, polite); err != nil {
		return err
	}
	if len(ref) > 0 {
		r.Crawl = append(r.Crawl, medianOf(ref))
	}
	for _, n := range run.n.collyProcs { // colly alone in several processes: what it does to a site
		run.logf("crawl: colly alone, %d process(es)", n)
		row, err := collyAlone(ctx, s, n)
		if err != nil {
			return err
		}
		r.Crawl = append(r.Crawl, row)
	}
	relateToColly(r.Crawl)
	// The crawls' Redis CPU per page is paid at their own rate, Redis
	// sleeping between pages: what a busy Redis spends, and what a wake
	// costs (busy.go).
	// Neither is a goal: a Redis that refuses MONITOR or FUNCTION FLUSH (a
	// managed one), or a replay that fails, leaves the figure out and says
	// why, rather than ending the run; the captured crawl's sites still
	// count in SafetyHeld.
	for _, mode := range crawlModes {
		run.logf("crawl: polite %s, 1 process, its commands captured (MONITOR) and replayed back to back, %d to a round trip", mode, busyDepth)
		b, err := s.busy(ctx, run.rdb, mode)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			b.NotMeasured = err.Error()
			run.logf("crawl: the busy Redis's cost in %s mode is not measured: %v", mode, err)
		}
		r.Busy = append(r.Busy, b)
	}
	run.ownCore(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	run.logf("crawl: what a PING costs Redis from 1 client at a time and from %d at once", wakeClients)
	w, err := wakeCost(ctx, s.RedisAddr, run.n.pings, wakeClients)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		run.logf("crawl: what a wake costs Redis is not measured: %v", err)
		return nil
	}
	r.Wake = &w
	return nil
}

func (run *runner) scale(ctx context.Context) (err error) {
	r := run.r
	run.logf("scale: %v sites; %v workers in one process", run.n.scaleSites, run.n.scaleWorkers)
	if r.Scale, err = scaleCrawls(ctx, r.CrawlSpec, run.n.scaleSites, run.n.scaleWorkers, run.n.scaleSecs); err != nil {
		return err
	}
	run.logf("scale: Redis memory per URL seen, %d URLs", run.n.seenURLs)
	seen, err := seenMemory(ctx, run.rdb, run.n.seenURLs)
	if err != nil {
		return err
	}
	r.Seen = &seen
	return nil
}

func (run *runner) cluster(ctx context.Context) (err error) {
	s := run.r.CrawlSpec
	run.logf("cluster: the crawl on a Redis Cluster of %d masters, %d processes, %d shards, %v", clusterMasters, clusterProcs, clusterShards, crawlModes)
	run.r.Cluster, err = clusterCrawls(ctx, s, clusterMasters, clusterProcs, s.workers()/clusterProcs, clusterShards)
	return err
}

func (run *runner) adaptive(ctx context.Context) (err error) {
	r, runs := run.r, run.n.runs
	run.logf("adaptive: the fragile site, %d pages, %d processes x %d workers, adaptive off then on, %d crawls each", run.n.fragilePages, fragileProcs, fragileWorkers, runs)
	if r.Fragile, err = fragileCrawls(ctx, r.CrawlSpec, fragileProcs, fragileWorkers, run.n.fragilePages, runs); err != nil {
		return err
	}
	// The healthy goal is a 2 % difference: more crawls than the other
	// rows (5 of each in a full run), so that the medians can show it.
	healthy := 2*runs - 1
	run.logf("adaptive: the healthy crawl, atomic, 1 process, adaptive off and on by turns (off-on, on-off, ...), %d crawls each", healthy)
	r.Healthy, err = healthyAdaptive(ctx, r.CrawlSpec, "atomic", r.CrawlSpec.workers(), healthy)
	return err
}

func (run *runner) robots(context.Context) (err error) {
	run.logf("robots: Allowed on an 8 KiB path against hostile robots.txt files")
	run.r.Robots, err = robotsCost(8, 200)
	return err
}

// The cluster section's crawl: 3 masters (the Redis Cluster minimum), the
// crawler's default shard count.
const clusterMasters, clusterProcs, clusterShards = 3, 2, 16

// The adaptive section's fragile crawl: 4 processes, each with
// as many workers as the site's cap, so that without the controller the
// fleet keeps the cap full.
const fragileProcs, fragileWorkers = 4, 3

// ownCore crawls once more in each mode, 1 process, with Redis on a CPU
// of its own and the crawler processes and test sites on the others
// (pinRedis): Redis's cost per page when nothing the bench starts runs on
// its CPU, as where it has a machine of its own, rather than on this
// machine's shared CPUs. The crawls go in rounds (each mode's first, then
// each's second, ...), and each mode's row is its crawl of median Redis
// CPU, the figure these rows are for. Not a goal's condition to be able
// to: a Redis the bench did not start, a machine of one CPU, or a crawl
// that fails leaves the rows out, and the report says why.
func (run *runner) ownCore(ctx context.Context) {
	r, s := run.r, run.r.CrawlSpec
	run.logf("crawl: Redis on a CPU of its own, the crawl on the others: polite %v, 1 process, %d round(s)", crawlModes, run.n.ownRuns)
	if err := run.ownCoreCrawls(ctx, s); err != nil {
		r.OwnCore, r.OwnCoreNot = nil, err.Error()
		run.logf("crawl: Redis on a CPU of its own is not measured: %v", err)
	}
}

func (run *runner) ownCoreCrawls(ctx context.Context, s CrawlSpec) error {
	undo, err := pinRedis(run.o.RedisPID)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := undo(); uerr != nil {
			run.logf("crawl: putting Redis and the bench back on their CPUs: %v", uerr)
		}
	}()
	all, err := inRounds([]int{1}, run.n.ownRuns, nil, func(procs int, mode string) (CrawlRow, error) {
		return s.polite(ctx, fmt.Sprintf("polite %s, 1 process, Redis on a CPU of its own", mode), mode, procs, s.workers())
	})
	if err != nil {
		return err
	}
	for _, rows := range all {
		run.r.OwnCore = append(run.r.OwnCore, medianBy(rows, func(r CrawlRow) float64 { return float64(r.RedisCPU) }))
	}
	return nil
}
