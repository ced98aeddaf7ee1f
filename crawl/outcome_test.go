package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// pathHits counts a test site's requests by path; its zero value is ready.
type pathHits struct {
	mu   sync.Mutex
	hits map[string]int
}

// count notes a request for path, and returns how many it has had.
func (h *pathHits) count(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hits == nil {
		h.hits = map[string]int{}
	}
	h.hits[path]++
	return h.hits[path]
}

// hit is how many requests path has had.
func (h *pathHits) hit(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[path]
}

// outcomeSite serves one page of each outcome, and counts the requests.
type outcomeSite struct {
	pathHits
}

func (s *outcomeSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.count(r.URL.Path)
	switch r.URL.Path {
	case "/robots.txt":
		fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
	case "/":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<a href="/ok">ok</a> <a href="/moved">moved</a> <a href="/missing">missing</a>
			<a href="/broken">broken</a> <a href="/private/x">private</a> <a href="/big">big</a>`)
	case "/ok", "/target":
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>leaf</p>")
	case "/moved":
		http.Redirect(w, r, "/target", http.StatusMovedPermanently)
	case "/broken":
		http.Error(w, "down", http.StatusInternalServerError)
	case "/big":
		w.Header().Set("Content-Type", "text/plain")
		w.Write(bytes.Repeat([]byte("x"), 4096))
	default:
		http.NotFound(w, r)
	}
}

// closedURL is the root of a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String() + "/"
}

// outcomeCrawler is a crawler on a fresh crawl, with two attempts a URL,
// 1 KiB bodies, its results in out; robots.txt goes out on its Net too.
func outcomeCrawler(t *testing.T, name string, out *bytes.Buffer) *Crawler {
	t.Helper()
	return visibleCrawler(t, name, out, time.Minute)
}

// visibleCrawler is outcomeCrawler whose items are handed out again after
// visibility. Its limiter has no restart guard (the package's redis-server
// is its own), which would hold the first permits past a short visibility.
func visibleCrawler(t *testing.T, name string, out *bytes.Buffer, visibility time.Duration) *Crawler {
	t.Helper()
	prefix := redistest.Prefix(t)
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	lim := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: time.Second, NoRestartGuard: true})
	t.Cleanup(func() { lim.Close() })
	nt, err := NewNet(lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	rob := NewRobotsCacheOn(rdb, lim, nt, nil, robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"}, nil)
	fr := frontier.New(rdb, &frontier.Options{Prefix: prefix, Crawl: name, Visibility: visibility, MaxAttempts: 2, Referrers: true})
	return New(fr, lim, rob, Options{Workers: 3, UserAgent: "politebot/1.0", Timeout: 20 * time.Second,
		MaxBodySize: 1024, Net: nt, Out: out})
}

// A crawl with every outcome records each URL's turns truthfully: a 3xx is
// a redirect whose Location is queued (and fetched once, as a link, not
// inside the redirect's fetch), a 500 is retried and then failed, a seed
// whose robots.txt cannot be reached is unreachable with its cause. The
// final outcomes add up to the distinct URLs done, and so does the summary.
func TestEveryOutcomeAddsUp(t *testing.T) {
	site := &outcomeSite{}
	hs := httptest.NewServer(site)
	defer hs.Close()
	down := closedURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	c := outcomeCrawler(t, "every", &out)
	if _, err := c.Seed(ctx, []string{hs.URL + "/", hs.URL + "/private/seed", down}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	lines := readResults(t, &out)
	root := hs.URL + "/"
	want := map[string][]result{
		root:              {{Outcome: "fetched", Status: 200, ContentType: "text/html; charset=utf-8", Depth: 0, Attempt: 1, Final: true}},
		hs.URL + "/ok":    {{Outcome: "fetched", Status: 200, ContentType: "text/html", Referrer: root, Depth: 1, Attempt: 1, Final: true}},
		hs.URL + "/moved": {{Outcome: "redirect", Status: 301, Location: hs.URL + "/target", Referrer: root, Depth: 1, Attempt: 1, Final: true}},
		hs.URL + "/target": {{Outcome: "fetched", Status: 200, ContentType: "text/html", Referrer: hs.URL + "/moved", Depth: 2,
			Attempt: 1, Final: true}},
		hs.URL + "/missing": {{Outcome: "http_error", Status: 404, Referrer: root, Depth: 1, Attempt: 1, Final: true}},
		hs.URL + "/broken": {{Outcome: "retry", Cause: "status 500", Status: 500, Referrer: root, Depth: 1, Attempt: 1},
			{Outcome: "failed_after_retries", Cause: "status 500", Status: 500, Referrer: root, Depth: 1, Attempt: 2, Final: true}},
		hs.URL + "/private/seed": {{Outcome: "disallowed", Depth: 0, Attempt: 1, Final: true}}, // a link there is dropped, not queued
		hs.URL + "/big":          {{Outcome: "fetched", Status: 200, Bytes: 1024, Truncated: true, ContentType: "text/plain", Referrer: root, Depth: 1, Attempt: 1, Final: true}},
		down:                     {{Outcome: "unreachable", Cause: "connection refused", Depth: 0, Attempt: 1, Final: true}},
	}
	for u, w := range want {
		got := lines[u]
		if len(got) != len(w) {
			t.Errorf("%s: %d lines, want %d: %+v", u, len(got), len(w), got)
			continue
		}
		for i := range w {
			g := got[i]
			if w[i].Bytes == 0 {
				g.Bytes = 0 // a page's size is the server's business
			}
			if w[i].ContentType == "" {
				g.ContentType = "" // net/http's error pages say text/plain
			}
			if requested := g.Status != 0; requested != (g.DurationMS > 0) {
				t.Errorf("%s, line %d: status %d in %v ms", u, i+1, g.Status, g.DurationMS)
			}
			g.URL, g.FetchedAt, g.Worker, g.Error, g.DurationMS = "", time.Time{}, "", "", 0
			w[i].Crawl = "every"
			if g != w[i] {
				t.Errorf("%s, line %d:\n got %+v\nwant %+v", u, i+1, g, w[i])
			}
		}
	}
	if len(lines) != len(want) {
		t.Errorf("results for %d URLs, want %d", len(lines), len(want))
	}
	for path, n := range map[string]int{"/moved": 1, "/target": 1, "/broken": 2, "/private/x": 0, "/private/seed": 0} {
		if got := site.hit(path); got != n {
			t.Errorf("%s requested %d times, want %d", path, got, n)
		}
	}
	p := c.Progress()
	checkAddsUp(t, p, lines, time.Since(start))
	if p.Bytes < 1024 || p.LinksDisallowed != 1 {
		t.Errorf("progress %+v: want the bytes read and the link to /private/x dropped", p)
	}
	if err := c.SeedsFailed(); err != nil {
		t.Errorf("a seed was fetched, yet: %v", err)
	}
}

// readResults parses the JSON lines by URL, in order.
func readResults(t *testing.T, out *bytes.Buffer) map[string][]result {
	t.Helper()
	lines := map[string][]result{}
	dec := json.NewDecoder(out)
	for dec.More() {
		var r result
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		lines[r.URL] = append(lines[r.URL], r)
	}
	return lines
}

// checkAddsUp asserts that the process's counts are its results': each
// outcome's count is its lines, and done (the final outcomes' sum) is the
// distinct URLs, each with exactly one final line; the summary says so too.
func checkAddsUp(t *testing.T, p Progress, lines map[string][]result, elapsed time.Duration) {
	t.Helper()
	byOutcome, finals := map[string]int64{}, 0
	for u, rs := range lines {
		n := 0
		for _, r := range rs {
			byOutcome[r.Outcome]++
			if r.Final {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d final lines, want 1", u, n)
		}
		finals += n
	}
	var sum int64
	for _, name := range Outcomes() {
		if p.Outcomes[name] != byOutcome[name] {
			t.Errorf("outcome %s: counted %d, %d lines", name, p.Outcomes[name], byOutcome[name])
		}
		if name != "retry" && name != "deferred" {
			sum += p.Outcomes[name]
		}
	}
	if p.Done != int64(len(lines)) || sum != p.Done || finals != len(lines) {
		t.Errorf("done %d, final outcomes %d, distinct URLs %d: they must agree", p.Done, sum, len(lines))
	}
	kv := p.Summary(elapsed)
	got := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		got[kv[i].(string)] = kv[i+1]
	}
	if got["done"] != p.Done || got["bytes"] != p.Bytes || got["fetched"] != p.Outcomes["fetched"] {
		t.Errorf("summary %v: want done %d, bytes %d and each outcome", kv, p.Done, p.Bytes)
	}
	if _, err := time.ParseDuration(fmt.Sprint(got["elapsed"])); err != nil {
		t.Errorf("summary elapsed %v: %v", got["elapsed"], err)
	}
}

// When no seed can be reached, SeedsFailed names each with its cause: a
// port that refuses, a name that does not exist (.invalid: answered
// without a DNS query).
func TestUnreachableSeedsAreNamed(t *testing.T) {
	down := closedURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	c := outcomeCrawler(t, "down", &out)
	if _, err := c.Seed(ctx, []string{down, "http://nonexistent.invalid/"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	err := c.SeedsFailed()
	if !errors.Is(err, ErrNoSeedReached) || !strings.Contains(err.Error(), down+": unreachable (connection refused)") ||
		!strings.Contains(err.Error(), "http://nonexistent.invalid/: unreachable (no such host)") {
		t.Fatalf("SeedsFailed: %v", err)
	}
	lines := readResults(t, &out)
	if r := lines["http://nonexistent.invalid/"]; len(r) != 1 || r[0].Outcome != "unreachable" || r[0].Cause != "no such host" ||
		!strings.Contains(r[0].Error, "robots.txt unreachable (no such host)") {
		t.Fatalf("nonexistent.invalid: %+v", r)
	}
	checkAddsUp(t, c.Progress(), lines, time.Second)
}
