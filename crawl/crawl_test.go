package crawl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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

func TestMain(m *testing.M) {
	var err error
	if srv, err = redistest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

// Two crawlers in this process (so under -race) share one crawl of the
// mixed profile; the server sees every site within its cap and every
// reachable page fetched once. Metrics count what happened.
func TestTwoCrawlersShareACrawl(t *testing.T) {
	p, _ := testserver.Preset("mixed", 10, 1)
	ts, err := testserver.New(p, testserver.WithControl(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Start(); err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
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
	for _, want := range []string{`polite_fetches_total{status="200"}`, "polite_permit_wait_seconds_count", "polite_permits_held 0",
		`polite_robots_policies_total{source="fetched"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Workers keep a connection per slot of a site open between requests:
// the site sees a handful of connections, not one per request.
func TestConnectionsAreReused(t *testing.T) {
	ts, err := testserver.New(testserver.Profile{Name: "conns", Seed: 1, Sites: []testserver.SiteSpec{
		{Pages: 60, Links: 4, Latency: testserver.Duration(20 * time.Millisecond)}}}, testserver.WithControl(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Start(); err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
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
