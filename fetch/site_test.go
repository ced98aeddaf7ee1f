package fetch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// hostCounter is an HTTP handler that counts what a server sees: requests
// in flight and their maximum, for the whole server and per Host header
// (lower-cased, port and trailing dot dropped), and robots.txt fetches per Host. A page
// request waits until hold is in flight or linger has passed, so requests
// that may overlap do.
type hostCounter struct {
	hold   int
	linger time.Duration

	mu                   sync.Mutex
	now, max             int
	hostNow, hostMax     map[string]int
	robots, pages, wrong map[string]int
	changed              chan struct{} // closed and replaced when now changes
}

func newHostCounter(hold int, linger time.Duration) *hostCounter {
	return &hostCounter{hold: hold, linger: linger, hostNow: map[string]int{}, hostMax: map[string]int{},
		robots: map[string]int{}, pages: map[string]int{}, wrong: map[string]int{}, changed: make(chan struct{})}
}

func (h *hostCounter) add(host string, d int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now += d
	h.max = max(h.max, h.now)
	h.hostNow[host] += d
	h.hostMax[host] = max(h.hostMax[host], h.hostNow[host])
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *hostCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := strings.ToLower(r.Host)
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(host, ".")
	h.add(host, 1)
	defer h.add(host, -1)
	h.mu.Lock()
	if r.URL.Path == "/robots.txt" {
		h.robots[host]++
		h.mu.Unlock()
		fmt.Fprint(w, "User-agent: *\nAllow: /\n")
		return
	}
	h.pages[host]++
	h.mu.Unlock()
	deadline := time.After(h.linger)
	for {
		h.mu.Lock()
		now, changed := h.now, h.changed
		h.mu.Unlock()
		if now >= h.hold {
			break
		}
		select {
		case <-changed:
			continue
		case <-deadline:
		}
		break
	}
	fmt.Fprint(w, "ok")
}

// stats returns the server's maximum in flight, per Host maxima, and the
// robots.txt fetches per Host.
func (h *hostCounter) stats() (max int, hostMax, robots map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.max, maps(h.hostMax), maps(h.robots)
}

