package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/testserver"
)

// A crawl row adds up its sites' figures and counts the sites that saw a
// violation as testserver says it (SiteStats.Violation).
func TestAddSites(t *testing.T) {
	var row CrawlRow
	row.addSites([]testserver.SiteStats{
		{Cap: 3, MaxInFlight: 3, Pages: 10, MinGapMs: 0},
		{Cap: 3, MaxInFlight: 2, Pages: 5, DisallowedHits: 1},
		{Cap: 3, MaxInFlight: 1, Pages: 1, CrawlDelayMs: 100, MinGapMs: 50},
	})
	if row.Pages != 16 || row.MaxAtOnce != 3 || row.Disallowed != 1 || row.Impolite != 2 {
		t.Errorf("row %+v: want 16 pages, most 3 at once, 1 disallowed, 2 impolite sites", row)
	}
}

// Every `crawler run` child logs JSON, so its "crawl finished" record is
// read as data (scanLog), whatever stderr is.
func TestRunArgs(t *testing.T) {
	args := CrawlSpec{UserAgent: "ua"}.runArgs("c1", 7, "--redis", "redis://x")
	want := "run --redis redis://x --crawl c1 --prefix c1 --workers 7 --user-agent ua"
	if got := strings.Join(args, " "); !strings.HasPrefix(got, want) {
		t.Errorf("args %q, want them to start %q", got, want)
	}
	if i := slices.Index(args, "--log-format"); i < 0 || args[i+1] != "json" {
		t.Errorf("args %q: no --log-format json", args)
	}
}

// The steady span runs from the first sample at 10% of the pages to the
// first at 90%.
func TestSteadySpan(t *testing.T) {
	ms := time.Millisecond
	s := []sample{{25 * ms, 0}, {50 * ms, 10}, {75 * ms, 50}, {100 * ms, 90}, {125 * ms, 100}}
	if got := steadySpan(s, 100); got != 50*ms {
		t.Errorf("span %v, want 50ms", got)
	}
	if got := steadySpan(s[:1], 100); got != 0 {
		t.Errorf("span of one sample %v, want 0", got)
	}
}
