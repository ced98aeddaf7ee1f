package fetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
)

// A page fetch checks robots.txt once: Reserve checks the URL and takes the
// permit, and the request that uses that permit is not checked again (with a hostile robots.txt each check is costly). Any other
// request still is: a redirect hop, another URL of the site.
func TestOneRobotsCheckPerFetch(t *testing.T) {
	tr, ts := setup(t, 5*time.Second, testserver.SiteSpec{Pages: 5, Links: 1, Robots: testserver.Robots{Disallow: []string{"/private/"}}})
	ctx := context.Background()
	base := ts.Sites()[0].URL
	noRedirects := &http.Client{Transport: tr, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	follow := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	checks := func() int64 { return tr.checks.Load() }

	var last *Reservation
	reserve := func(u string, wait time.Duration) context.Context {
		t.Helper()
		last.Release(ctx) // the owner's release of the previous request's permit
		r, err := tr.Reserve(ctx, mustURL(t, u), wait)
		if err != nil {
			t.Fatal(err)
		}
		last = r
		return WithReservation(ctx, r)
	}
	if code, err := getCtx(reserve(base+"/p/1", 0), noRedirects, base+"/p/1"); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	if n := checks(); n != 1 {
		t.Fatalf("Reserve and its request: %d robots checks, want 1", n)
	}
	if code, err := getCtx(reserve(base+"/p/2", time.Minute), noRedirects, base+"/p/2"); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	if n := checks(); n != 2 {
		t.Fatalf("Reserve with a wait and its request: %d robots checks in all, want 2", n)
	}

	// The redirect is checked once; its hop to a disallowed URL is checked
	// and refused.
	if _, err := getCtx(reserve(base+"/redirect-private/2", 0), follow, base+"/redirect-private/2"); !errors.Is(err, ErrDisallowed) {
		t.Fatalf("redirect to /private/: %v, want ErrDisallowed", err)
	}
	if n := checks(); n != 4 {
		t.Fatalf("reserved redirect and its hop: %d robots checks in all, want 4", n)
	}

	// A permit reserved for one URL does not let another through
	// unchecked; it stays for its own URL, which it serves unchecked.
	rctx := reserve(base+"/p/3", 0)
	if _, err := getCtx(rctx, noRedirects, base+"/private/1"); !errors.Is(err, ErrDisallowed) {
		t.Fatalf("another URL with a permit reserved: %v, want ErrDisallowed", err)
	}
	if code, err := getCtx(rctx, noRedirects, base+"/p/3"); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	if n := checks(); n != 6 {
		t.Fatalf("%d robots checks in all, want 6", n)
	}

	// Through colly, as the crawler fetches.
	col := NewCollector(tr, CollectorOptions{UserAgent: "politebot/1.0", Context: reserve(base+"/p/4", 0)})
	if err := col.Request(http.MethodGet, base+"/p/4", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := checks(); n != 7 {
		t.Fatalf("Reserve and its colly request: %d robots checks in all, want 7", n)
	}
	last.Release(ctx)
	st := ts.Stats().Sites[0]
	if st.DisallowedHits != 0 || st.Status["200"] != 5 || st.Status["302"] != 1 {
		t.Fatalf("at the site: %d disallowed requests, statuses %v", st.DisallowedHits, st.Status)
	}
	if ls, _ := tr.Limiter.Status(ctx, robots.Site(mustURL(t, base)), 3); ls.Holders != 0 {
		t.Fatalf("permits left: %+v", ls)
	}
}

// sitePages serves a robots.txt and counts the other requests by path.
type sitePages struct {
	robots string
	mu     sync.Mutex
	seen   map[string]int
}

func (s *sitePages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		w.Write([]byte(s.robots))
		return
	}
	s.mu.Lock()
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	s.seen[r.URL.RequestURI()]++
	s.mu.Unlock()
	w.Write([]byte("<html>page</html>"))
}

func (s *sitePages) count(uri string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[uri]
}

// transportOver returns a Transport on a fresh key prefix whose requests,
// robots.txt included, are made by base.
func transportOver(t *testing.T, base http.RoundTripper) *Transport {
	t.Helper()
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	l := limiter.New(rdb, &limiter.Options{Prefix: keyPrefix(t), Lease: 5 * time.Second})
	t.Cleanup(func() { l.Close() })
	tr := &Transport{Base: base, Limiter: l, Cap: 3}
	tr.Robots = robots.NewCache(rdb, &http.Client{Transport: &RobotsTransport{Base: base, Limiter: l}}, &robots.CacheOptions{Prefix: keyPrefix(t), UserAgent: "politebot/1.0"})
	return tr
}

// http://example.com and https://example.com (two loopback servers dialled
// by name and port) have a robots.txt each: http's Disallow: / holds after
// https's Allow: / was loaded, though both share the site's permits.
func TestRobotsPerSchemeAtTheTransport(t *testing.T) {
	plain := &sitePages{robots: "User-agent: *\nDisallow: /\n"}
	secure := &sitePages{robots: "User-agent: *\nAllow: /\n"}
	hp := httptest.NewServer(plain)
	defer hp.Close()
	hs := httptest.NewTLSServer(secure)
	defer hs.Close()
	addrs := map[string]string{"example.com:80": hp.Listener.Addr().String(), "example.com:443": hs.Listener.Addr().String()}
	base := hs.Client().Transport.(*http.Transport).Clone()
	base.TLSClientConfig = base.TLSClientConfig.Clone()
	base.TLSClientConfig.ServerName = "example.com" // httptest's certificate names it
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := addrs[addr]
		if !ok {
			return nil, errors.New("no server for " + addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, to)
	}
	tr := transportOver(t, base)
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	if code, err := get(c, "https://example.com/a"); err != nil || code != 200 {
		t.Fatalf("https://example.com/a: %d %v", code, err)
	}
	if _, err := get(c, "http://example.com/b"); !errors.Is(err, ErrDisallowed) {
		t.Fatalf("http://example.com/b after https's robots.txt was loaded: %v, want ErrDisallowed", err)
	}
	if n := plain.count("/b"); n != 0 {
		t.Fatalf("http://example.com/b requested %d times; its robots.txt says Disallow: /", n)
	}
	if ls, _ := tr.Limiter.Status(context.Background(), "example.com", 3); ls.Holders != 0 {
		t.Fatalf("permits left on the shared site: %+v", ls)
	}
}

// Through the permit-taking transport too, a robots.txt redirect to another
// site's page is never requested, and the redirecting site stays closed.
func TestRobotsRedirectElsewhereNotFetched(t *testing.T) {
	b := &sitePages{robots: "User-agent: *\nDisallow: /private/\n"}
	hb := httptest.NewServer(b)
	defer hb.Close()
	a := &sitePages{}
	ha := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Redirect(w, r, hb.URL+"/private/secret?delete=1", http.StatusFound)
			return
		}
		a.ServeHTTP(w, r)
	}))
	defer ha.Close()
	tr := transportOver(t, nil)
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	if _, err := get(c, ha.URL+"/page"); !errors.Is(err, ErrDisallowed) {
		t.Fatalf("a page of a site whose robots.txt redirects elsewhere: %v, want ErrDisallowed", err)
	}
	if n, m := b.count("/private/secret?delete=1"), a.count("/page"); n != 0 || m != 0 {
		t.Fatalf("requested: B's /private/secret?delete=1 %d times, A's /page %d times; want neither", n, m)
	}
}

