package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

func (r *Report) crawlSection(p func(string, ...any)) {
	if len(r.Crawl) == 0 {
		return
	}
	c := r.CrawlSpec
	p("## Crawl: utilisation of the sites' caps")
	p("")
	p("%d sites × %d pages, each page %s, cap %d each: the ideal is Σ cap ÷ latency = **%.0f pages/s**, given enough workers (%d, split between the processes). \"Steady\" is the rate between 10%% and 90%% of the pages, leaving out start-up and the crawl's tail; every figure but round trips is counted at the test sites or read from Redis. A row that was crawled more than once shows its median crawl, with the lowest and highest utilisation of all its crawls in brackets and the worst of their safety figures.",
		c.Sites, c.Pages, c.Latency, siteCap, float64(c.slots())/c.Latency.Seconds(), c.workers())
	p("")
	p("![crawl](%s/crawl.svg)", ChartsDir)
	p("")
	crawlTable(p, r.Crawl)
	p("")
	p("\"Host took\" is the share of the machine's CPU time the VM's host took for itself during the crawl shown (steal, in /proc/stat; 0 on a machine that is no VM, – where /proc/stat could not tell), here and in every crawl table below: above %.0f%% (⚠) a row's rate and Redis CPU say more about the host than about the crawl.", 100*hostTookMuch)
	p("")
	p("colly alone is the in-process optimum, with no coordination cost: a `LimitRule` of parallelism %d per site and colly's own robots.txt handling. In one process it keeps the cap, and its steady rate is the reference for \"÷ colly alone\": the crawls go in rounds (colly alone, then one crawl of each of our rows; the next round the same), each row is its median crawl with the range of all, so that a drift of the machine over the section moves the reference as it moves ours, and a stretch of seconds when this VM's host slows it costs a row at most one of its crawls.", siteCap)
	if slices.ContainsFunc(r.Crawl, func(x CrawlRow) bool { return x.Peer && x.Procs > 1 }) {
		p("In several processes each keeps only its own cap, so a site sees up to that many times its cap and every page is fetched once per process (the pages column counts them all; duplicates counts the repeats).")
	}
	p("")
	p("Goals for ours, in both semaphore modes: a steady rate %s colly alone's with 1 process and %s with 2 and 4; Redis round trips per page %s (atomic) and %s (locked), robots.txt's excepted (each crawler process counts them apart: its robots.txt cache, fetch lease and permit); Redis CPU per page %s (all of it, robots.txt's included); zero starts over cap. The steady-rate ratio is noisy: both crawls share the machine with Redis and the test sites.",
		goals.vsColly1.short(), goals.vsCollyN.short(), goals.crawlTrips["atomic"].short(), goals.crawlTrips["locked"].short(), goals.crawlCPU.short())
	p("")
	if pc := perCoreByMode(r.Crawl); len(pc) > 0 {
		var parts []string
		for _, x := range pc {
			parts = append(parts, fmt.Sprintf("**%.0f pages/s** in %s mode (1 s ÷ %s)", x.PagesSec, x.Mode, us(x.CPU)))
		}
		p("What one Redis core serves at the crawls' own rate and cost per page (all of that mode's crawls, weighted by pages): %s. With Redis Cluster it grows ×M masters, as long as sites spread over them: the frontier and the semaphores are both split by site.", strings.Join(parts, ", "))
		p("")
	}
	r.ownCoreSection(p)
	r.busySection(p)
}

// ownCoreSection shows the crawls with Redis on a CPU of its own
// (OwnCore), or why they are missing.
func (r *Report) ownCoreSection(p func(string, ...any)) {
	if r.OwnCoreNot != "" {
		p("Redis on a CPU of its own is not measured in this run: %s.", r.OwnCoreNot)
		p("")
		return
	}
	if len(r.OwnCore) == 0 {
		return
	}
	p("### Redis on a CPU of its own")
	p("")
	p("Above, Redis shares this machine's CPUs with the crawler processes and the test sites: between its pages their work fills the caches Redis's next page needs, and the kernel moves Redis from CPU to CPU. Where Redis runs in production it has a machine, or at least a core, of its own. The same crawl, 1 process in each mode, with every thread of Redis on one CPU and the bench, its test sites and the crawler processes on the others (`sched_setaffinity`, undone after; nothing else this machine runs is kept off Redis's CPU, and where CPUs are SMT siblings Redis's shares its core), each row the crawl of median Redis CPU of %d; the rate is not a goal here, as the crawl has one CPU fewer than the rows above:", r.OwnCore[0].Runs)
	p("")
	crawlTable(p, r.OwnCore)
	p("")
	var parts []string
	for _, x := range r.OwnCore {
		parts = append(parts, fmt.Sprintf("%s mode **%s** a page (%s–%s over its crawls): one Redis core serves **%.0f pages/s**", x.Mode, us(x.RedisCPU), us(x.CPUMin), us(x.CPUMax), coreRate(x.RedisCPU)))
	}
	p("Redis CPU per page with a CPU of its own: %s (×M masters on a Cluster, as long as sites spread over them). Goal: %s, as for the rows above.", strings.Join(parts, "; "), goals.crawlCPU.short())
	p("")
}

