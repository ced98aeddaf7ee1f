package bench

import (
	"strings"
	"testing"
	"time"
)

// The summary gives a line per row; the token list is labelled the anchor,
// not a contender, and every capped row says its most at once and cap.
func TestSummary(t *testing.T) {
	r := &Report{HotSpec: HotSiteSpec{Limit: 3},
		HotSite: []HandoffRow{{Alg: AlgTokenList, PerSec: 1000, VsTokens: 1, MaxAtOnce: 3}, {Alg: AlgAtomic, PerSec: 990, VsTokens: 0.99, MaxAtOnce: 3}},
		Crawl: []CrawlRow{{Name: "polite atomic, 1 process(es)", Mode: "atomic", Cap: 3, MaxAtOnce: 2, Pages: 10, RedisCPU: 50 * time.Microsecond},
			{Name: "colly alone, 1 process(es)", Peer: true, Cap: 3, MaxAtOnce: 3}},
		Fragile: []FragileRow{{Adaptive: true, Procs: 4, MaxAtOnce: 2, Cap: 2}},
		Robots:  []RobotsRow{{Name: "f", PerCheck: time.Millisecond}},
	}
	var b strings.Builder
	r.Summary(&b)
	out := b.String()
	for _, want := range []string{
		"  anchor      token list (BLPOP/RPUSH)       1000 grants/s = 1.000× token list,",
		"  hot site    polite atomic                   990 grants/s",
		"most at once 2 (cap 3)\n",
		"  redis core  polite atomic                50µs Redis CPU per page at the crawls' rate: one Redis core serves 20000 pages/s",
		"  fragile     adaptive true  4 processes   0.0 pages/s, 0 503s, p95 0 ms, effective cap 2, most at once 2 (cap 3)\n",
		"  robots      f: 1ms per check (goal ≤ 5ms)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count("\n"+out, "\n  crawl       "); n != 2 {
		t.Errorf("%d crawl lines, want 2:\n%s", n, out)
	}
}