func maps(m map[string]int) map[string]int {
	c := make(map[string]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// siteTransport is a Transport of Cap cap on a fresh key prefix (suffix
// names it within the test), with SiteKey key, whose requests and
// robots.txt requests go out through base.
func siteTransport(t *testing.T, suffix string, cap int, key robots.SiteKey, base http.RoundTripper) *Transport {
	t.Helper()
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	prefix := keyPrefix(t) + suffix
	l := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: 5 * time.Second})
	t.Cleanup(func() { l.Close() })
	tr := &Transport{Base: base, Limiter: l, Cap: cap, SiteKey: key}
	tr.Robots = robots.NewCache(rdb, &http.Client{Transport: &RobotsTransport{Base: base, Limiter: l, SiteKey: key}},
		&robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"})
	return tr
}

// getAll GETs every URL of urls n times, all at once, and fails the test
// on any error or status other than 200.
func getAll(t *testing.T, tr *Transport, urls []string, n int) {
	t.Helper()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for i := range n {
		for _, u := range urls {
			wg.Go(func() {
				if code, err := get(c, fmt.Sprintf("%s/p/%d", u, i)); err != nil || code != 200 {
					t.Errorf("GET %s: %d %v", u, code, err)
				}
			})
		}
	}
	wg.Wait()
}

// Every spelling of one server's address is one site: with Cap 1 the server
// never sees two requests at once, and robots.txt is fetched once. The same
// requests keyed by the Host as written (the old Site) do overlap at the
// server, so the first check could fail.
func TestSpellingsOfOneServerShareOneCap(t *testing.T) {
	for _, fam := range []struct{ name, listen, host string }{
		{"IPv4", "127.0.0.1:0", "127.0.0.1"},
		{"IPv6", "[::1]:0", "[::1]"},
		{"localhost", "127.0.0.1:0", "localhost"},
	} {
		t.Run(fam.name, func(t *testing.T) {
			// run GETs twice at once each spelling of a new server's
			// address with Transport key, Cap 1, and returns what the
			// server saw: most at once, robots.txt fetches.
			run := func(suffix string, key robots.SiteKey) (spell []string, most, robotsTxt int) {
				ln, err := net.Listen("tcp", fam.listen)
				if err != nil {
					t.Skipf("cannot listen on %s: %v", fam.listen, err)
				}
				h := newHostCounter(2, 150*time.Millisecond)
				s := httptest.NewUnstartedServer(h)
				s.Listener.Close()
				s.Listener = ln
				s.Start()
				defer s.Close()
				port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
				switch fam.name {
				case "IPv4":
					spell = []string{"127.0.0.1:" + port, "127.0.0.1:0" + port, "127.0.0.1:00" + port, "[::ffff:127.0.0.1]:" + port}
				case "IPv6":
					spell = []string{"[::1]:" + port, "[0::1]:" + port, "[0:0:0:0:0:0:0:1]:" + port, "[::1]:0" + port}
				default: // names, when they surely reach the listener
					for _, name := range []string{"localhost", "LocalHost", "localhost."} {
						if addrs, err := net.DefaultResolver.LookupHost(context.Background(), name); err == nil && slices.Equal(addrs, []string{"127.0.0.1"}) {
							spell = append(spell, name+":"+port, name+":0"+port)
						} else {
							t.Logf("%s resolves to %v (%v): not one of the spellings", name, addrs, err)
						}
					}
					if len(spell) < 4 {
						t.Skipf("localhost does not resolve to 127.0.0.1 alone")
					}
				}
				var urls []string
				for _, sp := range spell {
					urls = append(urls, "http://"+sp)
				}
				getAll(t, siteTransport(t, suffix, 1, key, nil), urls, 2)
				m, _, rob := h.stats()
				for _, n := range rob {
					robotsTxt += n
				}
				return spell, m, robotsTxt
			}
			// As written: each spelling its own permit; the server sees more than one at once.
			asWritten := func(u *url.URL) string { return strings.ToLower(u.Host) }
			if _, m, _ := run(".written", asWritten); m < 2 {
				t.Fatalf("keyed by the host as written, the server saw at most %d at once: the spellings never overlapped, so this test cannot fail", m)
			}
			if spell, m, rob := run(".site", nil); m != 1 || rob != 1 {
				t.Fatalf("spellings %v with Cap 1: the server saw %d at once and robots.txt %d times; want 1 and 1", spell, m, rob)
			}
		})
	}
}

// pinDial is an http.Transport that dials addr whatever the URL's host, as
// if every name resolved to one server.
func pinDial(addr string) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return tr
}

// With robots.Domain two hosts of one registered domain share one cap at
// the server; with robots.Site each has its own. robots.txt is fetched per
// host either way.
func TestSiteKeyDomainSharesOneCap(t *testing.T) {
	hosts := []string{"a.shop.example.com", "B.Shop.Example.COM."}
	for _, h := range hosts {
		if d := robots.Domain(&url.URL{Scheme: "http", Host: h}); d != "example.com" {
			t.Fatalf("Domain(%s) = %s, want example.com", h, d)
		}
	}
	for _, c := range []struct {
		key               robots.SiteKey
		name              string
		wantMax, wantHost int
	}{
		{robots.Domain, "domain", 2, 2},
		{nil, "host", 4, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHostCounter(c.wantMax, 300*time.Millisecond)
			s := httptest.NewServer(h)
			defer s.Close()
			base := pinDial(s.Listener.Addr().String())
			defer base.CloseIdleConnections()
			var urls []string
			for _, host := range hosts {
				urls = append(urls, "http://"+host)
			}
			getAll(t, siteTransport(t, "", 2, c.key, base), urls, 6)
			m, hostMax, rob := h.stats()
			if m != c.wantMax {
				t.Errorf("site key %s, cap 2: the server saw at most %d at once, want %d", c.name, m, c.wantMax)
			}
			for _, host := range hosts {
				host = strings.TrimSuffix(strings.ToLower(host), ".")
				if hostMax[host] > c.wantHost || rob[host] != 1 {
					t.Errorf("site key %s: %s saw %d at once (cap %d) and robots.txt %d times (want 1)", c.name, host, hostMax[host], c.wantHost, rob[host])
				}
			}
		})
	}
}
