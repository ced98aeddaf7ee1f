package testserver

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func fragileSite(f Fragile) Profile {
	return oneSite(SiteSpec{Pages: 10, Links: 2, PageBytes: 512, Robots: Robots{Disallow: []string{"/private/"}}, Fragile: f})
}

// hold starts k requests to url and returns once the site counts all k in
// flight; release cancels them and waits for the site to see them end.
func hold(t *testing.T, s *Server, url string, k int) (release func()) {
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
	waitStats(t, s, "held requests in flight", func(st SiteStats) bool { return st.Requests == before+int64(k) && st.InFlight >= k })
	return func() {
		cancel()
		wg.Wait()
		waitStats(t, s, "held requests to end", func(st SiteStats) bool { return st.InFlight == 0 })
	}
}

func TestFragileLatencyFormula(t *testing.T) {
	f := Fragile{Base: ms(50), Factor: 3, FailAbove: 4, Max: ms(1000)}
	for _, c := range []struct {
		n      int
		want   time.Duration
		refuse bool
	}{
		{1, 50 * time.Millisecond, false},
		{2, 150 * time.Millisecond, false},
		{3, 450 * time.Millisecond, false},
		{4, time.Second, false}, // 1350 ms, capped at Max
		{5, 0, true},
	} {
		if d, refuse := f.latency(c.n); d != c.want || refuse != c.refuse {
			t.Errorf("%d in flight: (%v, %v), want (%v, %v)", c.n, d, refuse, c.want, c.refuse)
		}
	}
	never := Fragile{Base: ms(10), Factor: 10}
	if d, refuse := never.latency(100); refuse || d != defaultFragileMax {
		t.Errorf("fail_above 0, 100 in flight: (%v, %v), want (%v, false)", d, refuse, defaultFragileMax)
	}
}

// Alone, a page of a fragile site takes its base latency, and the site
// records that as the page's latency.
func TestFragileAloneTakesBase(t *testing.T) {
	const base = 80 * time.Millisecond
	s := start(t, fragileSite(Fragile{Base: Duration(base), Factor: 3, FailAbove: 2}))
	u := s.Sites()[0].URL
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		if code, _, _ := get(t, http.DefaultClient, u+"/p/1"); code != 200 {
			t.Fatalf("alone: %d", code)
		}
		if took := time.Since(t0); took < base || took > base+5*time.Second {
			t.Fatalf("a page alone took %v, want about %v", took, base)
		}
	}
	st := s.Stats().Sites[0]
	ms := float64(base.Milliseconds())
	if l := st.Latency; l.Count != 3 || l.P50Ms < ms || l.P95Ms < ms || l.MaxMs < ms || l.MaxMs > ms+5000 {
		t.Fatalf("latency as the site saw it: %+v, want 3 answers of about %v", l, base)
	}
	if st.Overloaded != 0 || st.Status5xx != 0 || st.Status2xx != 3 {
		t.Fatalf("alone: overloaded %d, 5xx %d, 2xx %d", st.Overloaded, st.Status5xx, st.Status2xx)
	}
}

// With k requests in flight at once, the i-th to arrive waits
// base × factor^(i−1): the slowest takes at least base × factor^(k−1).
func TestFragileLatencyGrowsWithInFlight(t *testing.T) {
	const base, factor, k = 100 * time.Millisecond, 3, 3
	s := start(t, fragileSite(Fragile{Base: Duration(base), Factor: factor}))
	u := s.Sites()[0].URL
	// The formula holds when all k overlap at the site (max in flight k);
	// on a machine so busy that one ended before the last arrived, try again.
	for attempt := 1; ; attempt++ {
		s.Reset()
		took := make([]time.Duration, k)
		var wg sync.WaitGroup
		for i := range took {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				get(t, http.DefaultClient, u+"/p/2")
				took[i] = time.Since(t0)
			}()
		}
		wg.Wait()
		st := s.Stats().Sites[0]
		if st.MaxInFlight < k && attempt < 5 {
			t.Logf("attempt %d: only %d in flight at once; again", attempt, st.MaxInFlight)
			continue
		}
		if st.MaxInFlight != k {
			t.Fatalf("never had %d in flight at once: %+v", k, st)
		}
		slices.Sort(took)
		want := base
		for i, d := range took {
			if d < want {
				t.Errorf("request %d of %d to finish took %v, want >= %v (all: %v)", i+1, k, d, want, took)
			}
			want *= factor
		}
		// Nearest rank of 3: p50 is the 2nd (base × 3), max the 3rd (base × 9).
		ms := float64(base.Milliseconds())
		if l := st.Latency; l.Count != k || l.P50Ms < ms*factor || l.MaxMs < ms*factor*factor || l.P99Ms != l.MaxMs {
			t.Errorf("latency as the site saw it: %+v", l)
		}
		return
	}
}

