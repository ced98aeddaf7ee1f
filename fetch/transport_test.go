package fetch

import (
	"context"
	"errors"
	"fmt"
	"github.com/polite-crawler/polite/internal/sitetest"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	redistest.Main(m, &srv, func(s *redistest.Server) error {
		return os.Setenv("REDIS_ADDR", s.Addr) // for the examples
	})
}

// keyPrefix is the Redis key prefix of the test's keys.
func keyPrefix(t *testing.T) string { return redistest.Prefix(t) }

// setup returns a transport on a fresh key prefix and a testserver.
func setup(t *testing.T, lease time.Duration, sites ...testserver.SiteSpec) (*Transport, *testserver.Server) {
	t.Helper()
	ts := sitetest.Start(t, testserver.Profile{Name: t.Name(), Seed: 1, Sites: sites})
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	prefix := keyPrefix(t)
	l := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: lease})
	t.Cleanup(func() { l.Close() })
	tr := &Transport{Limiter: l, Cap: 3}
	tr.Robots = robots.NewCache(rdb, &http.Client{Transport: &RobotsTransport{Limiter: l}}, &robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"})
	return tr, ts
}

func get(c *http.Client, u string) (int, error) { return getCtx(context.Background(), c, u) }

// getCtx is get under ctx (which may carry a Reservation).
func getCtx(ctx context.Context, c *http.Client, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

func TestCapHeldAtTheServer(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 30, Links: 1, Latency: testserver.Duration(20 * time.Millisecond),
		Robots: testserver.Robots{Concurrency: 2}})
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, err := get(c, fmt.Sprintf("%s/p/%d", ts.Sites()[0].URL, i)); err != nil || code != 200 {
				t.Errorf("%d %v", code, err)
			}
		}()
	}
	wg.Wait()
	st := ts.Stats().Sites[0]
	if st.MaxInFlight != 2 || st.OverCap != 0 || st.RobotsFetches != 1 || st.Requests != 25 {
		t.Fatalf("at the server: max in flight %d (cap 2), over cap %d, robots.txt %d, requests %d",
			st.MaxInFlight, st.OverCap, st.RobotsFetches, st.Requests)
	}
}

func TestDisallowedNeverRequested(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 5, Links: 1, Robots: testserver.Robots{Disallow: []string{"/private/"}}},
		testserver.SiteSpec{Pages: 5, Links: 1, Robots: testserver.Robots{Status: 503}})
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for _, u := range []string{ts.Sites()[0].URL + "/private/1", ts.Sites()[0].URL + "/redirect-private/2", ts.Sites()[1].URL + "/p/1"} {
		if _, err := get(c, u); !errors.Is(err, ErrDisallowed) {
			t.Errorf("GET %s: %v, want ErrDisallowed", u, err)
		}
	}
	for i, st := range ts.Stats().Sites {
		if st.DisallowedHits != 0 {
			t.Errorf("site %d saw %d disallowed requests", i, st.DisallowedHits)
		}
	}
	if st := ts.Stats().Sites[0]; st.Status["302"] != 1 {
		t.Errorf("the redirect itself is allowed and was fetched once: %v", st.Status)
	}
}

// The permit goes back when the body is closed, read to the end or not.
func TestReleaseOnClose(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 5, Links: 1, PageBytes: 200 << 10, Robots: testserver.Robots{Concurrency: 1}})
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	site := robots.Site(mustURL(t, ts.Sites()[0].URL))
	resp, err := c.Get(ts.Sites()[0].URL + "/p/1")
	if err != nil {
		t.Fatal(err)
	}
	io.CopyN(io.Discard, resp.Body, 100)
	if st, _ := tr.Limiter.Status(context.Background(), site, 1); st.Holders != 1 {
		t.Fatalf("while the body is open: %+v", st)
	}
	resp.Body.Close()
	if st, _ := tr.Limiter.Status(context.Background(), site, 1); st.Holders != 0 {
		t.Fatalf("after Close before EOF: %+v", st)
	}
	if code, err := get(c, ts.Sites()[0].URL+"/p/2"); err != nil || code != 200 {
		t.Fatal(code, err)
	}
}