// busySection says what a busy Redis spends a page (Busy) and what a wake
// costs this one (Wake).
func (r *Report) busySection(p func(string, ...any)) {
	var parts []string
	for _, b := range r.Busy {
		if b.NotMeasured != "" {
			p("What a busy Redis spends a page in %s mode is not measured in this run: %s.", b.Mode, b.NotMeasured)
			p("")
			continue
		}
		pages := b.Crawl.Pages
		if b.CPU <= 0 || pages <= 0 {
			continue
		}
		errs := ""
		if b.Errors > 0 {
			errs = fmt.Sprintf(", %d answered with an error as in the crawl, the first %q", b.Errors, b.FirstError)
		}
		parts = append(parts, fmt.Sprintf("%s mode **%s a page** (%d pages, %.1f commands sent a page, so a round trip carried %.0f pages'; %.1f commands run a page, those in scripts included%s; the host took %s of the CPU over its replays; its sites saw at most %d at once, cap %d): at most **%.0f pages/s** a core",
			b.Mode, us(b.CPU), pages, float64(b.Commands)/float64(pages), float64(b.Depth)*float64(pages)/float64(max(1, b.Commands)), b.Calls, errs, hostTook(b.HostSteal), b.Crawl.MaxAtOnce, b.Crawl.Cap, b.PagesSec()))
	}
	if len(parts) > 0 {
		p("Those crawls' Redis sleeps between their pages (in `epoll_wait`) and pays for each wake besides the pages' commands. A busy Redis sleeps less: each crawler process's round trips carry the settlements that came while its earlier ones were on their way, so the busier Redis is, the more pages a wake serves. What a busy Redis spends a page, at least: one more crawl in each mode (1 process, the same sites), its commands captured with MONITOR and replayed in order against this Redis, %d to a round trip on one connection, as `crawler redis-replay` does, %d times (the least kept: a low bound): %s. A low bound on the cost, so a high bound on a core's pages/s (×M masters on a Cluster): a busy Redis serving many processes reads and writes each one's round trips, where the replay has one connection, and the replay runs the crawl's seconds in under one, so what depends on time in the scripts (a lease or a park running out) can go another way. It is a replay, not a crawl: the workers that would keep a Redis core busy do not fit beside it on this machine.", busyDepth, busyReplays, strings.Join(parts, "; "))
		p("")
	}
	if w := r.Wake; w != nil && w.One > 0 {
		p("What a wake costs this Redis: a PING cost it **%s** of CPU from one client at a time, which Redis sleeps and wakes for, and **%s** from %d clients at once, whose PINGs a wake serves together: a sleep and a wake cost it at least the difference, **%s** (at least: the %d clients still let it sleep now and then).", us(w.One), us(w.Many), w.Clients, us(w.Wake()), w.Clients)
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
		p("Redis memory per URL seen (the crawl's de-duplication), %d URLs of 1,000 sites admitted to a crawl of 16 shards, %.0f bytes a URL on average: **%.1f bytes** in %d keys of 64-bit fingerprints (compact intsets), against %.1f bytes for the same URLs kept whole in one SET, measured in the same run. Goal: %s.", s.URLs, s.AvgURLSize, s.PerURL, s.Keys, s.URLSetPer, goals.seenBytes.short())
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
		p("Goals: with it on, 503s at least %s fewer and p95 latency at least %s lower than with it off, pages/s no lower.", goals.fragile503.amount(), goals.fragileP95.amount())
		p("")
	}
	if len(r.Healthy) > 0 {
		p("The healthy crawl of the crawl section (%d sites × %d pages, %s), one process, adaptive off and on by turns (off then on, then on then off, and so on; the median of each shown): the controller must not take this busy machine's noise for a suffering site. Goal: the steady rate with it on %s× with it off.", r.CrawlSpec.Sites, r.CrawlSpec.Pages, r.CrawlSpec.Latency, goals.healthyRate.short())
		p("")
		crawlTable(p, r.Healthy)
		p("")
	}
}

// hostTook is a table's cell for the share of the CPU the VM's host took
// during a measurement, marked ⚠ above hostTookMuch.
func hostTook(steal float64) string {
	if steal < 0 {
		return "–"
	}
	c := fmt.Sprintf("%.1f%%", 100*steal)
	if steal > hostTookMuch {
		c += " ⚠"
	}
	return c
}

func crawlTable(p func(string, ...any), rows []CrawlRow) {
	p("| crawl | sites | processes × workers | pages | duplicates | seconds | steady pages/s | ideal | of ideal | ÷ colly alone | most at once at a site (cap %d) | starts over cap | disallowed | robots.txt fetches | Redis round trips / page (robots.txt's excepted) | Redis CPU / page | machine CPU busy | host took |", siteCap)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range rows {
		trips, cpu := "–", "–"
		if !x.Peer {
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
		p("| %s | %d | %d × %d | %d | %d | %.1f | %.0f | %.0f | %s | %s | %d | %d | %d | %d | %s | %s | %.0f%% | %s |", x.Name, x.Sites, x.Procs, x.Workers,
			x.Pages, x.Duplicates, x.Seconds, x.Steady, x.Ideal, util, vs, x.MaxAtOnce, x.OverCap, x.Disallowed, x.RobotsFetches, trips, cpu, 100*x.MachineBusy, hostTook(x.HostSteal))
	}
}
