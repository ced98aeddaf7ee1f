package fetch

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
)

// spareAfter fetches u under a reservation, then releases it and asks for
// a spare in one pipeline, as a crawl worker's settlement does.
func spareAfter(t *testing.T, tr *Transport, u string) *Spare {
	t.Helper()
	ctx := context.Background()
	r, err := tr.Reserve(ctx, mustURL(t, u), 0)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := getCtx(WithReservation(ctx, r), &http.Client{Transport: tr}, u); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	rdb := srv.Client()
	defer rdb.Close()
	pipe := rdb.Pipeline()
	released, sp := r.ReleaseSpareOn(ctx, pipe)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := released(); err != nil {
		t.Fatal(err)
	}
	return sp
}

// atomicLimiter puts tr's permits in ModeAtomic, whose spares these tests
// count on (ModeLocked's also hang on the process's gate for the site).
func atomicLimiter(t *testing.T, tr *Transport) {
	rdb := srv.Client()
	l := limiter.New(rdb, &limiter.Options{Prefix: keyPrefix(t), Lease: tr.Limiter.Lease(), Mode: limiter.ModeAtomic})
	t.Cleanup(func() { l.Close(); rdb.Close() })
	tr.Limiter = l
}

func holders(t *testing.T, tr *Transport, u string) int {
	t.Helper()
	st, err := tr.Limiter.Status(context.Background(), robots.Site(mustURL(t, u)), 1)
	if err != nil {
		t.Fatal(err)
	}
	return st.Holders
}

// A spare permit asked for in the release's round trip serves the next URL
// of the same site (it is a real permit: it holds the site's one slot), and
// is given back when the next URL is another site's or disallowed.
func TestReserveSpare(t *testing.T) {
	one := testserver.SiteSpec{Pages: 9, Links: 1, Robots: testserver.Robots{Concurrency: 1, Disallow: []string{"/private/"}}}
	tr, ts := setup(t, 5*time.Second, one, one)
	atomicLimiter(t, tr)
	ctx := context.Background()
	a, b := ts.Sites()[0].URL, ts.Sites()[1].URL

	sp := spareAfter(t, tr, a+"/p/1")
	if sp == nil || sp.Site() != robots.Site(mustURL(t, a)) {
		t.Fatalf("spare %+v, want one for %s", sp, a)
	}
	granted, err := sp.after()
	if err != nil {
		t.Fatalf("the spare, the site's slot just released: %v", err)
	}
	r, err := tr.ReserveSpare(ctx, mustURL(t, a+"/p/2"), sp)
	if err != nil || r.Permit() != granted {
		t.Fatalf("reservation %v, %v; want the spare's permit", r.Permit().ID(), err)
	}
	if _, err := tr.Reserve(ctx, mustURL(t, a+"/p/3"), 0); !errors.Is(err, limiter.ErrBusy) {
		t.Fatalf("the cap-1 site with its spare used: %v, want busy", err)
	}
	if code, err := getCtx(WithReservation(ctx, r), &http.Client{Transport: tr}, a+"/p/2"); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The next URL is on another site: the spare goes back, the other
	// site's permit is taken the usual way.
	sp = spareAfter(t, tr, a+"/p/4")
	r, err = tr.ReserveSpare(ctx, mustURL(t, b+"/p/1"), sp)
	if err != nil || r.Permit().Site() != robots.Site(mustURL(t, b)) {
		t.Fatalf("other site: %v, %v", r.Permit().Site(), err)
	}
	if n := holders(t, tr, a); n != 0 {
		t.Fatalf("%s holds %d permits, want the spare given back", a, n)
	}
	r.Release(ctx)

	// Disallowed: never reserved, the spare given back.
	sp = spareAfter(t, tr, a+"/p/5")
	if _, err := tr.ReserveSpare(ctx, mustURL(t, a+"/private/1"), sp); !errors.Is(err, ErrDisallowed) {
		t.Fatalf("disallowed: %v", err)
	}
	if n := holders(t, tr, a); n != 0 {
		t.Fatalf("%s holds %d permits, want the spare given back", a, n)
	}

	// Not used at all (no next URL): Release gives it back; nil is safe.
	spareAfter(t, tr, a+"/p/6").Release()
	if n := holders(t, tr, a); n != 0 {
		t.Fatalf("%s holds %d permits, want the spare given back", a, n)
	}
	var none *Spare
	none.Release()
	if r, err := tr.ReserveSpare(ctx, mustURL(t, a+"/p/7"), nil); err != nil {
		t.Fatalf("no spare: %v", err)
	} else {
		r.Release(ctx)
	}
	if v := ts.Stats().Sites[0].Violation(); v != "" {
		t.Fatalf("the site saw: %s", v)
	}
}

// A site whose rule asks for a crawl delay gets no spare: its release just
// started the delay, so the try could only be refused.
func TestNoSpareInCrawlDelay(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 5, Links: 1, Robots: testserver.Robots{CrawlDelay: testserver.Duration(50 * time.Millisecond)}})
	atomicLimiter(t, tr)
	u := ts.Sites()[0].URL + "/p/1"
	r, err := tr.Reserve(context.Background(), mustURL(t, u), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(context.Background())
	if r.Spares() {
		t.Fatal("a crawl-delay site spares")
	}
	rdb := srv.Client()
	defer rdb.Close()
	pipe := rdb.Pipeline()
	after, sp := r.ReleaseSpareOn(context.Background(), pipe)
	if sp != nil || pipe.Len() != 1 {
		t.Fatalf("spare %+v, %d commands queued, want none and the release", sp, pipe.Len())
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := after(); err != nil {
		t.Fatal(err)
	}
}

// A spare that does not fit a URL whose robots.txt is not in memory yet is
// given back before that robots.txt is fetched: with hosts that share a
// permit (a registered domain's), the robots.txt fetch takes the very slot
// the spare holds, and would wait for the spare's lease to run out.
func TestSpareGivenBackBeforeRobotsFetch(t *testing.T) {
	one := testserver.SiteSpec{Pages: 5, Links: 1, Robots: testserver.Robots{Concurrency: 1}}
	lease := 10 * time.Second
	tr, ts := setup(t, lease, one, one)
	atomicLimiter(t, tr)
	shared := robots.SiteKey(func(*url.URL) string { return "shared.example" })
	tr.SiteKey = shared
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	tr.Robots = robots.NewCache(rdb, &http.Client{Transport: &RobotsTransport{Limiter: tr.Limiter, SiteKey: shared}},
		&robots.CacheOptions{Prefix: keyPrefix(t), UserAgent: "politebot/1.0"})
	a, b := ts.Sites()[0].URL, ts.Sites()[1].URL
	sp := spareAfter(t, tr, a+"/p/1")
	if sp == nil {
		t.Fatal("no spare")
	}
	start := time.Now()
	r, err := tr.ReserveSpare(context.Background(), mustURL(t, b+"/p/1"), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(context.Background())
	if took := time.Since(start); took > lease/2 {
		t.Fatalf("reserving the other host took %s: its robots.txt fetch waited for the spare's lease (%s)", took, lease)
	}
}