// A download three leases long keeps its permit (refreshed) and the cap holds.
func TestLongDownloadKeepsPermit(t *testing.T) {
	const lease = 300 * time.Millisecond
	tr, ts := setup(t, lease, testserver.SiteSpec{Pages: 5, Links: 1, PageBytes: 4000, SlowFor: testserver.Duration(3 * lease),
		Robots: testserver.Robots{Concurrency: 1}})
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, err := get(c, fmt.Sprintf("%s/slow/%d", ts.Sites()[0].URL, i)); err != nil || code != 200 {
				t.Errorf("slow download: %d %v", code, err)
			}
		}()
	}
	wg.Wait()
	if st := ts.Stats().Sites[0]; st.MaxInFlight != 1 || st.Status["200"] != 4 {
		t.Fatalf("max in flight %d (cap 1), statuses %v", st.MaxInFlight, st.Status)
	}
}

func TestRetryAfterHoldsTheFleet(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 5, Links: 1})
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	if code, _ := get(c, ts.Sites()[0].URL+"/retry/2"); code != 503 {
		t.Fatalf("first /retry/2: %d", code)
	}
	st, _ := tr.Limiter.Status(context.Background(), robots.Site(mustURL(t, ts.Sites()[0].URL)), 3)
	if st.NextIn < 500*time.Millisecond {
		t.Fatalf("Retry-After: 1 did not hold the site: %+v", st)
	}
	start := time.Now()
	if code, _ := get(c, ts.Sites()[0].URL+"/retry/2"); code != 200 {
		t.Fatalf("second /retry/2: %d", code)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Fatalf("next request went out %v after a Retry-After of 1s", waited)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{"": 0, "7": 7 * time.Second, "junk": 0, "-3": 0, "99999": time.Hour,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second} {
		if got := RetryAfter(http.Header{"Retry-After": {v}}, now); got != want {
			t.Errorf("RetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
	// A date counts from the site's Date, not from our clock, an hour off.
	at := http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}, "Date": {now.Format(http.TimeFormat)}}
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		if got := RetryAfter(at, now.Add(skew)); got != 90*time.Second {
			t.Errorf("RetryAfter with our clock %s off: %v, want 90s", skew, got)
		}
	}
}

func TestReserve(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 5, Links: 1, Robots: testserver.Robots{Concurrency: 1, Disallow: []string{"/private/"}}})
	ctx := context.Background()
	u := mustURL(t, ts.Sites()[0].URL+"/p/1")
	if _, err := tr.Reserve(ctx, mustURL(t, ts.Sites()[0].URL+"/private/1"), 0); !errors.Is(err, ErrDisallowed) {
		t.Fatalf("disallowed: %v", err)
	}
	r, err := tr.Reserve(ctx, u, 0)
	if err != nil || !r.LastSlot() || r.Rule().Limit != 1 {
		t.Fatalf("the one slot of a Concurrency: 1 site: %v, rule %+v, %v", r.LastSlot(), r.Rule(), err)
	}
	if _, err := tr.Reserve(ctx, u, 0); !errors.Is(err, limiter.ErrBusy) {
		t.Fatalf("second reservation on a cap-1 site: %v", err)
	}
	// The reserved permit serves the request, and stays the owner's to
	// release once the body is closed.
	if code, err := getCtx(WithReservation(ctx, r), &http.Client{Transport: tr}, u.String()); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	site := robots.Site(u)
	if st, _ := tr.Limiter.Status(ctx, site, 1); st.Holders != 1 {
		t.Fatalf("after the request, before the owner's release: %+v, want the reserved permit held", st)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	r2, err := tr.Reserve(ctx, u, 0)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	if err := r2.Release(ctx); err != nil { // unused: released
		t.Fatal(err)
	}
	if st, _ := tr.Limiter.Status(ctx, site, 1); st.Holders != 0 {
		t.Fatalf("permits left: %+v", st)
	}
}

