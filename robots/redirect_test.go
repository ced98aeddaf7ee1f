package robots

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// pathCounter counts every request by path and query, and serves
// /robots.txt from rs.
type pathCounter struct {
	rs   *robotsServer
	mu   sync.Mutex
	seen map[string]int
}

func (p *pathCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	p.seen[r.URL.RequestURI()]++
	p.mu.Unlock()
	p.rs.ServeHTTP(w, r)
}

func (p *pathCounter) count(uri string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[uri]
}

// Site A's robots.txt redirecting to any URL of site B other than B's
// robots.txt is not followed: B never sees the request, and A's robots.txt
// counts as unreadable (everything closed, retried later), not as B's page
// read as A's policy, nor as "allow all". A redirect to B's robots.txt is
// followed (TestFetchFollowsRedirectsAcrossHosts).
func TestRedirectToAnotherSitesPageRefused(t *testing.T) {
	ctx := ctxT(t)
	b := &pathCounter{rs: &robotsServer{status: 200, body: "User-agent: *\nDisallow: /private/\n"}}
	hb := httptest.NewServer(b)
	defer hb.Close()
	for _, target := range []string{"/private/secret?delete=1", "/robots.txt?delete=1", "/private/robots.txt", "/"} {
		t.Run(target, func(t *testing.T) {
			ha := httptest.NewServer(http.RedirectHandler(hb.URL+target, http.StatusFound))
			defer ha.Close()
			c, _ := newCache(t, CacheOptions{})
			p, err := c.Policy(ctx, mustURL(t, ha.URL+"/page"))
			if err != nil {
				t.Fatal(err)
			}
			if n := b.count(target); n != 0 {
				t.Fatalf("B saw %d requests for %s", n, target)
			}
			if !p.Unreachable() || !p.DisallowAll || p.Allowed("/page") {
				t.Fatalf("A's robots.txt redirecting to B%s: %+v; want unreachable, all closed", target, p)
			}
		})
	}
}

// A good copy stands in when a redirect is refused, as for any unreadable
// robots.txt.
func TestRefusedRedirectKeepsGoodCopy(t *testing.T) {
	ctx := ctxT(t)
	var mu sync.Mutex
	to := ""
	rs := &robotsServer{status: 200, body: "User-agent: *\nDisallow: /p/\n"}
	ha := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		target := to
		mu.Unlock()
		if target != "" && r.URL.Path == "/robots.txt" {
			http.Redirect(w, r, target, http.StatusMovedPermanently)
			return
		}
		rs.ServeHTTP(w, r)
	}))
	defer ha.Close()
	c, rdb := newCache(t, CacheOptions{})
	u := mustURL(t, ha.URL+"/a")
	if p, err := c.Policy(ctx, u); err != nil || p.Allowed("/p/1") || !p.Allowed("/q") {
		t.Fatalf("first: %+v %v", p, err)
	}
	mu.Lock()
	to = "http://127.0.0.1:1/elsewhere"
	mu.Unlock()
	rdb.Del(ctx, c.keys(origin{u.Scheme, Site(u)}).policy)
	c2, _ := newCache(t, CacheOptions{})
	if p, err := c2.Policy(ctx, u); err != nil || p.Allowed("/p/1") || !p.Allowed("/q") {
		t.Fatalf("after a refused redirect: %+v %v; want the good copy", p, err)
	}
}

func TestFollowRedirect(t *testing.T) {
	from := mustURL(t, "http://a.example/robots.txt")
	for to, want := range map[string]bool{
		"http://b.example/robots.txt":           true,
		"https://b.example:8443/robots.txt":     true,
		"https://a.example/robots.txt":          true,
		"http://b.example/robots.txt#x":         true,
		"http://a.example/robots-hop/1.txt":     true, // the site's own URL
		"https://a.example/moved?x=1":           true,
		"http://b.example/robots.txt?x=1":       false,
		"http://b.example/robots.txt?":          false,
		"http://b.example/private/secret":       false,
		"http://b.example/Robots.txt":           false,
		"http://b.example/robots%2etxt":         false,
		"http://b.example//robots.txt":          false,
		"http://u:p@b.example/robots.txt":       false,
		"http://u:p@a.example/robots.txt":       false,
		"ftp://b.example/robots.txt":            false,
		"file:///robots.txt":                    false,
		"http://a.example:8080/robots-hop/1":    false, // another site: port
		"http://sub.a.example/robots-hop/1.txt": false,
	} {
		if got := followRedirect(mustURL(t, to), from); got != want {
			t.Errorf("redirect %s -> %s: follow %v, want %v", from, to, got, want)
		}
	}
}
