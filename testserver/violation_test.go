package testserver

import "testing"

func TestSiteViolation(t *testing.T) {
	ok := SiteStats{Cap: 2, MaxInFlight: 2, CrawlDelayMs: 100, MinGapMs: 100}
	for _, c := range []struct {
		name string
		edit func(*SiteStats)
		want string
	}{
		{"at cap, gap equal to the delay", func(*SiteStats) {}, ""},
		{"no requests yet", func(s *SiteStats) { s.MaxInFlight, s.MinGapMs = 0, -1 }, ""},
		{"no delay asked, gap 0", func(s *SiteStats) { s.CrawlDelayMs, s.MinGapMs = 0, 0 }, ""},
		{"refusals, duplicates and robots fetches", func(s *SiteStats) { s.Status5xx, s.Overloaded, s.DuplicateFetches, s.RobotsFetches = 9, 9, 9, 9 }, ""},
		{"more at once than the cap", func(s *SiteStats) { s.MaxInFlight = 3 }, "3 at once, cap 2 (0 started over it)"},
		{"a start over the cap", func(s *SiteStats) { s.OverCap = 1 }, "2 at once, cap 2 (1 started over it)"},
		{"a disallowed request", func(s *SiteStats) { s.DisallowedHits = 2 }, "2 disallowed request(s)"},
		{"a gap under the delay", func(s *SiteStats) { s.MinGapMs = 99.4 }, "gap 99 ms under crawl delay 100 ms"},
		{"all of them", func(s *SiteStats) { s.MaxInFlight, s.OverCap, s.DisallowedHits, s.MinGapMs = 4, 2, 1, 0 },
			"4 at once, cap 2 (2 started over it); 1 disallowed request(s); gap 0 ms under crawl delay 100 ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := ok
			c.edit(&s)
			if got := s.Violation(); got != c.want {
				t.Errorf("Violation() = %q, want %q", got, c.want)
			}
		})
	}
}

func TestAddrViolation(t *testing.T) {
	for _, c := range []struct {
		name string
		a    AddrStats
		want string
	}{
		{"none", AddrStats{Cap: 4, MaxInFlight: 4}, ""},
		{"no cap per IP, many at once", AddrStats{MaxInFlight: 40}, ""},
		{"a start over the cap", AddrStats{Cap: 4, MaxInFlight: 5, OverCap: 1}, "1 request(s) started with cap 4 in flight"},
		{"misdirected", AddrStats{Misdirected: 3}, "3 misdirected request(s) (421)"},
		{"both", AddrStats{Cap: 1, OverCap: 2, Misdirected: 1}, "2 request(s) started with cap 1 in flight; 1 misdirected request(s) (421)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.a.Violation(); got != c.want {
				t.Errorf("Violation() = %q, want %q", got, c.want)
			}
		})
	}
}
