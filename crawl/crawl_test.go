package crawl

import (
	"bytes"
	"context"
	"fmt"
	"github.com/polite-crawler/polite/internal/sitetest"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/metrics"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// serve runs p's sites until the test ends.
func serve(t *testing.T, p testserver.Profile) *testserver.Server {
	t.Helper()
	ts := sitetest.Start(t, p)
	return ts
}

// Two crawlers in this process (so under -race) share one crawl of the
// mixed profile; the server sees every site within its cap and every
// reachable page fetched once. Metrics count what happened.
func TestTwoCrawlersShareACrawl(t *testing.T) {
	p, _ := testserver.Preset("mixed", 10, 1)
	ts := serve(t, p)
	var seeds []string
	for _, s := range ts.Sites() {
		seeds = append(seeds, s.URL+"/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := metrics.New()
	var outs [2]bytes.Buffer
	var wg sync.WaitGroup
	for i := range outs {
		rdb := srv.Client()
		defer rdb.Close()
		lim := limiter.New(rdb, &limiter.Options{Prefix: "t:share", Lease: time.Second, Mode: limiter.Mode(i)})
		defer lim.Close()
		rob := NewRobotsCache(rdb, lim, 3, robots.CacheOptions{Prefix: "t:share", UserAgent: "politebot/1.0"}, m)
		if i == 0 {
			m.Robots(rob)
		}
		fr := frontier.New(rdb, &frontier.Options{Prefix: "t:share", Crawl: "share", Visibility: time.Minute})
		c := New(fr, lim, rob, Options{Workers: 4, Name: fmt.Sprint("w", i), UserAgent: "politebot/1.0", Timeout: 20 * time.Second, Out: &outs[i], Observer: m})
		if _, err := c.Seed(ctx, seeds); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("crawl did not finish")
	}
	expected := ts.Expected()
	for i, s := range ts.Stats().Sites {
		if s.MaxInFlight > s.Cap || s.DisallowedHits > 0 || s.DuplicateFetches > 0 || s.RobotsFetches != 1 ||
			(s.CrawlDelayMs > 0 && s.MinGapMs < float64(s.CrawlDelayMs)) {
			t.Errorf("site %d (%s): %+v", i, s.Rules, s)
		}
		if got := int(s.Pages); got != len(expected[i]) {
			t.Errorf("site %d: %d pages fetched, %d reachable", i, got, len(expected[i]))
		}
	}
	if outs[0].Len() == 0 || outs[1].Len() == 0 || !strings.Contains(outs[1].String(), `"worker":"w1"`) {
		t.Errorf("results: %d and %d bytes", outs[0].Len(), outs[1].Len())
	}

	// The same figures through /metrics.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	mctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- m.Serve(mctx, addr) }()
	var body string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`polite_fetches_total{code="200"}`, "polite_permit_wait_seconds_count", "polite_permits_held 0",
		`polite_robots_policies_total{source="fetched"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Workers keep a connection per slot of a site open between requests:
// the site sees a handful of connections, not one per request.
func TestConnectionsAreReused(t *testing.T) {
	ts := serve(t, testserver.Profile{Name: "conns", Seed: 1, Sites: []testserver.SiteSpec{
		{Pages: 60, Links: 4, Latency: testserver.Duration(20 * time.Millisecond)}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := srv.Client()
	defer rdb.Close()
	lim := limiter.New(rdb, &limiter.Options{Prefix: "t:conns", Lease: time.Second})
	defer lim.Close()
	rob := NewRobotsCache(rdb, lim, 3, robots.CacheOptions{Prefix: "t:conns", UserAgent: "politebot/1.0"}, nil)
	fr := frontier.New(rdb, &frontier.Options{Prefix: "t:conns", Crawl: "conns", Visibility: time.Minute})
	c := New(fr, lim, rob, Options{Workers: 6, Cap: 3, UserAgent: "politebot/1.0", Timeout: 20 * time.Second})
	if _, err := c.Seed(ctx, []string{ts.Sites()[0].URL + "/"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st := ts.Stats().Sites[0]
	t.Logf("%d requests over %d connections (cap %d)", st.Requests, st.Connections, st.Cap)
	if st.Pages < 50 {
		t.Fatalf("only %d pages fetched: the test proves nothing", st.Pages)
	}
	// One per slot, one for robots.txt, and slack for a connection the
	// site closed while idle.
	if st.Connections > int64(2*st.Cap+1) {
		t.Errorf("%d connections for %d requests at %d at once", st.Connections, st.Requests, st.Cap)
	}
}

// When Run's ctx ends, the downloads under way get StopGrace to finish:
// they are settled, so the crawler that takes over fetches none of them
// again, and no download is cut short at the site. With no grace they are
// cut and given back, and fetched twice.
func TestStopGraceLetsDownloadsFinish(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{{"grace", 10 * time.Second}, {"none", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			ts := serve(t, testserver.Profile{Name: "stop", Seed: 1, Sites: []testserver.SiteSpec{
				{Pages: 6, Links: 6, Slow: 1, SlowFor: testserver.Duration(2 * time.Second), PageBytes: 20000}}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rdb := srv.Client()
			defer rdb.Close()
			prefix := "t:stop:" + tc.name
			crawler := func() *Crawler {
				lim := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: time.Second})
				t.Cleanup(func() { lim.Close() })
				rob := NewRobotsCache(rdb, lim, 3, robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"}, nil)
				fr := frontier.New(rdb, &frontier.Options{Prefix: prefix, Crawl: "stop", Visibility: time.Minute})
				return New(fr, lim, rob, Options{Workers: 3, Cap: 3, UserAgent: "politebot/1.0", Timeout: 20 * time.Second, StopGrace: tc.grace})
			}
			first := crawler()
			if _, err := first.Seed(ctx, []string{ts.Sites()[0].URL + "/"}); err != nil {
				t.Fatal(err)
			}
			stop, cancelFirst := context.WithCancel(ctx)
			defer cancelFirst()
			ran := make(chan error, 1)
			go func() { ran <- first.Run(stop) }()
			// Stop it while three slow pages stream.
			for ts.Stats().Sites[0].InFlight < 3 {
				if ctx.Err() != nil {
					t.Fatal("the first crawler never had 3 downloads under way")
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			start := time.Now()
			cancelFirst()
			if err := <-ran; err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if err := crawler().Run(ctx); err != nil {
				t.Fatal(err)
			}
			st := ts.Stats().Sites[0]
			t.Logf("grace %v: stopped in %v; %d requests, %d cut short, %d fetched twice", tc.grace, took.Round(time.Millisecond), st.Requests, st.CutShort, st.DuplicateFetches)
			got := ts.FetchedOK(0)
			for p := range ts.Expected()[0] {
				if !got[p] {
					t.Errorf("%s never fetched", p)
				}
			}
			if tc.grace > 0 && (st.CutShort != 0 || st.DuplicateFetches != 0) {
				t.Errorf("with a grace: %d downloads cut short, %d fetched twice; want none", st.CutShort, st.DuplicateFetches)
			}
			// 2 s streams, stopped 0.3 s in: without a grace they are cut
			// at once, and fetched again by the second crawler.
			if tc.grace == 0 && (st.CutShort < 3 || st.DuplicateFetches < 3 || took > 1500*time.Millisecond) {
				t.Errorf("without a grace: stopped in %v, %d cut short, %d fetched twice; want at once, 3 and 3", took, st.CutShort, st.DuplicateFetches)
			}
		})
	}
}

// Links that the site's robots.txt closes, once this process holds that
// robots.txt, are dropped before they are queued: they cost the frontier
// nothing and the crawl no turn, and are counted. Before, each was queued,
// taken, checked and skipped: a round trip to Redis for nothing.
func TestDisallowedLinksAreNotQueued(t *testing.T) {
	ts := serve(t, testserver.Profile{Name: t.Name(), Seed: 3, Sites: []testserver.SiteSpec{
		{Pages: 40, Links: 6, Robots: testserver.Robots{Disallow: []string{"/private/"}}}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := srv.Client()
	defer rdb.Close()
	prefix := redistest.Prefix(t)
	lim := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: time.Second})
	defer lim.Close()
	rob := NewRobotsCache(rdb, lim, 3, robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"}, nil)
	fr := frontier.New(rdb, &frontier.Options{Prefix: prefix, Crawl: "closedlinks", Visibility: time.Minute})
	c := New(fr, lim, rob, Options{Workers: 1, UserAgent: "politebot/1.0", Timeout: 20 * time.Second})
	if _, err := c.Seed(ctx, []string{ts.Sites()[0].URL + "/"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	p := c.Progress()
	st := ts.Stats().Sites[0]
	if p.LinksDisallowed == 0 || p.Skipped != 0 || st.DisallowedHits != 0 {
		t.Fatalf("links closed by robots.txt: %d dropped, %d queued and skipped, %d requested; want some dropped, none queued or requested",
			p.LinksDisallowed, p.Skipped, st.DisallowedHits)
	}
	fs, err := fr.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fs.Admitted != p.Pages {
		t.Fatalf("admitted %d URLs for %d pages fetched: the closed links were queued", fs.Admitted, p.Pages)
	}
}
