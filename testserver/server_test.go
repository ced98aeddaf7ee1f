package testserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// start runs a server for the test and closes it at the end.
func start(t *testing.T, p Profile, opts ...Option) *Server {
	t.Helper()
	s, err := New(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func oneSite(spec SiteSpec) Profile {
	return Profile{Name: "test", Seed: 1, Sites: []SiteSpec{spec}}
}

// get fetches url and returns status, body and headers.
func get(t *testing.T, c *http.Client, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

var noRedirects = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func waitStats(t *testing.T, s *Server, what string, cond func(SiteStats) bool) SiteStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.Stats().Sites[0]
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; stats %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdOpen starts k requests to url that the server holds open (a long
// latency), waits until the server counts them all in flight, then cancels
// them and waits for the server to see them end.
func holdOpen(t *testing.T, s *Server, url string, k int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	before := s.Stats().Sites[0].Requests
	var wg sync.WaitGroup
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	waitStats(t, s, "requests in flight", func(st SiteStats) bool { return st.Requests == before+int64(k) })
	cancel()
	wg.Wait()
	waitStats(t, s, "requests to end", func(st SiteStats) bool { return st.InFlight == 0 })
}

func TestConcurrencyCountedExactly(t *testing.T) {
	spec := SiteSpec{Pages: 5, Links: 1, Latency: Duration(time.Minute), Robots: Robots{Concurrency: 2}}
	s := start(t, oneSite(spec))
	url := s.Sites()[0].URL + "/p/1"
	for _, k := range []int{1, 2, 5} {
		s.Reset()
		holdOpen(t, s, url, k)
		st := s.Stats().Sites[0]
		if st.MaxInFlight != k {
			t.Errorf("%d concurrent requests: max_inflight %d", k, st.MaxInFlight)
		}
		// The cap is 2: only starts with 2 or more already in flight count.
		if want := int64(max(0, k-2)); st.OverCap != want || len(st.OverCapSamples) != int(want) {
			t.Errorf("%d concurrent requests, cap 2: over_cap %d, want %d; samples %q", k, st.OverCap, want, st.OverCapSamples)
		}
		// Each over-cap start names what was in flight: the earlier
		// requests, still waiting for their first byte.
		for i, sample := range st.OverCapSamples {
			if !strings.HasPrefix(sample, "/p/1 started at +") ||
				!strings.Contains(sample, fmt.Sprintf(" with %d in flight: /p/1 (for ", i+2)) || !strings.Contains(sample, "ms, 0 bytes sent)") {
				t.Errorf("over-cap sample %d: %q", i, sample)
			}
			t.Log(sample)
		}
	}
	// Sequential requests never count as over the cap.
	fast := start(t, oneSite(SiteSpec{Pages: 5, Links: 1, Robots: Robots{Concurrency: 1}}))
	for i := 0; i < 5; i++ {
		get(t, http.DefaultClient, fast.Sites()[0].URL+"/p/2")
	}
	if st := fast.Stats().Sites[0]; st.OverCap != 0 || st.MaxInFlight != 1 || st.Requests != 5 {
		t.Errorf("sequential requests: %+v", st)
	}
}

func TestGapsMeasured(t *testing.T) {
	s := start(t, oneSite(SiteSpec{Pages: 5, Links: 1, Robots: Robots{CrawlDelay: Duration(time.Second)}}))
	site := s.Sites()[0]
	if site.Cap != 1 || site.CrawlDelay != time.Second {
		t.Fatalf("a crawl delay means cap 1 and that gap: %+v", site)
	}
	if st := s.Stats().Sites[0]; st.MinGapMs != -1 {
		t.Fatalf("min gap before any request: %v, want -1", st.MinGapMs)
	}
	get(t, http.DefaultClient, site.URL+"/p/0")
	time.Sleep(120 * time.Millisecond)
	get(t, http.DefaultClient, site.URL+"/p/1")
	st := s.Stats().Sites[0]
	// The server's gap runs from its end of one request to its start of the
	// next, so it is at least the client's pause.
	if st.MinGapMs < 120 || st.MinGapMs > 5000 {
		t.Fatalf("min gap %v ms after a 120 ms pause", st.MinGapMs)
	}
	if st.GapHistogram["250"] != 1 {
		t.Errorf("gap histogram %v: want the one gap in the 100-250 ms bucket", st.GapHistogram)
	}
	if st.CrawlDelayMs != 1000 {
		t.Errorf("crawl_delay_ms %d", st.CrawlDelayMs)
	}
	// A request that starts while another is in flight has gap 0, even
	// long after the last one ended.
	slow := start(t, oneSite(SiteSpec{Pages: 5, Links: 1, Latency: Duration(time.Minute)}))
	get(t, http.DefaultClient, slow.Sites()[0].URL+"/robots.txt") // robots.txt has no latency
	time.Sleep(50 * time.Millisecond)
	holdOpen(t, slow, slow.Sites()[0].URL+"/p/0", 2)
	if st := slow.Stats().Sites[0]; st.MinGapMs != 0 {
		t.Fatalf("overlapping requests: min gap %v, want 0", st.MinGapMs)
	}
}

func TestCountsPathsRobotsAndDisallowed(t *testing.T) {
	s := start(t, oneSite(SiteSpec{Pages: 10, Links: 3, Robots: Robots{Disallow: []string{"/private/"}}}))
	u := s.Sites()[0].URL
	get(t, http.DefaultClient, u+"/robots.txt")
	get(t, http.DefaultClient, u+"/robots.txt")
	get(t, http.DefaultClient, u+"/p/1")
	get(t, http.DefaultClient, u+"/p/1") // duplicate
	get(t, http.DefaultClient, u+"/p/2")
	get(t, http.DefaultClient, u+"/private/3")
	get(t, http.DefaultClient, u+"/nope")
	st := s.Stats().Sites[0]
	want := SiteStats{Requests: 7, RobotsFetches: 2, DisallowedHits: 1, DuplicateFetches: 1, DistinctPaths: 5}
	if st.Requests != want.Requests || st.RobotsFetches != want.RobotsFetches || st.DisallowedHits != want.DisallowedHits ||
		st.DuplicateFetches != want.DuplicateFetches || st.DistinctPaths != want.DistinctPaths {
		t.Fatalf("got %+v", st)
	}
	if st.Status["200"] != 6 || st.Status["404"] != 1 || st.BytesSent == 0 || st.Pages != 4 {
		t.Fatalf("status %v bytes %d", st.Status, st.BytesSent)
	}
	resp, err := http.Post(s.ControlURL()+"/_reset", "", nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("reset: %v %v", resp, err)
	}
	if st := s.Stats().Sites[0]; st.Requests != 0 || st.DistinctPaths != 0 || st.MaxInFlight != 0 {
		t.Fatalf("after reset: %+v", st)
	}
}

func TestStatsJSON(t *testing.T) {
	p, err := Preset("mixed", 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, p)
	get(t, http.DefaultClient, s.Sites()[1].URL+"/p/0")
	_, body, h := get(t, http.DefaultClient, s.ControlURL()+"/_stats")
	if !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Fatalf("content type %q", h.Get("Content-Type"))
	}
	var raw struct {
		Sites []map[string]any `json:"sites"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Sites) != 3 {
		t.Fatalf("%d sites in /_stats", len(raw.Sites))
	}
	for _, key := range []string{"host", "cap", "requests", "max_inflight", "over_cap", "disallowed_hits",
		"robots_fetches", "duplicate_fetches", "min_gap_ms"} {
		if _, ok := raw.Sites[1][key]; !ok {
			t.Errorf("/_stats lacks %q", key)
		}
	}
	if raw.Sites[1]["requests"].(float64) != 1 || raw.Sites[1]["cap"].(float64) != 1 {
		t.Errorf("site 1 (Concurrency: 1): %v", raw.Sites[1])
	}
}

func TestSitesHaveDistinctHosts(t *testing.T) {
	p, _ := Preset("uniform", 5, 1)
	s := start(t, p)
	seen := map[string]bool{}
	for _, site := range s.Sites() {
		host := strings.Split(site.Host, ":")[0]
		if seen[host] || !strings.HasPrefix(host, "127.") || host == "127.0.0.1" {
			t.Fatalf("site host %s (seen %v)", site.Host, seen)
		}
		seen[host] = true
		if code, _, _ := get(t, http.DefaultClient, site.URL+"/"); code != 200 {
			t.Fatalf("%s/: %d", site.URL, code)
		}
	}
	same := start(t, p, WithSameHost(), WithControl(""))
	for _, site := range same.Sites() {
		if !strings.HasPrefix(site.Host, "127.0.0.1:") {
			t.Fatalf("WithSameHost: %s", site.Host)
		}
	}
	if same.ControlURL() != "" {
		t.Fatal("WithControl(\"\") still opened a control address")
	}
}

// Close waits for requests in flight: a slow stream is cut short, and its end
// is recorded before Close returns.
func TestCloseWaitsForInflight(t *testing.T) {
	s, err := New(oneSite(SiteSpec{Pages: 2, Links: 1, PageBytes: 1000, Slow: 1, SlowFor: Duration(time.Minute)}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.Get(s.Sites()[0].URL + "/slow/1"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	waitStats(t, s, "slow request in flight", func(st SiteStats) bool { return st.InFlight == 1 })
	t0 := time.Now()
	s.Close()
	if st := s.Stats().Sites[0]; st.InFlight != 0 {
		t.Fatalf("Close returned with %d in flight", st.InFlight)
	}
	if time.Since(t0) > 9*time.Second {
		t.Fatalf("Close took %v", time.Since(t0))
	}
	<-done
}

// Expected follows links and redirects but never a closed path; a crawler
// fetching exactly those paths matches FetchedOK.
func TestExpectedWalk(t *testing.T) {
	p := Profile{Name: "e", Seed: 5, Sites: []SiteSpec{
		{Pages: 30, Links: 4, CrossLinks: 1, Redirects: 0.3, Errors: 0.1, Robots: Robots{Disallow: []string{"/private/"}}},
		{Pages: 10, Links: 2, Robots: Robots{Status: 503}},
		{Pages: 10, Links: 2},
	}}
	s := start(t, p)
	want := s.Expected()
	if len(want[1]) != 0 {
		t.Fatalf("a closed site has expected pages: %v", want[1])
	}
	if !want[0]["/"] || !want[2]["/"] || len(want[0]) < 5 {
		t.Fatalf("expected: %v", want)
	}
	for path := range want[0] {
		if strings.HasPrefix(path, "/private/") || strings.HasPrefix(path, "/error/") || strings.HasPrefix(path, "/redirect") {
			t.Errorf("%s expected with a 200", path)
		}
	}
	for i, paths := range want {
		for path := range paths {
			code, _, _ := get(t, noRedirects, s.Sites()[i].URL+path)
			if code == 503 { // a /retry/ page answers 200 the second time
				code, _, _ = get(t, noRedirects, s.Sites()[i].URL+path)
			}
			if code != 200 {
				t.Errorf("site %d %s: %d", i, path, code)
			}
		}
		if got := s.FetchedOK(i); len(got) != len(paths) {
			t.Errorf("site %d: FetchedOK %d paths, expected %d", i, len(got), len(paths))
		}
	}
}

// A /retry/ page asks for a pause once (503 with an HTTP date counted from
// its own Date, 429 with seconds); a request before the pause is over is
// counted, one after it is not.
func TestRetryAfterIsMeasured(t *testing.T) {
	s := start(t, Profile{Name: "retry", Seed: 1, Sites: []SiteSpec{{Pages: 4, Links: 1}}})
	base := s.Sites()[0].URL
	code, _, h := get(t, noRedirects, base+"/retry/0")
	date, err1 := http.ParseTime(h.Get("Date"))
	until, err2 := http.ParseTime(h.Get("Retry-After"))
	if code != 503 || err1 != nil || err2 != nil || until.Sub(date) < time.Second || until.Sub(date) > 2*time.Second {
		t.Fatalf("/retry/0: %d, Date %q, Retry-After %q; want 503 and a date 1-2 s after Date", code, h.Get("Date"), h.Get("Retry-After"))
	}
	get(t, noRedirects, base+"/p/1") // too soon
	if st := s.Stats().Sites[0]; st.EarlyAfterRetry != 1 {
		t.Fatalf("a request at once after a Retry-After: early %d, want 1", st.EarlyAfterRetry)
	}
	time.Sleep(time.Until(until))
	if code, _, h := get(t, noRedirects, base+"/retry/1"); code != 429 || h.Get("Retry-After") != "1" {
		t.Fatalf("/retry/1: %d, Retry-After %q; want 429 and 1", code, h.Get("Retry-After"))
	}
	time.Sleep(1100 * time.Millisecond)
	get(t, noRedirects, base+"/retry/0") // answers 200 now, and in time
	if st := s.Stats().Sites[0]; st.EarlyAfterRetry != 1 {
		t.Fatalf("requests after each pause ran out: early %d, want still 1", st.EarlyAfterRetry)
	}
}

// A streamed page the client leaves before the end is counted as cut
// short; one read to the end is not. Each new connection is counted.
func TestCutShortAndConnections(t *testing.T) {
	s := start(t, Profile{Name: "cut", Seed: 1, Sites: []SiteSpec{{Pages: 4, Links: 1, PageBytes: 64 << 10, SlowFor: Duration(400 * time.Millisecond)}}})
	base := s.Sites()[0].URL
	get(t, noRedirects, base+"/slow/1") // read to the end
	resp, err := http.Get(base + "/slow/2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // at once: the rest is never read
	st := waitStats(t, s, "the cut stream to end", func(st SiteStats) bool { return st.InFlight == 0 })
	if st.CutShort != 1 {
		t.Fatalf("cut short: %d, want 1 (of 2 streams, one read whole)", st.CutShort)
	}
	get(t, noRedirects, base+"/p/1")
	if st := s.Stats().Sites[0]; st.Connections != 2 {
		t.Fatalf("connections: %d, want 2 (one reused by the second request, then one after the early close)", st.Connections)
	}
}

// lastWrite records whether the request had ended when each write reached
// the connection.
type lastWrite struct {
	http.ResponseWriter
	ended  *bool
	writes []bool
}

func (w *lastWrite) Write(b []byte) (int, error) {
	w.writes = append(w.writes, *w.ended)
	return w.ResponseWriter.Write(b)
}

// A request ends at the site as the last of its body goes out, not when
// its handler returns: the client may read it all, release its permit and
// send the next request before a descheduled handler returns (seen in CI:
// "2 at once" on a cap-1 site, the first with all its bytes sent).
func TestRequestEndsAsItsLastByteGoesOut(t *testing.T) {
	ended := false
	rec := httptest.NewRecorder()
	lw := &lastWrite{ResponseWriter: rec, ended: &ended}
	req := &request{path: "/data/1.bin"}
	req.size.Store(-1)
	cw := &countingWriter{ResponseWriter: lw, status: http.StatusOK, req: req, size: -1,
		end: func(status int, bytes int64) {
			if ended || status != 200 || bytes != 10 {
				t.Errorf("end(%d, %d), ended before: %v", status, bytes, ended)
			}
			ended = true
		}}
	cw.Header().Set("Content-Length", "10")
	cw.Write([]byte("01234"))
	cw.Write([]byte("56789"))
	cw.finish() // the handler returns: no second end
	if len(lw.writes) != 2 || lw.writes[0] || !lw.writes[1] {
		t.Fatalf("ended as each write went out: %v; want [false true]", lw.writes)
	}
	if req.sent.Load() != 10 || req.size.Load() != 10 {
		t.Fatalf("sample: %d of %d bytes", req.sent.Load(), req.size.Load())
	}
}