// A request that fails releases its reserved permit itself: the owner's
// Release then does nothing.
func TestReservationReleasedOnFailure(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 5, Links: 1, Robots: testserver.Robots{Concurrency: 1}})
	ctx := context.Background()
	u := mustURL(t, ts.Sites()[0].URL+"/p/1")
	r, err := tr.Reserve(ctx, u, 0)
	if err != nil {
		t.Fatal(err)
	}
	failing := &Transport{Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("connection refused") }),
		Limiter: tr.Limiter, Robots: tr.Robots, Cap: 3}
	if _, err := getCtx(WithReservation(ctx, r), &http.Client{Transport: failing}, u.String()); err == nil {
		t.Fatal("want the request's error")
	}
	if st, _ := tr.Limiter.Status(ctx, robots.Site(u), 1); st.Holders != 0 {
		t.Fatalf("after a failed request: %+v, want its permit released", st)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatalf("the owner's release after the transport's: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Reserve with a wait waits in the site's line: it gives up after the wait
// leaving nothing behind, and takes a released slot at once.
func TestReserveWaits(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 5, Links: 1, Robots: testserver.Robots{Concurrency: 1}})
	ctx := context.Background()
	u := mustURL(t, ts.Sites()[0].URL+"/p/1")
	held, err := tr.Reserve(ctx, u, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = tr.Reserve(ctx, u, 100*time.Millisecond)
	var busy *limiter.BusyError
	if !errors.As(err, &busy) || !busy.Full || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("a full site after 100 ms: %v (after %s)", err, time.Since(start))
	}
	site := robots.Site(u)
	if st, err := tr.Limiter.Status(ctx, site, 1); err != nil || st.Waiting != 0 || st.Holders != 1 {
		t.Fatalf("after giving up: %+v %v, want the holder alone", st, err)
	}
	got := make(chan *Reservation, 1)
	go func() {
		r, err := tr.Reserve(ctx, u, time.Minute)
		if err != nil || !r.LastSlot() {
			t.Errorf("the waiter: %v (last slot %v)", err, r.LastSlot())
		}
		got <- r
	}()
	for st, _ := tr.Limiter.Status(ctx, site, 1); st.Waiting != 1; st, _ = tr.Limiter.Status(ctx, site, 1) {
		time.Sleep(5 * time.Millisecond)
	}
	if code, err := getCtx(WithReservation(ctx, held), &http.Client{Transport: tr}, u.String()); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	held.Release(ctx)
	select {
	case r := <-got:
		r.Release(ctx)
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not handed the released slot")
	}
	if st, _ := tr.Limiter.Status(ctx, robots.Site(u), 1); st.Holders != 0 {
		t.Fatalf("permits left: %+v", st)
	}
}

func TestCollector(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 5, Links: 3, Robots: testserver.Robots{Disallow: []string{"/private/"}}})
	c := NewCollector(tr, CollectorOptions{UserAgent: "politebot/1.0"})
	var links []string
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { links = append(links, e.Attr("href")) })
	if err := c.Visit(ts.Sites()[0].URL + "/p/1"); err != nil {
		t.Fatal(err)
	}
	if len(links) == 0 {
		t.Fatal("no links parsed")
	}
	err := c.Visit(ts.Sites()[0].URL + "/private/1")
	if !errors.Is(err, ErrDisallowed) {
		t.Fatalf("colly visit of a disallowed page: %v", err)
	}
	if st := ts.Stats().Sites[0]; st.DisallowedHits != 0 || st.Requests != 2 {
		t.Fatalf("server: %+v", st)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A download closed before its end (a body over the size cap, a cancelled
// request) is still being sent by the site until it notices: the slot is
// given back only after that, so the next request does not overlap it at
// the site.
func TestEarlyCloseDoesNotOverlapAtTheSite(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 4, Links: 1, Huge: 1, HugeBytes: 64 << 20, Robots: testserver.Robots{Concurrency: 1}})
	client := &http.Client{Transport: tr}
	u := ts.Sites()[0].URL + "/huge/0"
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				resp, err := client.Get(u)
				if err != nil {
					t.Error(err)
					return
				}
				io.CopyN(io.Discard, resp.Body, 64<<10) // read a little, then hang up
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	st := ts.Stats().Sites[0]
	if st.Requests < 60 || st.MaxInFlight > 1 || st.OverCap > 0 {
		t.Fatalf("%d requests, %d at once, %d starts over cap 1", st.Requests, st.MaxInFlight, st.OverCap)
	}
}

