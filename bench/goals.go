package bench

import (
	"strconv"
	"time"
)

// A goal is a bound a measured figure must keep.
// It is stated once, in goals below: the verdicts ("Goals at a glance"),
// the charts' goal lines and the report's sentences all write it, and judge
// by it, from there.
type goal struct {
	cmp  string  // "≤" or "≥": which side of at the figure must be; "" for exactly at
	at   float64 // the bound; a time.Duration's nanoseconds when dur
	prec int     // decimals the goals table and the charts write at with
	unit string  // written after the number: "×", " bytes", " %"
	pct  bool    // at is a share, written as a percentage
	dur  bool    // at is a time.Duration, written as us writes one
	of   string  // what the figure is measured against, written after the bound in the goals table
}

// goals is every goal this bench judges.
var goals = struct {
	uncontended   map[string]goal // acquire+release p50 ÷ two PINGs, the stricter of the two ratios, by algorithm
	throughput    map[string]goal // pairs/s ÷ the book's lock-guarded semaphore's, by algorithm
	keysLeft      goal            // the limiter's keys left once its sites go idle
	burst         goal            // ModeLocked's commands and time for a burst ÷ ModeAtomic's
	vsTokens      goal            // hot site: grants/s ÷ the token list's
	jain          goal            // hot site: Jain fairness across all waiters
	vsColly1      goal            // crawl: steady rate ÷ colly alone's, 1 process
	vsCollyN      goal            // the same with 2 or more processes
	crawlTrips    map[string]goal // crawl: Redis round trips per page, robots.txt's excepted, by mode
	crawlCPU      goal            // crawl: Redis CPU per page
	overCap       goal            // crawl: requests started with the cap already in flight
	impolite      goal            // crawl: sites that saw a violation (testserver.SiteStats.Violation)
	fragile503    goal            // adaptive on the fragile site: the share by which 503s fall
	fragileP95    goal            // and the share by which its p95 latency falls
	healthyRate   goal            // the healthy crawl's steady rate, adaptive on ÷ off
	seenBytes     goal            // Redis bytes per URL seen, at 100,000 URLs
	robotsPerPath goal            // one robots.Policy.Allowed check on an 8 KiB path
}{
	uncontended: map[string]goal{
		AlgAtomic: {cmp: "≤", at: 1.5, prec: 1, unit: "×", of: "two PINGs (the stricter ratio)"},
		AlgLocked: {cmp: "≤", at: 2.5, prec: 1, unit: "×", of: "two PINGs (the stricter ratio)"},
	},
	throughput: map[string]goal{
		AlgAtomic: {cmp: "≥", at: 4, prec: 1, unit: "×", of: "the book's lock-guarded"},
		AlgLocked: {cmp: "≥", at: 1.5, prec: 1, unit: "×", of: "the book's lock-guarded"},
	},
	keysLeft:      goal{at: 0},
	burst:         goal{cmp: "≤", at: 3, unit: "×", of: "atomic's commands and time"},
	vsTokens:      goal{cmp: "≥", at: 0.97, prec: 2, unit: "×", of: "the token list's grants/s"},
	jain:          goal{cmp: "≥", at: 0.95, prec: 2},
	vsColly1:      goal{cmp: "≥", at: 0.97, prec: 2, unit: "×", of: "colly alone (1 process)"},
	vsCollyN:      goal{cmp: "≥", at: 0.95, prec: 2, unit: "×", of: "colly alone (1 process)"},
	crawlTrips:    map[string]goal{"atomic": {cmp: "≤", at: 2}, "locked": {cmp: "≤", at: 3}},
	crawlCPU:      goal{cmp: "≤", at: float64(100 * time.Microsecond), dur: true},
	overCap:       goal{at: 0, unit: " starts over cap"},
	impolite:      goal{at: 0, unit: " sites with a violation"},
	fragile503:    goal{cmp: "≥", at: 0.90, unit: " %", pct: true},
	fragileP95:    goal{cmp: "≥", at: 0.50, unit: " %", pct: true},
	healthyRate:   goal{cmp: "≥", at: 0.98, prec: 2},
	seenBytes:     goal{cmp: "≤", at: 40, unit: " bytes", of: "per URL"},
	robotsPerPath: goal{cmp: "≤", at: float64(robotsGoal), dur: true, of: "per Allowed"},
}

// robotsGoal is the most one robots.Policy.Allowed check may cost on an
// 8 KiB path, whatever the site's robots.txt says.
const robotsGoal = 5 * time.Millisecond

// vsColly is the goal for the steady rate of a crawl of procs processes,
// as a share of colly alone's.
func vsColly(procs int) goal {
	if procs == 1 {
		return goals.vsColly1
	}
	return goals.vsCollyN
}

// met reports whether v keeps the goal; v is in at's terms (a share, not a
// percentage; a Duration's nanoseconds).
func (g goal) met(v float64) bool {
	switch g.cmp {
	case "≤":
		return v <= g.at
	case "≥":
		return v >= g.at
	}
	return v == g.at
}

// amount is the bound's number and unit, with g.prec decimals: "1.5×".
func (g goal) amount() string { return g.amountPrec(g.prec) }

// bound is the amount with its comparison: "≤ 1.5×".
func (g goal) bound() string { return g.withCmp(g.amount()) }

// String is the goal as the goals table writes it: "≤ 1.5× two PINGs
// (the stricter ratio)".
func (g goal) String() string {
	if g.of == "" {
		return g.bound()
	}
	return g.bound() + " " + g.of
}

// short is the bound as prose writes it, with no more decimals than the
// number needs: "≥ 4×" where bound writes "≥ 4.0×".
func (g goal) short() string { return g.withCmp(g.amountPrec(-1)) }

// line is the goal's dashed line on a chart, labelled prefix + bound.
func (g goal) line(prefix, suffix string) goalLine {
	return goalLine{at: g.at, label: prefix + g.bound() + suffix}
}

func (g goal) withCmp(amount string) string {
	if g.cmp == "" {
		return amount
	}
	return g.cmp + " " + amount
}

func (g goal) amountPrec(prec int) string {
	switch {
	case g.dur:
		return us(time.Duration(g.at))
	case g.pct:
		return strconv.FormatFloat(100*g.at, 'f', prec, 64) + g.unit
	}
	return strconv.FormatFloat(g.at, 'f', prec, 64) + g.unit
}