// A reserved permit lost before its request (the worker stalled past the
// lease) is replaced under the rule robots.txt gave: the request's own
// permit starts the crawl delay when its body is closed.
func TestLostHandoverKeepsTheCrawlDelay(t *testing.T) {
	const lease = 500 * time.Millisecond
	tr, ts := setup(t, lease, testserver.SiteSpec{Pages: 5, Links: 1, Robots: testserver.Robots{CrawlDelay: testserver.Duration(30 * time.Second)}})
	ctx := context.Background()
	site := ts.Sites()[0].URL
	u := mustURL(t, site+"/p/1")
	r, err := tr.Reserve(ctx, u, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Not kept alive: the permit fences itself within the lease.
	deadline := time.Now().Add(10 * lease)
	for r.Permit().Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the handed-over permit was never lost")
		}
		time.Sleep(lease / 10)
	}
	if code, err := getCtx(WithReservation(ctx, r), &http.Client{Transport: tr}, u.String()); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	defer r.Release(ctx)
	r2, err := tr.Reserve(ctx, mustURL(t, site+"/p/2"), 0)
	var busy *limiter.BusyError
	if !errors.As(err, &busy) {
		r2.Release(ctx)
		t.Fatalf("the next request right after one to a 30 s crawl-delay site: %v, want limiter.ErrBusy", err)
	}
	if busy.Wait < 20*time.Second {
		t.Fatalf("wait hint %v, want about the 30 s crawl delay", busy.Wait)
	}
}

// colly sends a URL as the WHATWG rules write it (percent-encoded query
// characters, an IDNA host): a reservation taken for RequestURL's form
// serves the colly request, unchecked, and stays valid for its owner.
// Taken for url.Parse's form, the request did not find it: it checked
// robots.txt again and waited for a second permit of the cap-1 site until
// the first one's lease ran out.
func TestReservationMatchesCollysURL(t *testing.T) {
	tr, ts := setup(t, 2*time.Second, testserver.SiteSpec{Pages: 5, Links: 1, Robots: testserver.Robots{Concurrency: 1}})
	ctx := context.Background()
	raw := ts.Sites()[0].URL + "/p/1?q=it's \"caf\u00e9\"<x>"
	u, err := RequestURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tr.Reserve(ctx, u, 0)
	if err != nil {
		t.Fatal(err)
	}
	col := NewCollector(tr, CollectorOptions{UserAgent: "politebot/1.0", Context: WithReservation(ctx, r)})
	col.Request(http.MethodGet, raw, nil, nil, nil) // the test site answers 404: no matter
	if n := tr.checks.Load(); n != 1 {
		t.Fatalf("%d robots checks for one reserved colly request, want 1", n)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatalf("the owner's release: %v, want the reserved permit still valid", err)
	}
}
