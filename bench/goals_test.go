package bench

import (
	"strings"
	"testing"
	"time"
)

// A goal is written and judged from its one entry: the goals table writes
// its bound with the goal's decimals, prose with as few as it needs, and
// the figure is judged on the side of the bound the goal names.
func TestGoal(t *testing.T) {
	for _, c := range []struct {
		g            goal
		text, short  string
		meets, fails float64
	}{
		{goals.uncontended[AlgAtomic], "≤ 1.5× two PINGs (the stricter ratio)", "≤ 1.5×", 1.5, 1.51},
		{goals.throughput[AlgAtomic], "≥ 4.0× the book's lock-guarded", "≥ 4×", 4, 3.99},
		{goals.keysLeft, "0", "0", 0, 1},
		{goals.burst, "≤ 3× atomic's commands and time", "≤ 3×", 3, 3.01},
		{goals.vsCollyN, "≥ 0.95× colly alone (1 process)", "≥ 0.95×", 0.95, 0.94},
		{goals.crawlCPU, "≤ 100 µs", "≤ 100 µs", float64(100 * time.Microsecond), float64(101 * time.Microsecond)},
		{goals.overCap, "0 starts over cap", "0 starts over cap", 0, 1},
		{goals.fragile503, "≥ 90 %", "≥ 90 %", 0.9, 0.89},
		{goals.seenBytes, "≤ 40 bytes per URL", "≤ 40 bytes", 40, 40.1},
		{goals.robotsPerPath, "≤ 5.00 ms per Allowed", "≤ 5.00 ms", float64(robotsGoal), float64(robotsGoal + 1)},
	} {
		if got := c.g.String(); got != c.text {
			t.Errorf("%+v: written %q, want %q", c.g, got, c.text)
		}
		if got := c.g.short(); got != c.short {
			t.Errorf("%+v: in prose %q, want %q", c.g, got, c.short)
		}
		if !c.g.met(c.meets) || c.g.met(c.fails) {
			t.Errorf("%s: met(%v) = %v, met(%v) = %v", c.text, c.meets, c.g.met(c.meets), c.fails, c.g.met(c.fails))
		}
	}
	if vsColly(1) != goals.vsColly1 || vsColly(4) != goals.vsCollyN {
		t.Error("vsColly picks the wrong goal for a process count")
	}
}

// The charts draw their goal lines where the verdicts judge.
func TestChartGoalLines(t *testing.T) {
	r := &Report{Uncontended: []LatencyRow{{Alg: AlgAtomic, RatioB2B: 1, Judged: 1}}, HotSpec: HotSiteSpec{Limit: 3},
		HotSite: []HandoffRow{{Alg: AlgTokenList, VsTokens: 1}}}
	c := r.charts()
	for name, want := range map[string]string{"latency.svg": "atomic goal ≤ 1.5×", "handoff.svg": "goal ≥ 0.97×"} {
		if !strings.Contains(c[name], ">"+want+"<") {
			t.Errorf("%s lacks the goal line %q", name, want)
		}
	}
}
