package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redistest"
)

// The crawl's gauges show a real frontier's queue and fleet in flight, and
// this process's in flight; the frontier is read again only once its
// figures are old, however often /metrics is scraped; and a Redis that
// does not answer costs a scrape its timeout, not a hang: the gauges keep
// their last figures and the failure is counted.
func TestProgressFromAFrontier(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := srv.Client()
	defer rdb.Close()
	ctx := context.Background()
	fr := frontier.New(rdb, &frontier.Options{Crawl: "progress"})
	if _, err := fr.Seed(ctx, "http://a.example/1", "http://b.example/2", "http://c.example/3"); err != nil {
		t.Fatal(err)
	}
	if _, err := fr.Next(ctx); err != nil {
		t.Fatal(err)
	}
	reads := 0
	read := FrontierFleet(fr)
	counted := func(ctx context.Context) (Fleet, error) { reads++; return read(ctx) }
	m := New()
	m.progress(func() int64 { return 7 }, counted, time.Hour, FleetTimeout)
	has(t, scrape(t, m), "polite_in_flight 7", "polite_crawl_queued 2", "polite_crawl_in_flight 1", "polite_crawl_stats_failures_total 0")
	if _, err := fr.Next(ctx); err != nil {
		t.Fatal(err)
	}
	has(t, scrape(t, m), "polite_crawl_queued 2", "polite_crawl_in_flight 1") // an hour has not passed
	if reads != 1 {
		t.Fatalf("the frontier was read %d times by two scrapes within its refresh interval; want 1", reads)
	}

	fresh := New()
	fresh.progress(func() int64 { return 0 }, read, 0, 300*time.Millisecond) // read at every scrape
	has(t, scrape(t, fresh), "polite_crawl_queued 1", "polite_crawl_in_flight 2", "polite_crawl_stats_failures_total 0")
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	b := scrape(t, fresh)
	has(t, b, "polite_crawl_queued 1", "polite_crawl_in_flight 2", "polite_crawl_stats_failures_total 1")
}