// A request that arrives with fail_above already in flight is answered 503
// at once, without Retry-After, and counted; robots.txt is never refused;
// once the others end, the site accepts fail_above again.
func TestFragileRefusesAboveLimit(t *testing.T) {
	s := start(t, fragileSite(Fragile{Base: Duration(time.Minute), Factor: 1, FailAbove: 2, Max: Duration(time.Minute)}))
	u := s.Sites()[0].URL
	for round := 1; round <= 2; round++ {
		release := hold(t, s, u+"/p/1", 2)
		t0 := time.Now()
		code, _, h := get(t, noRedirects, u+"/p/3")
		if code != 503 || h.Get("Retry-After") != "" {
			t.Fatalf("round %d, a third in flight: %d, Retry-After %q; want 503 and none", round, code, h.Get("Retry-After"))
		}
		if took := time.Since(t0); took > 5*time.Second {
			t.Fatalf("the refusal took %v; want it at once", took)
		}
		if code, body, _ := get(t, noRedirects, u+"/robots.txt"); code != 200 || !strings.Contains(body, "Disallow: /private/") {
			t.Fatalf("robots.txt with the site overloaded: %d %q", code, body)
		}
		release()
		st := s.Stats().Sites[0]
		if st.Overloaded != int64(round) || st.Status5xx != int64(round) || st.Status["503"] != int64(round) {
			t.Fatalf("round %d: overloaded %d, 5xx %d, status %v; want %d each", round, st.Overloaded, st.Status5xx, st.Status, round)
		}
		// Neither the refused requests nor those left while they waited
		// have a latency; a headerless 503 holds no one off.
		if st.Latency.Count != 0 || st.EarlyAfterRetry != 0 {
			t.Fatalf("round %d: latency %+v, early %d", round, st.Latency, st.EarlyAfterRetry)
		}
	}
	resp, err := http.Post(s.ControlURL()+"/_reset", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st := s.Stats().Sites[0]; st.Overloaded != 0 || st.Status5xx != 0 || st.Status2xx != 0 || st.Latency != (Latency{}) {
		t.Fatalf("after reset: overloaded %d, 5xx %d, 2xx %d, latency %+v", st.Overloaded, st.Status5xx, st.Status2xx, st.Latency)
	}
}

// The latency and 5xx figures are in /_stats, and reset by POST /_reset.
func TestLatencyAndErrorsInStatsJSON(t *testing.T) {
	s := start(t, oneSite(SiteSpec{Pages: 5, Links: 1, Latency: ms(30), Errors: 1, Robots: Robots{Disallow: []string{"/private/"}}}))
	u := s.Sites()[0].URL
	get(t, noRedirects, u+"/p/1")
	get(t, noRedirects, u+"/error/1")
	get(t, noRedirects, u+"/robots.txt")
	var raw struct {
		Sites []map[string]json.RawMessage `json:"sites"`
	}
	readStats := func() {
		_, body, _ := get(t, http.DefaultClient, s.ControlURL()+"/_stats")
		if err := json.Unmarshal([]byte(body), &raw); err != nil {
			t.Fatal(err)
		}
	}
	readStats()
	var l Latency
	json.Unmarshal(raw.Sites[0]["latency"], &l)
	if l.Count != 1 || l.P95Ms < 30 || l.P95Ms > 5030 {
		t.Errorf("latency: %s (one page of 30 ms; the 500 and robots.txt are not pages)", raw.Sites[0]["latency"])
	}
	for key, want := range map[string]string{"status_2xx": "2", "status_5xx": "1", "overloaded": "0"} {
		if got := string(raw.Sites[0][key]); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
	if _, ok := raw.Sites[0]["fragile"]; ok {
		t.Errorf("a sturdy site says it is fragile: %s", raw.Sites[0]["fragile"])
	}
	http.Post(s.ControlURL()+"/_reset", "", nil)
	readStats()
	if got := string(raw.Sites[0]["status_5xx"]); got != "0" || !strings.Contains(string(raw.Sites[0]["latency"]), `"count": 0`) {
		t.Errorf("after reset: 5xx %s, latency %s", got, raw.Sites[0]["latency"])
	}
}

func TestFragilePreset(t *testing.T) {
	if !slices.Contains(PresetNames(), "fragile") {
		t.Fatalf("presets %v lack fragile", PresetNames())
	}
	p, err := Preset("fragile", 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := Fragile{Base: ms(50), Factor: 3, FailAbove: 2}
	s := start(t, p)
	for _, site := range s.Sites() {
		if site.Spec.Fragile != want || site.Cap != 3 || site.Spec.Pages < 100 || !slices.Equal(site.Disallowed, []string{"/private/"}) {
			t.Errorf("site %d: fragile %+v cap %d pages %d disallowed %v", site.Index, site.Spec.Fragile, site.Cap, site.Spec.Pages, site.Disallowed)
		}
	}
	if code, _, _ := get(t, http.DefaultClient, s.Sites()[1].URL+"/"); code != 200 {
		t.Fatalf("home page: %d", code)
	}
	st := s.Stats().Sites[1]
	if st.Fragile != "50ms ×3 per request in flight, 503 above 2" || st.Latency.Count != 1 || st.Latency.MaxMs < 50 {
		t.Errorf("stats: fragile %q, latency %+v", st.Fragile, st.Latency)
	}
	if !strings.Contains(dashboardHTML(t, s), "p95 ms") {
		t.Error("dashboard lacks the p95 column")
	}
}

func dashboardHTML(t *testing.T, s *Server) string {
	t.Helper()
	_, body, _ := get(t, http.DefaultClient, s.ControlURL()+"/")
	return body
}

func TestFragileProfileFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	os.WriteFile(path, []byte(`{"name": "f", "seed": 1, "sites": [{"pages": 3, "links": 1,
		"fragile": {"base": "50ms", "factor": 3, "fail_above": 2, "max": "2s"}}]}`), 0o644)
	p, err := LoadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Fragile{Base: ms(50), Factor: 3, FailAbove: 2, Max: ms(2000)}); p.Sites[0].Fragile != want {
		t.Fatalf("loaded %+v, want %+v", p.Sites[0].Fragile, want)
	}
	b, _ := json.Marshal(SiteSpec{Pages: 1})
	if strings.Contains(string(b), "fragile") {
		t.Errorf("a sturdy site's spec mentions fragile: %s", b)
	}
	for _, c := range []struct {
		spec SiteSpec
		want string
	}{
		{SiteSpec{Pages: 1, Fragile: Fragile{Base: ms(50), Factor: 0.5}}, "fragile.factor"},
		{SiteSpec{Pages: 1, Fragile: Fragile{Base: ms(50), Factor: 2, FailAbove: -1}}, "fragile.fail_above"},
		{SiteSpec{Pages: 1, Fragile: Fragile{Base: ms(500), Factor: 2, Max: ms(100)}}, "fragile.base"},
		{SiteSpec{Pages: 1, Latency: ms(10), Fragile: Fragile{Base: ms(50), Factor: 2}}, "fragile"},
	} {
		p := oneSite(c.spec)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "sites[0]."+c.want+":") {
			t.Errorf("%+v: %v, want a complaint about %s", c.spec.Fragile, err, c.want)
		}
	}
}
