package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
)

// A crawl's row shows its counts and limits, "?" for a limit not
// recorded, and only the name and state of an expired or lost crawl.
func TestCrawlRow(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		c    frontier.CrawlInfo
		want string
	}{
		{frontier.CrawlInfo{Name: "a", State: frontier.StateExpired}, "a|" + frontier.StateExpired + "|||||||||||"},
		{frontier.CrawlInfo{Name: "l", State: frontier.StateLost}, "l|" + frontier.StateLost + "|||||||||||"},
		{frontier.CrawlInfo{Name: "b", State: "running", Meta: frontier.Meta{Shards: 4, MaxPages: 0, MaxPerSite: 3, Created: created, ExpiresIn: 90500 * time.Millisecond},
			Stats: frontier.Stats{Queued: 5, InFlight: 2, Done: 7, Failed: 1, Over: 0}},
			"b|running|5|2|7|1|0|4|none|3|2026-01-02 03:04:05|1m31s|"},
		{frontier.CrawlInfo{Name: "c", State: "limit", Meta: frontier.Meta{Shards: 1, MaxPages: -1}, Stats: frontier.Stats{Over: 9}},
			"c|limit|0|0|0|0|9|1|?|?|?|0s|"},
	} {
		if got := strings.ReplaceAll(crawlRow(c.c), "\t", "|"); got != c.want {
			t.Errorf("crawlRow(%s) = %q, want %q", c.c.Name, got, c.want)
		}
	}
}

// crawler delete says what it deleted, or would, and why it refused.
func TestDeleteReport(t *testing.T) {
	d := frontier.Deleted{Keys: 12, Shards: 2, Queues: 5, InFlight: 3, Registered: true, Complete: true}
	if got, want := deleteReport("p", "c", d, true), "deleted crawl c under prefix p: 12 keys (2 shards, 5 site queues) and its registry entry\n"; got != want {
		t.Errorf("deleted: %q, want %q", got, want)
	}
	d.Registered, d.Complete = false, false
	dry := deleteReport("p", "c", d, false)
	if !strings.HasPrefix(dry, "would delete crawl c under prefix p: 12 keys (2 shards, 5 site queues)\ndry run: nothing deleted; add --yes to delete\n") ||
		!strings.Contains(dry, fmt.Sprintf("stopped after %d keys", frontier.ScanBudget)) {
		t.Errorf("a dry run with its scan stopped short: %q", dry)
	}
	other := errors.New("boom")
	for err, want := range map[error]string{
		fmt.Errorf("x: %w", frontier.ErrNoCrawl): "no crawl c under prefix p (see crawler crawls)",
		fmt.Errorf("x: %w", frontier.ErrRunning): "crawl c has 3 items in flight: stop its workers first, or add --force",
		other:                                    "boom",
	} {
		if got := deleteError(err, "p", "c", frontier.Deleted{InFlight: 3}); got.Error() != want {
			t.Errorf("deleteError(%v) = %q, want %q", err, got, want)
		}
	}
}
