package fetch

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// robotsPerHost serves each Host the robots.txt named for it (a default
// allowing everything otherwise) and passes every other request to pages,
// noting when each page request arrived.
type robotsPerHost struct {
	robots map[string]string
	pages  http.Handler

	mu     sync.Mutex
	starts []time.Time
}

func (h *robotsPerHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		body, ok := h.robots[strings.ToLower(r.Host)]
		if !ok {
			body = "User-agent: *\nAllow: /\n"
		}
		fmt.Fprint(w, body)
		return
	}
	h.mu.Lock()
	h.starts = append(h.starts, time.Now())
	h.mu.Unlock()
	h.pages.ServeHTTP(w, r)
}

// minGap is the shortest time between two page requests' arrivals.
func (h *robotsPerHost) minGap() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := slices.Clone(h.starts)
	slices.SortFunc(s, func(a, b time.Time) int { return a.Compare(b) })
	gap := time.Duration(1 << 62)
	for i := 1; i < len(s); i++ {
		gap = min(gap, s[i].Sub(s[i-1]))
	}
	return gap
}

// modeTransport is siteTransport in a limiter mode of the test's choice.
func modeTransport(t *testing.T, mode limiter.Mode, cap int, key robots.SiteKey, base http.RoundTripper) *Transport {
	t.Helper()
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	prefix := keyPrefix(t)
	l := limiter.New(rdb, &limiter.Options{Mode: mode, Prefix: prefix, Lease: 5 * time.Second})
	t.Cleanup(func() { l.Close() })
	tr := &Transport{Base: base, Limiter: l, Cap: cap, SiteKey: key}
	tr.Robots = robots.NewCache(rdb, &http.Client{Transport: &RobotsTransport{Base: base, Limiter: l, SiteKey: key}},
		&robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"})
	return tr
}

func forLimiterModes(t *testing.T, f func(t *testing.T, mode limiter.Mode)) {
	for _, m := range []limiter.Mode{limiter.ModeLocked, limiter.ModeAtomic} {
		t.Run(m.String(), func(t *testing.T) { f(t, m) })
	}
}

// With SiteKey robots.Domain, when one host of a domain asks for
// Concurrency 1 and another for 3, the domain gets 1: the server never sees
// two requests at once over the domain, whichever host they are for. That
// holds when the strict host is the domain itself too.
func TestSiteKeyDomainLowestConcurrency(t *testing.T) {
	for _, c := range []struct{ name, strict, loose string }{
		{"subdomains", "b.shop.example.com", "a.shop.example.com"},
		{"apex", "example.com", "a.shop.example.com"},
	} {
		t.Run(c.name, func(t *testing.T) {
			forLimiterModes(t, func(t *testing.T, mode limiter.Mode) {
				count := newHostCounter(3, 150*time.Millisecond)
				h := &robotsPerHost{pages: count, robots: map[string]string{
					c.strict: "User-agent: *\nConcurrency: 1\nAllow: /\n",
					c.loose:  "User-agent: *\nConcurrency: 3\nAllow: /\n",
				}}
				s := httptest.NewServer(h)
				defer s.Close()
				base := pinDial(s.Listener.Addr().String())
				defer base.CloseIdleConnections()
				tr := modeTransport(t, mode, 3, robots.Domain, base)
				urls := []string{"http://" + c.strict, "http://" + c.loose}
				// Both hosts' rules are known from their first requests on.
				getAll(t, tr, urls, 1)
				getAll(t, tr, urls, 4)
				if m, hostMax, _ := count.stats(); m != 1 {
					t.Errorf("%s asks for Concurrency 1, %s for 3, Cap 3, keyed by domain: the server saw %d at once over the domain (per host %v), want 1", c.strict, c.loose, m, hostMax)
				}
			})
		})
	}
}

// With SiteKey robots.Domain, one host's Crawl-delay holds the whole
// domain: requests to either host arrive at the server at least the delay
// apart.
func TestSiteKeyDomainLongestDelay(t *testing.T) {
	forLimiterModes(t, func(t *testing.T, mode limiter.Mode) {
		const delay = 300 * time.Millisecond
		count := newHostCounter(3, 50*time.Millisecond)
		h := &robotsPerHost{pages: count, robots: map[string]string{
			"b.shop.example.com": "User-agent: *\nCrawl-delay: 0.3\nAllow: /\n",
		}}
		s := httptest.NewServer(h)
		defer s.Close()
		base := pinDial(s.Listener.Addr().String())
		defer base.CloseIdleConnections()
		tr := modeTransport(t, mode, 3, robots.Domain, base)
		urls := []string{"http://b.shop.example.com", "http://a.shop.example.com"}
		getAll(t, tr, urls, 1)
		h.mu.Lock()
		h.starts = nil // from here on both hosts' rules are known
		h.mu.Unlock()
		getAll(t, tr, urls, 3)
		if m, _, _ := count.stats(); m != 1 {
			t.Errorf("b asks for a crawl delay: the server saw %d at once over the domain, want 1", m)
		}
		// The gap is measured at the server between arrivals; the delay runs
		// from one release to the next grant, so a gap is never shorter.
		if gap := h.minGap(); gap < delay-10*time.Millisecond {
			t.Errorf("b asks for Crawl-delay 0.3: the shortest gap between requests over the domain was %s, want >= %s", gap, delay)
		}
	})
}

// Only a key that gathers hosts makes the host a contributor: host-keyed
// transports (nil or robots.Site) name none, so they cost the limiter
// nothing more.
func TestRuleFromOnlyWhenShared(t *testing.T) {
	u, _ := url.Parse("http://a.shop.example.com/x")
	for _, c := range []struct {
		name string
		key  robots.SiteKey
		want string
	}{
		{"nil", nil, ""},
		{"Site", robots.Site, ""},
		{"Domain", robots.Domain, "a.shop.example.com"},
	} {
		tr := modeTransport(t, limiter.ModeAtomic, 3, c.key, nil)
		tr.Robots = nil
		if got := tr.ruleFrom(u); got != c.want {
			t.Errorf("SiteKey %s: contributor %q, want %q", c.name, got, c.want)
		}
	}
}
