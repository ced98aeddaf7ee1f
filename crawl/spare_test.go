package crawl

import (
	"context"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/metrics"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
)

// A worker that stays on its site keeps its permit's slot for the next
// page in the round trip that releases it and settles its page, in either
// mode: well under two Redis round trips a page (one, but for the crawl's
// start, its end and the turns that let the round robin choose), with every
// site within its cap and every page fetched once, counted at the sites.
func TestSparePermitsSaveRoundTrips(t *testing.T) {
	for _, mode := range []limiter.Mode{limiter.ModeLocked, limiter.ModeAtomic} {
		t.Run(mode.String(), func(t *testing.T) { spareCrawl(t, mode) })
	}
}

func spareCrawl(t *testing.T, mode limiter.Mode) {
	site := testserver.SiteSpec{Pages: 200, Links: 6, Latency: testserver.Duration(5 * time.Millisecond)}
	ts := serve(t, testserver.Profile{Name: t.Name(), Seed: 3, Sites: []testserver.SiteSpec{site, site, site, site}})
	var seeds []string
	for _, s := range ts.Sites() {
		seeds = append(seeds, s.URL+"/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rdb := srv.Client()
	defer rdb.Close()
	m := metrics.New()
	m.CountRoundTrips(rdb)
	prefix := "t:spare:" + mode.String()
	lim := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: 5 * time.Second, Mode: mode})
	defer lim.Close()
	rob := NewRobotsCache(rdb, lim, 3, robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"}, m)
	fr := frontier.New(rdb, &frontier.Options{Prefix: prefix, Crawl: "spare-" + mode.String(), Visibility: time.Minute})
	c := New(fr, lim, rob, Options{Workers: 12, UserAgent: "politebot/1.0", Timeout: 20 * time.Second, Out: io.Discard, Observer: m})
	if _, err := c.Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	before := m.RoundTrips() - m.RobotsRoundTrips()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	pages := 0
	expected := ts.Expected()
	for i, s := range ts.Stats().Sites {
		if v := s.Violation(); v != "" || s.DuplicateFetches > 0 || int(s.Pages) != len(expected[i]) {
			t.Errorf("site %d: %q, %d duplicates, %d of %d pages", i, v, s.DuplicateFetches, s.Pages, len(expected[i]))
		}
		pages += int(s.Pages)
		u, _ := url.Parse(ts.Sites()[i].URL)
		if st, err := lim.Status(ctx, robots.Site(u), 3); err != nil || st.Holders != 0 {
			t.Errorf("site %d after the crawl: %+v, %v; want no permit held", i, st, err)
		}
	}
	trips := float64(m.RoundTrips()-m.RobotsRoundTrips()-before) / float64(pages)
	t.Logf("%d pages, %.2f Redis round trips a page", pages, trips)
	if trips > 1.5 {
		t.Errorf("%.2f Redis round trips a page, want at most 1.5 with spare permits", trips)
	}
}
