package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// ChartsDir is where Write puts the SVG charts, inside its dir.
const ChartsDir = "bench-charts"

// Write puts BENCHMARKS.md in dir and its SVG charts in dir/bench-charts.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, ChartsDir), 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for name, svg := range r.charts() {
		if err := os.WriteFile(filepath.Join(dir, ChartsDir, name), []byte(svg), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	var b strings.Builder
	r.markdown(&b)
	if err := os.WriteFile(filepath.Join(dir, "BENCHMARKS.md"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// charts are the report's SVGs by file name, for the sections that ran.
func (r *Report) charts() map[string]string {
	c := map[string]string{}
	if len(r.Uncontended) > 0 {
		var bars []bar
		for _, x := range r.Uncontended {
			bars = append(bars, bar{x.Alg, x.RatioB2B, algColor(x.Alg, false)})
		}
		c["latency.svg"] = barChart("Uncontended acquire+release p50 as a multiple of two back-to-back PINGs (lower is better)", bars,
			"×", []goal{{goalUncontended[AlgAtomic], fmt.Sprintf("atomic goal ≤ %.1f×", goalUncontended[AlgAtomic])},
				{goalUncontended[AlgLocked], fmt.Sprintf("locked goal ≤ %.1f×", goalUncontended[AlgLocked])}})
	}
	if len(r.Throughput) > 1 {
		var bars []bar
		for _, x := range r.Throughput[1:] {
			bars = append(bars, bar{x.Alg, x.VsBook, algColor(x.Alg, false)})
		}
		c["throughput.svg"] = barChart("Pairs/s, 64 goroutines over 1000 sites, as a multiple of the book's lock-guarded semaphore", bars,
			"×", []goal{{goalThroughput[AlgLocked], fmt.Sprintf("locked goal ≥ %.1f×", goalThroughput[AlgLocked])},
				{goalThroughput[AlgAtomic], fmt.Sprintf("atomic goal ≥ %.1f×", goalThroughput[AlgAtomic])}})
	}
	if len(r.HotSite) > 0 {
		var bars []bar
		for _, x := range r.HotSite {
			bars = append(bars, bar{x.Alg, x.VsTokens, algColor(x.Alg, x.MaxAtOnce > int64(r.HotSpec.Limit))})
		}
		c["handoff.svg"] = barChart("Hot site: grants/s as a multiple of the token list's (BLPOP/RPUSH); red: exceeded the cap", bars,
			"×", []goal{{goalVsTokens, fmt.Sprintf("goal ≥ %.2f×", goalVsTokens)}})
	}
	if len(r.Crawl) > 0 {
		var bars []bar
		for _, x := range r.Crawl {
			if strings.HasPrefix(x.Name, "colly") && x.Procs > 1 {
				continue // fetches every page once per process: not like for like
			}
			bars = append(bars, bar{x.Name, x.VsColly, crawlColor(x)})
		}
		c["crawl.svg"] = barChart("Crawl: steady pages/s as a multiple of colly alone's (1 process); red: exceeded the cap", bars,
			"×", []goal{{goalVsCollyN, fmt.Sprintf("goal ≥ %.2f× (2+ processes)", goalVsCollyN)}, {goalVsColly1, fmt.Sprintf("goal ≥ %.2f× (1 process)", goalVsColly1)}})
	}
	if len(r.Scale) > 0 {
		var bars []bar
		for _, x := range r.Scale {
			bars = append(bars, bar{x.Name, x.RoundTrips, crawlColor(x)})
		}
		c["scale.svg"] = barChart("How cost grows: Redis round trips per page", bars, "", nil)
	}
	return c
}

func algColor(alg string, unsafe bool) string {
	switch {
	case unsafe:
		return colUnsafe
	case alg == AlgLocked || alg == AlgAtomic:
		return colOurs
	case alg == AlgTokenList:
		return colAnchor
	}
	return colPeer
}

func crawlColor(x CrawlRow) string {
	switch {
	case x.MaxAtOnce > x.Cap || x.OverCap > 0:
		return colUnsafe
	case strings.HasPrefix(x.Name, "colly"):
		return colPeer
	}
	return colOurs
}

func (r *Report) markdown(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	quick := ""
	if r.Quick {
		quick = " (--quick: small counts, for smoke only; do not quote these figures)"
	}
	p("# Benchmarks")
	p("")
	p("Measured by `%s` on %s, in %s%s. Every figure comes from this one run. Times are noisy on a", r.Command, r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Took.Round(time.Second), quick)
	p("shared 2-core machine, so each is also given as a ratio to a baseline measured in the same run. Safety figures are counted")
	p("at HTTP servers, never taken from the limiter's bookkeeping.")
	p("")
	keys := make([]string, 0, len(r.Machine))
	for k := range r.Machine {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p("| machine | |")
	p("|---|---|")
	for _, k := range keys {
		p("| %s | %s |", k, r.Machine[k])
	}
	p("")
	p("Redis, the test sites and every worker process share this machine. Redis is a private redis-server on loopback; worker processes are this binary (`crawler bench-worker`, `crawler run`, `crawler bench-colly`). \"The book\" is a faithful port of Redis in Action 6.3 (`internal/riabook`): the worker's own clock, polling every 1 ms, as its callers must.")
	p("")
	r.goalsSection(p)
	r.limiterSection(p)
	r.burstSection(p)
	r.hotSiteSection(p)
	r.crawlSection(p)
	r.scaleSection(p)
	r.clusterSection(p)
	r.adaptiveSection(p)
	r.robotsSection(p)
}

// verdict is one goal and what this run measured against it.
type verdict struct {
	what, goal, got string
	met             bool
}

// verdicts are the goals that the sections which ran can judge.
func (r *Report) verdicts() []verdict {
	var v []verdict
	for _, x := range r.Uncontended {
		if limit := goalUncontended[x.Alg]; limit > 0 {
			v = append(v, verdict{"uncontended p50, " + x.Alg, fmt.Sprintf("≤ %.1f× two back-to-back PINGs", limit),
				fmt.Sprintf("%.2f× (%.2f× interleaved)", x.RatioB2B, x.Ratio), x.RatioB2B <= limit})
		}
	}
	for _, x := range r.Throughput {
		if want := goalThroughput[x.Alg]; want > 0 {
			v = append(v, verdict{"throughput, " + x.Alg, fmt.Sprintf("≥ %.1f× the book's lock-guarded", want), fmt.Sprintf("%.2f×", x.VsBook), x.VsBook >= want})
		}
	}
	if f := r.Footprint; f != nil {
		v = append(v, verdict{"keys left after sites go idle", "0", fmt.Sprint(f.KeysLeftAfterIdle), f.KeysLeftAfterIdle == 0})
	}
	v = append(v, r.burstVerdicts()...)
	for _, x := range r.HotSite {
		ours := x.Alg == AlgLocked || x.Alg == AlgAtomic
		if !ours && x.Alg != AlgTokenList {
			continue
		}
		if ours {
			v = append(v, verdict{"hot-site hand-off, " + x.Alg, fmt.Sprintf("≥ %.2f× the token list's grants/s, fairness ≥ %.2f", goalVsTokens, goalJain),
				fmt.Sprintf("%.3f×, %.3f", x.VsTokens, x.Jain), x.VsTokens >= goalVsTokens && x.Jain >= goalJain})
		}
		v = append(v, verdict{"hot-site cap, " + x.Alg, fmt.Sprintf("never over %d at the server", r.HotSpec.Limit), fmt.Sprintf("most %d, %d starts over", x.MaxAtOnce, x.OverCapStart), x.MaxAtOnce <= int64(r.HotSpec.Limit) && x.OverCapStart == 0})
	}
	for _, x := range r.Crawl {
		if strings.HasPrefix(x.Name, "colly") {
			continue
		}
		want := goalVsColly(x.Procs)
		got := fmt.Sprintf("%.3f×", x.VsColly)
		if x.Runs > 1 {
			got += fmt.Sprintf(" (median of %d)", x.Runs)
		}
		trips, cpu := goalCrawlTrips[x.Mode], x.RedisCPU
		v = append(v, verdict{"crawl steady rate, " + x.Name, fmt.Sprintf("≥ %.2f× colly alone (1 process)", want), got, x.VsColly >= want},
			verdict{"crawl cost, " + x.Name, fmt.Sprintf("≤ %.0f round trips and ≤ %s Redis CPU per page", trips, us(goalCrawlCPU)),
				fmt.Sprintf("%.2f, %s", x.RoundTrips, us(cpu)), trips > 0 && x.RoundTrips <= trips && cpu <= goalCrawlCPU},
			verdict{"crawl cap, " + x.Name, "0 starts over cap", fmt.Sprintf("most %d (cap %d), %d over", x.MaxAtOnce, x.Cap, x.OverCap), x.OverCap == 0 && x.MaxAtOnce <= x.Cap})
	}
	if len(r.Fragile) == 2 {
		off, on := r.Fragile[0], r.Fragile[1]
		drop503, dropP95 := drop(off.Overloaded, on.Overloaded), dropF(off.P95, on.P95)
		v = append(v, verdict{"adaptive, fragile site", fmt.Sprintf("503s −%.0f %%, p95 −%.0f %%, pages/s no lower than off", 100*goalFragile503, 100*goalFragileP95),
			fmt.Sprintf("503s −%.0f %% (%d → %d), p95 −%.0f %% (%.0f → %.0f ms), %.1f → %.1f pages/s", 100*drop503, off.Overloaded, on.Overloaded,
				100*dropP95, off.P95, on.P95, off.PagesPerSec, on.PagesPerSec),
			drop503 >= goalFragile503 && dropP95 >= goalFragileP95 && on.PagesPerSec >= off.PagesPerSec})
	}
	if len(r.Healthy) == 2 {
		off, on := r.Healthy[0], r.Healthy[1]
		ratio := 0.0
		if off.Steady > 0 {
			ratio = on.Steady / off.Steady
		}
		v = append(v, verdict{"adaptive, healthy crawl", fmt.Sprintf("steady rate on ÷ off ≥ %.2f", goalHealthyRate), fmt.Sprintf("%.3f (%.0f ÷ %.0f pages/s)", ratio, on.Steady, off.Steady), ratio >= goalHealthyRate})
	}
	if s := r.Seen; s != nil {
		v = append(v, verdict{"seen URLs in Redis", fmt.Sprintf("≤ %d bytes per URL", goalSeenBytes), fmt.Sprintf("%.1f bytes (%d URLs)", s.PerURL, s.URLs), s.PerURL <= goalSeenBytes})
	}
	v = append(v, r.robotsVerdicts()...)
	return v
}

func (r *Report) goalsSection(p func(string, ...any)) {
	v := r.verdicts()
	if len(v) == 0 {
		return
	}
	p("## Goals at a glance")
	p("")
	p("| figure | goal | this run | |")
	p("|---|---|---:|---|")
	for _, x := range v {
		mark := "met"
		if !x.met {
			mark = "**not met**"
		}
		p("| %s | %s | %s | %s |", x.what, x.goal, x.got, mark)
	}
	p("")
}

func (r *Report) limiterSection(p func(string, ...any)) {
	if len(r.Uncontended) > 0 {
		p("## Limiter: uncontended acquire + release")
		p("")
		p("One site, one client. The physical limit is two round trips (acquire, release), so the baseline is two PINGs, measured twice on the same client: interleaved (two PINGs before each pair, so they meet the connection as the pair leaves it) and back-to-back (n pairs of PINGs in a tight loop after the pairs, nothing else on the connection: usually the faster of the two, so the goals use it).")
		p("")
		p("![latency](%s/latency.svg)", ChartsDir)
		p("")
		p("| algorithm | p50 | p99 | 2×PING interleaved p50 | p50 ÷ interleaved | 2×PING back-to-back p50 | p50 ÷ back-to-back | round trips / pair | commands Redis ran / pair |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.Uncontended {
			p("| %s | %s | %s | %s | %.2f× | %s | **%.2f×** | %.1f | %.1f |", x.Alg, us(x.P50), us(x.P99), us(x.TwoPingP50), x.Ratio, us(x.BackToBack), x.RatioB2B, x.RoundTrips, x.Commands)
		}
		p("")
		p("Goals, against the back-to-back PINGs: atomic ≤ %.1f×, locked ≤ %.1f×. Commands inside Lua scripts count one by one in Redis's statistics, the script call too.", goalUncontended[AlgAtomic], goalUncontended[AlgLocked])
		p("")
	}
	if len(r.Throughput) > 0 {
		p("## Limiter: throughput, 64 goroutines over 1000 sites")
		p("")
		p("![throughput](%s/throughput.svg)", ChartsDir)
		p("")
		p("| operation | per second | ÷ PINGs/s | ÷ book lock-guarded | Redis CPU / operation |")
		p("|---|---:|---:|---:|---:|")
		for _, x := range r.Throughput {
			p("| %s | %.0f | %.3f | **%.2f×** | %.1f µs |", x.Alg, x.PerSec, x.VsPing, x.VsBook, float64(x.RedisCPU)/float64(time.Microsecond))
		}
		p("")
		p("Goals: atomic ≥ %.0f× and locked ≥ %.1f× the book's lock-guarded semaphore. The book's unlocked semaphore is left out: it is not safe (see the hot site). Redis CPU is `used_cpu_user + used_cpu_sys` over the run ÷ operations. Client and server share two cores here, so a round trip saved on the client side frees CPU for Redis too.", goalThroughput[AlgAtomic], goalThroughput[AlgLocked])
		p("")
	}
	if f := r.Footprint; f != nil {
		p("## Limiter: Redis footprint")
		p("")
		p("- memory per active site (one permit held, 1000 sites): **%.0f bytes**", f.BytesPerActiveSite)
		p("- keys left %s after those sites went idle (the key TTL is 3 leases): **%d** (goal 0)", f.IdleWait.Round(100*time.Millisecond), f.KeysLeftAfterIdle)
		p("")
	}
}

func (r *Report) hotSiteSection(p func(string, ...any)) {
	if len(r.HotSite) == 0 {
		return
	}
	s := r.HotSpec
	p("## Limiter: hand-off and safety on a hot site")
	p("")
	p("%d processes × %d waiters on one site, limit %d. Each grant holds its permit for one HTTP request that the server keeps open %s; the server counts requests in flight. %s per algorithm.",
		s.Procs, s.WaitersPerProc, s.Limit, s.Hold, s.Duration)
	p("")
	p("![hand-off](%s/handoff.svg)", ChartsDir)
	p("")
	p("| algorithm | grants/s | ÷ token list | real hold | %% of nominal %.0f/s | %% of slot time used | Jain fairness | most at once (cap %d) | starts over cap |", float64(s.Limit)/s.Hold.Seconds(), s.Limit)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.HotSite {
		mark := ""
		if x.MaxAtOnce > int64(s.Limit) {
			mark = " ⚠"
		}
		p("| %s | %.0f | **%.3f×** | %s | %.1f%% | %.1f%% | %.3f | %d%s | %d |", x.Alg, x.PerSec, x.VsTokens, us(x.Hold), x.PctNominal, x.PctOfHolds, x.Jain, x.MaxAtOnce, mark, x.OverCapStart)
	}
	p("")
	p("The token list is the physical anchor: the fastest hand-off Redis can do. The site's key is a list of exactly %d tokens, made fresh for the run; a waiter takes one with `BLPOP` (the server queues blocked callers first come, first served, and hands a pushed token straight to the first) and gives it back with `RPUSH`: one round trip each way and no leases, so it is not crash-safe (a holder that dies takes its token with it) and no crawler should use it. It runs with the same processes, waiters, holds and counting server as the other rows. Goals for ours: ≥ %.2f× its grants/s and fairness (Jain, across all %d waiters) ≥ %.2f.",
		s.Limit, goalVsTokens, s.Procs*s.WaitersPerProc, goalJain)
	p("")
	p("\"Slot time used\" divides by the holds as they really lasted (the server's %s sleep plus the request itself); \"nominal\" assumes exactly %s. The book's unlocked semaphore shows what the lock buys: under contention it lets the site see more than its cap; ours never may.", s.Hold, s.Hold)
	p("")
}

func (r *Report) crawlSection(p func(string, ...any)) {
	if len(r.Crawl) == 0 {
		return
	}
	c := r.CrawlSpec
	p("## Crawl: utilisation of the sites' caps")
	p("")
	p("%d sites × %d pages, each page %s, cap %d each: the ideal is Σ cap ÷ latency = **%.0f pages/s**, given enough workers (%d, split between the processes). \"Steady\" is the rate between 10%% and 90%% of the pages, leaving out start-up and the crawl's tail; every figure but round trips is counted at the test sites or read from Redis. A row that was crawled more than once shows its median crawl, with the lowest and highest utilisation of all its crawls in brackets and the worst of their safety figures.",
		c.Sites, c.Pages, c.Latency, siteCap, float64(c.Sites*siteCap)/c.Latency.Seconds(), c.Sites*siteCap+12)
	p("")
	p("![crawl](%s/crawl.svg)", ChartsDir)
	p("")
	crawlTable(p, r.Crawl)
	p("")
	p("colly alone is the in-process optimum, with no coordination cost: a `LimitRule` of parallelism %d per site and colly's own robots.txt handling. In one process it keeps the cap, and its steady rate is the reference for \"÷ colly alone\".", siteCap)
	if slices.ContainsFunc(r.Crawl, func(x CrawlRow) bool { return strings.HasPrefix(x.Name, "colly") && x.Procs > 1 }) {
		p("In several processes each keeps only its own cap, so a site sees up to that many times its cap and every page is fetched once per process (the pages column counts them all; duplicates counts the repeats).")
	}
	p("")
	p("Goals for ours, in both semaphore modes: a steady rate ≥ %.2f× colly alone's with 1 process and ≥ %.2f× with 2 and 4; Redis round trips per page ≤ %.0f (atomic) and ≤ %.0f (locked), robots.txt's excepted (each crawler process counts them apart: its robots.txt cache, fetch lease and permit); Redis CPU per page ≤ %s (all of it, robots.txt's included); zero starts over cap. The steady-rate ratio is noisy: both crawls share the machine with Redis and the test sites.",
		goalVsColly1, goalVsCollyN, goalCrawlTrips["atomic"], goalCrawlTrips["locked"], us(goalCrawlCPU))
	p("")
	if pc := PerCoreByMode(r.Crawl); len(pc) > 0 {
		var parts []string
		for _, x := range pc {
			parts = append(parts, fmt.Sprintf("**%.0f pages/s** in %s mode (1 s ÷ %s)", x.PagesSec, x.Mode, us(x.CPU)))
		}
		p("What one Redis core serves, from the Redis CPU per page measured above (all of that mode's crawls, weighted by pages): %s. With Redis Cluster it grows ×M masters, as long as sites spread over them: the frontier and the semaphores are both split by site.", strings.Join(parts, ", "))
		p("")
	}
}

func (r *Report) scaleSection(p func(string, ...any)) {
	if len(r.Scale) == 0 {
		return
	}
	p("## Crawl: how cost grows")
	p("")
	p("One `crawler run` process on uniform sites (%s pages, cap %d). Each crawl is sized to last a few seconds at its ideal rate, which is min(workers, Σ cap) ÷ latency. Round trips per page are counted by the crawler process itself; a robots.txt fetch per site is part of the cost, so small sites pay more per page.", r.CrawlSpec.Latency, siteCap)
	p("")
	p("![scale](%s/scale.svg)", ChartsDir)
	p("")
	crawlTable(p, r.Scale)
	p("")
	if s := r.Seen; s != nil {
		p("Redis memory per URL seen (the crawl's de-duplication), %d URLs of 1,000 sites admitted to a crawl of 16 shards, %.0f bytes a URL on average: **%.1f bytes** in %d keys of 64-bit fingerprints (compact intsets), against %.1f bytes for the same URLs kept whole in one SET, measured in the same run. Goal: ≤ %d bytes.", s.URLs, s.AvgURLSize, s.PerURL, s.Keys, s.URLSetPer, goalSeenBytes)
		p("")
	}
}

func (r *Report) clusterSection(p func(string, ...any)) {
	if len(r.Cluster) == 0 {
		return
	}
	p("## Crawl: on a Redis Cluster")
	p("")
	p("The same crawl (%d sites × %d pages, %s, cap %d) with its frontier and semaphores on a Redis Cluster of %d masters started for it on this machine (no replicas), %d `crawler run --redis-cluster` processes, a frontier of %d shards. Each master's figures are read from it alone: the crawl's keys on it when the crawl ended (SCAN of the crawl's prefix), the frontier shards whose hash tag it serves, its Redis CPU and the commands it processed over the crawl.",
		r.CrawlSpec.Sites, r.CrawlSpec.Pages, r.CrawlSpec.Latency, siteCap, clusterMasters, clusterProcs, clusterShards)
	p("")
	rows := make([]CrawlRow, len(r.Cluster))
	for i, c := range r.Cluster {
		rows[i] = c.CrawlRow
	}
	crawlTable(p, rows)
	p("")
	p("| crawl | master | frontier shards | crawl's keys | share of keys | Redis CPU | share of CPU | Redis CPU / page | commands / page |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range r.Cluster {
		for _, m := range c.Masters {
			perPage := 0.0
			if c.Pages > 0 {
				perPage = float64(m.Commands) / float64(c.Pages)
			}
			p("| %s | %s | %d | %d | %.0f%% | %s | %.0f%% | %s | %.1f |", c.Name, m.Addr, m.Shards, m.Keys, 100*m.ShareKeys,
				m.CPU.Round(time.Millisecond), 100*m.ShareCPU, us(m.PerPage), perPage)
		}
	}
	p("")
	p("The Redis CPU per page in the crawl table is the sum over the masters. Keys and CPU spread over every master because both the frontier (by shard) and the semaphores (by site) are split by site; with %d sites, how even the spread is depends on where their names hash.", r.CrawlSpec.Sites)
	p("")
}

// drop is the share by which n fell from was (0 when was is 0).
func drop(was, now int64) float64 { return dropF(float64(was), float64(now)) }

func dropF(was, now float64) float64 {
	if was <= 0 {
		return 0
	}
	return (was - now) / was
}

func (r *Report) adaptiveSection(p func(string, ...any)) {
	if len(r.Fragile) == 0 && len(r.Healthy) == 0 {
		return
	}
	p("## Adaptive politeness")
	p("")
	if len(r.Fragile) > 0 {
		f := r.Fragile[0]
		p("One fragile site (testserver preset `fragile`: 50 ms alone, ×3 per other request in flight, a 503 without Retry-After when more than 2 are in flight; cap 3 from the crawler's default) crawled by %d `crawler run` processes of %d workers, adaptive off and on, the median of the crawls by pages/s. The hold-offs after a 503 without Retry-After are scaled down to the bench's seconds (`%s`; the defaults are 60 s, 24 h, 30 min). Every figure but the effective cap is counted at the site; the effective cap, extra delay and smoothed time to first byte are the site's health in Redis when the crawl ended.",
			f.Procs, f.Workers, strings.Join(fragileArgs, " "))
		p("")
		p("| adaptive | pages | seconds | pages/s | 503s (overloaded) | p50 ms | p95 ms | most at once | effective cap at the end | extra delay | smoothed TTFB |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.Fragile {
			capTxt, delay, ttfb := "–", "–", "–"
			if x.Adaptive {
				capTxt, delay, ttfb = fmt.Sprint(x.Cap), x.ExtraDelay.String(), x.TTFB.Round(time.Millisecond).String()
			}
			p("| %s | %d | %.1f | %.1f | %d | %.0f | %.0f | %d | %s | %s | %s |", map[bool]string{true: "on", false: "off"}[x.Adaptive],
				x.Pages, x.Seconds, x.PagesPerSec, x.Overloaded, x.P50, x.P95, x.MaxAtOnce, capTxt, delay, ttfb)
		}
		p("")
		p("Goals: with it on, 503s at least %.0f %% fewer and p95 latency at least %.0f %% lower than with it off, pages/s no lower.", 100*goalFragile503, 100*goalFragileP95)
		p("")
	}
	if len(r.Healthy) > 0 {
		p("The healthy crawl of the crawl section (%d sites × %d pages, %s), one process, adaptive off and on by turns: the controller must not take this busy machine's noise for a suffering site. Goal: the steady rate with it on ≥ %.2f× with it off.", r.CrawlSpec.Sites, r.CrawlSpec.Pages, r.CrawlSpec.Latency, goalHealthyRate)
		p("")
		crawlTable(p, r.Healthy)
		p("")
	}
}

func crawlTable(p func(string, ...any), rows []CrawlRow) {
	p("| crawl | sites | processes × workers | pages | duplicates | seconds | steady pages/s | ideal | of ideal | ÷ colly alone | most at once at a site (cap %d) | starts over cap | disallowed | robots.txt fetches | Redis round trips / page (robots.txt's excepted) | Redis CPU / page | machine CPU busy |", siteCap)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range rows {
		trips, cpu := "–", "–"
		if !strings.HasPrefix(x.Name, "colly") {
			trips, cpu = fmt.Sprintf("%.1f", x.RoundTrips), fmt.Sprintf("%.0f µs", float64(x.RedisCPU)/float64(time.Microsecond))
		}
		util := fmt.Sprintf("%.0f%%", 100*x.Util)
		if x.Runs > 1 {
			util += fmt.Sprintf(" (%.0f–%.0f)", 100*x.UtilMin, 100*x.UtilMax)
		}
		vs := "–"
		if x.VsColly > 0 {
			vs = fmt.Sprintf("**%.3f×**", x.VsColly)
		}
		p("| %s | %d | %d × %d | %d | %d | %.1f | %.0f | %.0f | %s | %s | %d | %d | %d | %d | %s | %s | %.0f%% |", x.Name, x.Sites, x.Procs, x.Workers,
			x.Pages, x.Duplicates, x.Seconds, x.Steady, x.Ideal, util, vs, x.MaxAtOnce, x.OverCap, x.Disallowed, x.RobotsFetches, trips, cpu, 100*x.MachineBusy)
	}
}

func us(d time.Duration) string {
	if d >= time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d µs", d.Microseconds())
}

type goal struct {
	at    float64
	label string
}

// Bar colours: ours, a peer for comparison, and a run that let a site see
// more than its cap.
const (
	colOurs   = "#2563eb"
	colPeer   = "#9ca3af"
	colAnchor = "#111827" // a physical limit, measured
	colUnsafe = "#dc2626"
)

type bar struct {
	name  string
	value float64
	color string
}

// barChart draws horizontal bars with dashed goal lines, as a standalone SVG.
func barChart(title string, bars []bar, unit string, goals []goal) string {
	const w, left, right, height, gap, top = 760.0, 230.0, 80.0, 22.0, 10.0, 40.0
	h := top + float64(len(bars))*(height+gap) + 10 + 16*float64(len(goals))
	top1 := 0.0
	for _, b := range bars {
		top1 = max(top1, b.value)
	}
	for _, g := range goals {
		top1 = max(top1, g.at)
	}
	top1 *= 1.1
	x := func(v float64) float64 { return left + v/top1*(w-left-right) }
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`, w, h, w, h)
	fmt.Fprintf(&sb, `<rect width="100%%" height="100%%" fill="#fff"/><text x="10" y="22" font-size="14" font-weight="bold">%s</text>`, esc(title))
	bottom := top + float64(len(bars))*(height+gap)
	for i, g := range goals { // lines first, so bars and labels stay readable
		fmt.Fprintf(&sb, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#dc2626" stroke-dasharray="4 3"/>`, x(g.at), x(g.at), top-6, bottom+float64(i)*16+4)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.0f" fill="#dc2626">%s</text>`, x(g.at)+4, bottom+float64(i)*16+14, esc(g.label))
	}
	for i, b := range bars {
		y := top + float64(i)*(height+gap)
		fmt.Fprintf(&sb, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`, left-8, y+height*0.7, esc(b.name))
		fmt.Fprintf(&sb, `<rect x="%.0f" y="%.1f" width="%.1f" height="%.0f" fill="%s"/>`, left, y, max(x(b.value)-left, 1), height, b.color)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" font-weight="bold">%.2f%s</text>`, x(b.value)+4, y+height*0.7, b.value, esc(unit))
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
