package bench

import "time"

// The goals this bench judges. The verdicts, the charts' goal lines and the
// report's sentences all read them from here.
var (
	// goalUncontended: acquire+release p50 ≤ this × two back-to-back PINGs.
	goalUncontended = map[string]float64{AlgAtomic: 1.5, AlgLocked: 2.5}
	// goalThroughput: pairs/s ≥ this × the book's lock-guarded semaphore.
	goalThroughput = map[string]float64{AlgAtomic: 4, AlgLocked: 1.5}
	// goalCrawlTrips: Redis round trips per crawled page ≤ this, by mode.
	goalCrawlTrips = map[string]float64{"atomic": 2, "locked": 3}
)

const (
	goalVsTokens  = 0.97                   // hot site: grants/s ≥ this × the token list's
	goalJain      = 0.95                   // hot site: Jain fairness across waiters
	goalCrawlCPU  = 100 * time.Microsecond // crawl: Redis CPU per page
	goalVsColly1  = 0.97                   // crawl: steady rate ≥ this × colly alone's, 1 process
	goalVsCollyN  = 0.95                   // the same with 2 or more processes
	goalSeenBytes = 40                     // Redis bytes per URL seen, at 100,000 URLs

	goalFragile503  = 0.90 // adaptive on the fragile site: 503s fall by at least this share
	goalFragileP95  = 0.50 // and its p95 latency by at least this share
	goalHealthyRate = 0.98 // the healthy crawl's steady rate, adaptive on ÷ off, at least
)

// goalVsColly is the share of colly alone's steady rate a crawl of procs
// processes must reach.
func goalVsColly(procs int) float64 {
	if procs == 1 {
		return goalVsColly1
	}
	return goalVsCollyN
}
