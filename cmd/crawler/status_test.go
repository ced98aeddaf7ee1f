package main

import (
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/limiter"
)

// A site's status row shows "-" for health the limiter has not recorded,
// the backoff with its level, and "at cap" for a site that waits for one
// of its fetches to settle.
func TestSiteRow(t *testing.T) {
	for _, c := range []struct {
		name string
		s    frontier.SiteQueue
		ls   limiter.SiteStatus
		want string
	}{
		{"fresh", frontier.SiteQueue{Site: "a.test", Queued: 5}, limiter.SiteStatus{},
			"a.test|3?|-|0s|-|-|0|0|5|0s|0s|"},
		{"busy, backing off", frontier.SiteQueue{Site: "b.test:8080", Queued: 2, ReadyIn: 1500 * time.Millisecond},
			limiter.SiteStatus{Cap: 1, TTFB: 123456 * time.Microsecond, BackoffLeft: 61400 * time.Millisecond, Backoffs: 2,
				ExtraDelay: time.Second, Holders: 1, Waiting: 4, NextIn: 2 * time.Second},
			"b.test:8080|3|1|1s|123ms|1m1s (x2)|1|4|2|1.5s|2s|"},
		{"at cap", frontier.SiteQueue{Site: "c.test", Queued: 1, ReadyIn: time.Second, Full: true}, limiter.SiteStatus{Cap: 3, Holders: 3},
			"c.test|3|3|0s|-|-|3|0|1|at cap|0s|"},
	} {
		t.Run(c.name, func(t *testing.T) {
			limit := limitText(3, c.name != "fresh") // no robots.txt cached for the fresh site
			if got := strings.ReplaceAll(siteRow(c.s, limit, c.ls), "\t", "|"); got != c.want {
				t.Errorf("siteRow = %q, want %q", got, c.want)
			}
		})
	}
}

// The limits line names the links a site's queue bound dropped, and the
// flag that sets it; a crawl without any says nothing of it.
func TestLimitsSiteFull(t *testing.T) {
	m := frontier.Meta{Shards: 4, MaxPages: 0, MaxPerSite: 3}
	if got := limits(m, frontier.Stats{SiteFull: 25}); !strings.Contains(got, "25 links dropped at a site's --max-queued-per-site") {
		t.Errorf("limits = %q", got)
	}
	if got := limits(m, frontier.Stats{}); strings.Contains(got, "max-queued-per-site") {
		t.Errorf("limits without drops = %q", got)
	}
}

// status warns of a crawl past what its seen sets keep compact at Redis's
// default intset size, and names the setting; not before.
func TestSeenNote(t *testing.T) {
	if note := seenNote(131_072); note != "" {
		t.Errorf("131,072 URLs in a shard: %q, want nothing (they fit)", note)
	}
	note := seenNote(200_000)
	if !strings.Contains(note, "200000 in one shard, past the 131072") || !strings.Contains(note, "set-max-intset-entries 4096 keeps 1048576") {
		t.Errorf("200,000 URLs in a shard: %q", note)
	}
}
