package robots

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/polite-crawler/polite/internal/keyname"
	"github.com/polite-crawler/polite/internal/redistest"
)

// DualScheme serves one host name, example.com (which httptest's
// certificate names), on http (port 80) and https (port 443) with a robots
// server each: two loopback servers dialled by name and port, as if one
// machine answered both. Client is a client that reaches them.
type dualScheme struct {
	HTTP, HTTPS *robotsServer
	Client      *http.Client
}

func newDualScheme(t *testing.T, httpRobots, httpsRobots string) *dualScheme {
	t.Helper()
	d := &dualScheme{HTTP: &robotsServer{status: 200, body: httpRobots}, HTTPS: &robotsServer{status: 200, body: httpsRobots}}
	plain := httptest.NewServer(d.HTTP)
	t.Cleanup(plain.Close)
	secure := httptest.NewTLSServer(d.HTTPS)
	t.Cleanup(secure.Close)
	addrs := map[string]string{"example.com:80": plain.Listener.Addr().String(), "example.com:443": secure.Listener.Addr().String()}
	tr := secure.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = tr.TLSClientConfig.Clone()
	tr.TLSClientConfig.ServerName = "example.com"
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := addrs[addr]
		if !ok {
			return nil, errors.New("dualScheme: no server for " + addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, to)
	}
	tr.DialTLSContext = nil
	d.Client = &http.Client{Transport: tr}
	return d
}

// robots.txt is per scheme, host and port (RFC 9309 §2.3): with http
// closing everything and https opening everything on one host, each URL gets
// its own scheme's policy, whichever was loaded first. One key per host made
// http://example.com/b use the https file and be fetched.
func TestPolicyPerScheme(t *testing.T) {
	ctx := ctxT(t)
	d := newDualScheme(t, "User-agent: *\nDisallow: /\n", "User-agent: *\nAllow: /\nConcurrency: 2\n")
	var fetched []string
	pfx := redistest.Prefix(t)
	o := &CacheOptions{Prefix: pfx, Fetched: func(_ context.Context, site string, p Policy) {
		fetched = append(fetched, site)
	}}
	rdb := srv.Client()
	defer rdb.Close()
	c := NewCache(rdb, d.Client, o)

	ps, err := c.Policy(ctx, mustURL(t, "https://example.com/a"))
	if err != nil || !ps.Allowed("/a") || ps.Cap(3) != 2 {
		t.Fatalf("https policy: %+v, %v; want https's Allow: / and Concurrency 2", ps, err)
	}
	ph, err := c.Policy(ctx, mustURL(t, "http://example.com/b"))
	if err != nil || ph.Allowed("/b") {
		t.Fatalf("http policy after the https one was loaded: %+v, %v; want http's Disallow: /", ph, err)
	}
	if d.HTTP.hits.Load() != 1 || d.HTTPS.hits.Load() != 1 {
		t.Fatalf("robots.txt requests: http %d, https %d; want one each", d.HTTP.hits.Load(), d.HTTPS.hits.Load())
	}
	// Both stay apart in the local layer and in Redis, inside the site's
	// hash tag; explicit default ports name the same files.
	for _, u := range []string{"https://example.com:443/c", "https://EXAMPLE.com/c"} {
		if p, err := c.Policy(ctx, mustURL(t, u)); err != nil || !p.Allowed("/c") {
			t.Fatalf("%s: %+v %v", u, p, err)
		}
	}
	if p, err := c.Policy(ctx, mustURL(t, "http://example.com:80/c")); err != nil || p.Allowed("/c") {
		t.Fatalf("http://example.com:80/c: %+v %v", p, err)
	}
	keys, err := rdb.Keys(ctx, pfx+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll("P:{example.com}:robots:http P:{example.com}:robots:http:good P:{example.com}:robots:https P:{example.com}:robots:https:good", "P", pfx)
	slices.Sort(keys)
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("Redis keys:\n%s\nwant\n%s", got, want)
	}
	for u, allowed := range map[string]bool{"http://example.com/": false, "https://example.com/": true} {
		p, ok, err := c.Cached(ctx, mustURL(t, u))
		if err != nil || !ok || p.Allowed("/x") != allowed {
			t.Fatalf("Cached(%s) = %+v, %v, %v; want allowed %v", u, p, ok, err, allowed)
		}
	}
	// A second process finds both in Redis, apart, without fetching.
	c2 := NewCache(rdb, &http.Client{Transport: notFetched{}}, o)
	if p, err := c2.Policy(ctx, mustURL(t, "http://example.com/b")); err != nil || p.Allowed("/b") {
		t.Fatalf("another process, http: %+v %v", p, err)
	}
	if p, err := c2.Policy(ctx, mustURL(t, "https://example.com/b")); err != nil || !p.Allowed("/b") {
		t.Fatalf("another process, https: %+v %v", p, err)
	}
	if strings.Join(fetched, " ") != "example.com example.com" {
		t.Fatalf("Fetched called with sites %q, want the permits' site twice", fetched)
	}
}

// A prefix that cannot go into a Redis key (an empty hash tag spreads a
// site's keys over Cluster slots) fails every lookup with a clear error,
// before anything is fetched or written.
func TestInvalidPrefix(t *testing.T) {
	ctx := ctxT(t)
	rs := &robotsServer{status: 200, body: "User-agent: *\nDisallow: /p/\n"}
	hs := httptest.NewServer(rs)
	defer hs.Close()
	rdb := srv.Client()
	defer rdb.Close()
	u := mustURL(t, hs.URL+"/a")
	for _, prefix := range []string{"{}", "a{}", "a}b", "a\x00b", "a b", "a\nb"} {
		c := NewCache(rdb, nil, &CacheOptions{Prefix: prefix})
		_, err := c.Policy(ctx, u)
		if !errors.Is(err, keyname.ErrInvalid) || !strings.HasPrefix(err.Error(), "robots: ") || !strings.Contains(err.Error(), "prefix") {
			t.Errorf("Policy with prefix %q: %v; want a robots: ... prefix error wrapping keyname.ErrInvalid", prefix, err)
		}
		if _, _, err := c.Cached(ctx, u); !errors.Is(err, keyname.ErrInvalid) {
			t.Errorf("Cached with prefix %q: %v; want keyname.ErrInvalid", prefix, err)
		}
	}
	if rs.hits.Load() != 0 {
		t.Fatalf("robots.txt fetched %d times under invalid prefixes", rs.hits.Load())
	}
	for _, pattern := range []string{"{*", "a*"} {
		if keys, err := rdb.Keys(ctx, pattern).Result(); err != nil || len(keys) != 0 {
			t.Fatalf("keys written under invalid prefixes: %q %v", keys, err)
		}
	}
	// A site that is not a key name either (a URL built by hand).
	c := NewCache(rdb, nil, &CacheOptions{Prefix: "t:badsite"})
	if _, err := c.Policy(ctx, &url.URL{Scheme: "http", Host: "a}b{"}); !errors.Is(err, keyname.ErrInvalid) {
		t.Fatalf("site with braces: %v", err)
	}
	if _, err := NewCache(rdb, nil, nil).Policy(ctx, mustURL(t, "ftp://x/")); err == nil || errors.Is(err, keyname.ErrInvalid) {
		t.Fatalf("ftp URL: %v", err)
	}
}