// robotsWaiting serves one site and returns a client whose robots.txt
// fetches have fetchTimeout, a URL of the site, and the site's only permit
// for robots.txt, already held (robots.txt waits behind every holder).
func robotsWaiting(t *testing.T, site testserver.SiteSpec, fetchTimeout time.Duration) (*http.Client, *url.URL, *limiter.Permit, *testserver.Server) {
	t.Helper()
	tr, ts := setup(t, 5*time.Second, site)
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	tr.Robots = robots.NewCache(rdb, &http.Client{Transport: &RobotsTransport{Limiter: tr.Limiter, Timeout: fetchTimeout}},
		&robots.CacheOptions{Prefix: keyPrefix(t), UserAgent: "politebot/1.0", FetchTimeout: fetchTimeout})
	u := mustURL(t, ts.Sites()[0].URL+"/p/1")
	held, err := tr.Limiter.AcquireRule(context.Background(), robots.Site(u), limiter.Rule{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, u, held, ts
}

// A robots.txt fetch that cannot get the site's permit in time (others hold
// it) is no verdict on the site: the request fails and can be tried again,
// rather than the site counting as unreachable and closed.
func TestRobotsFetchWithoutPermitIsNoVerdict(t *testing.T) {
	c, u, held, ts := robotsWaiting(t, testserver.SiteSpec{Pages: 5, Links: 1}, 200*time.Millisecond)
	_, err := get(c, u.String())
	if !errors.Is(err, robots.ErrNotFetched) || errors.Is(err, ErrDisallowed) {
		t.Fatalf("a page whose robots.txt could not get a permit: %v, want ErrNotFetched and not disallowed", err)
	}
	if n := ts.Stats().Sites[0].RobotsFetches; n != 0 {
		t.Fatalf("robots.txt fetched %d times while the permit was held", n)
	}
	held.Release(context.Background())
	if code, err := get(c, u.String()); err != nil || code != 200 {
		t.Fatalf("once the permit is free: %d, %v; want the page", code, err)
	}
}

// The permit wait is not the site's time: a robots.txt that comes within
// FetchTimeout of its request is a verdict on the site however long the
// request first waited for the site's permit (within FetchTimeout too).
// Counted together, a wait of 0.7 s left a 0.5 s robots.txt 0.3 s, and the
// whole site was closed as unreachable.
func TestRobotsTimeoutStartsAtThePermit(t *testing.T) {
	c, u, held, ts := robotsWaiting(t, testserver.SiteSpec{Pages: 5, Links: 1,
		Robots: testserver.Robots{Delay: testserver.Duration(500 * time.Millisecond)}}, time.Second)
	time.AfterFunc(700*time.Millisecond, func() { held.Release(context.Background()) })
	if code, err := get(c, u.String()); err != nil || code != 200 {
		t.Fatalf("robots.txt 0.5 s after a 0.7 s wait for its permit, timeout 1 s: %d, %v; want the page", code, err)
	}
	if n := ts.Stats().Sites[0].RobotsFetches; n != 1 {
		t.Fatalf("robots.txt fetched %d times, want 1", n)
	}
}
