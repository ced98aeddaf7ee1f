package fetch

import (
	"fmt"
	"github.com/polite-crawler/polite/internal/sitetest"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
)

// fleet is n crawler processes' transports: each its own Limiter (and so
// its own pub/sub connection and gates), all on one Redis and one prefix.
func fleet(t *testing.T, n int, prefix string, o limiter.Options) []*Transport {
	t.Helper()
	var trs []*Transport
	for range n {
		rdb := srv.Client()
		t.Cleanup(func() { rdb.Close() })
		o := o
		o.Prefix, o.Lease, o.NoRestartGuard = prefix, 5*time.Second, true
		l := limiter.New(rdb, &o)
		t.Cleanup(func() { l.Close() })
		tr := &Transport{Limiter: l, Cap: 3}
		tr.Robots = robots.NewCache(rdb, &http.Client{Transport: &RobotsTransport{Limiter: l}},
			&robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"})
		trs = append(trs, tr)
	}
	return trs
}

// crawlPages has each transport GET its share of base/p/0..n-1, one at a
// time, all transports at once, reading each body to its end. It returns
// the statuses seen.
func crawlPages(t *testing.T, trs []*Transport, base string, n int, each func(i int)) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, tr := range trs {
		c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				code, err := get(c, fmt.Sprintf("%s/p/%d", base, i))
				if err != nil {
					t.Errorf("GET %d: %v", i, err)
					return
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
				if each != nil {
					each(i)
				}
			}
		})
	}
	wg.Wait()
	return codes
}

// Four processes on a fragile site (3× slower per request in flight, 503
// above 2): with adaptive politeness its 503s and its p95 latency fall
// against the same crawl without, and the fleet's effective cap settles
// at 1. Counted at the site.
func TestAdaptiveFragileSite(t *testing.T) {
	forLimiterModes(t, func(t *testing.T, mode limiter.Mode) {
		p, err := testserver.Preset("fragile", 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		ts := sitetest.Start(t, p)
		site := ts.Sites()[0]
		const pages = 140
		run := func(on bool) testserver.SiteStats {
			ts.Reset()
			a := &limiter.Adaptive{Off: !on, Backoff: 200 * time.Millisecond, Forgive: 5 * time.Second}
			trs := fleet(t, 4, keyPrefix(t)+":"+strconv.FormatBool(on), limiter.Options{Mode: mode, Adaptive: a})
			var capOne, samples atomic.Int64
			crawlPages(t, trs, site.URL, pages, func(i int) {
				if i%10 != 0 || !on {
					return
				}
				st, err := trs[0].Limiter.Status(t.Context(), robots.Site(mustURL(t, site.URL)), 3)
				if err != nil {
					t.Error(err)
					return
				}
				samples.Add(1)
				if st.Cap == 1 {
					capOne.Add(1)
				}
			})
			st := ts.Stats().Sites[0]
			if on {
				final, _ := trs[0].Limiter.Status(t.Context(), robots.Site(mustURL(t, site.URL)), 3)
				t.Logf("%s adaptive: effective cap %d (1 in %d of %d samples), TTFB %s (best %s)",
					mode, final.Cap, capOne.Load(), samples.Load(), final.TTFB, final.BestTTFB)
				if final.Cap != 1 || capOne.Load()*2 < samples.Load() {
					t.Errorf("effective cap %d at the end, 1 in %d of %d samples: want it settled at 1", final.Cap, capOne.Load(), samples.Load())
				}
			}
			return st
		}
		off := run(false)
		on := run(true)
		t.Logf("%s: adaptive off: %d 503s, p95 %.0f ms, %d pages; on: %d 503s, p95 %.0f ms, %d pages",
			mode, off.Overloaded, off.Latency.P95Ms, off.Pages, on.Overloaded, on.Latency.P95Ms, on.Pages)
		if off.Overloaded < 10 {
			t.Fatalf("adaptive off: only %d 503s: the site was never overloaded, the test shows nothing", off.Overloaded)
		}
		if on.Overloaded*2 > off.Overloaded {
			t.Errorf("503s: %d with adaptive politeness, %d without: want at least 50%% fewer", on.Overloaded, off.Overloaded)
		}
		if on.Latency.P95Ms >= off.Latency.P95Ms*0.75 {
			t.Errorf("p95 latency %.0f ms with, %.0f ms without: want it well lower", on.Latency.P95Ms, off.Latency.P95Ms)
		}
	})
}

// A 429/503 without Retry-After holds every process off the site for the
// backoff (no request reaches it meanwhile, counted at the site), and a
// repeat after the backoff doubles it.
func TestAdaptiveHeaderlessHoldsFleetOff(t *testing.T) {
	forLimiterModes(t, func(t *testing.T, mode limiter.Mode) {
		const backoff = 400 * time.Millisecond
		var mu sync.Mutex
		var arrivals []time.Time
		var refusedAt []time.Time // when each 503 was answered
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				fmt.Fprint(w, "User-agent: *\nAllow: /\n")
				return
			}
			mu.Lock()
			now := time.Now()
			arrivals = append(arrivals, now)
			// Refuse the first page request, and the first after each
			// hold-off (one refused so far: the second, after the first).
			refuse := len(arrivals) == 1 || (len(refusedAt) == 1 && now.Sub(refusedAt[0]) > backoff/2)
			if refuse {
				refusedAt = append(refusedAt, now)
			}
			mu.Unlock()
			if refuse {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			time.Sleep(5 * time.Millisecond)
			io.WriteString(w, "ok")
		})
		hs := httptest.NewServer(h)
		defer hs.Close()
		a := &limiter.Adaptive{Backoff: backoff, MaxBackoff: 10 * backoff, Forgive: 10 * time.Second}
		trs := fleet(t, 3, keyPrefix(t), limiter.Options{Mode: mode, Adaptive: a})
		crawlPages(t, trs, hs.URL, 60, nil)
		mu.Lock()
		defer mu.Unlock()
		if len(refusedAt) != 2 {
			t.Fatalf("%d 503s answered, want 2", len(refusedAt))
		}
		// Requests granted before the 503's release set the hold-off may
		// arrive just after it (the grace); none after that until it ends.
		const grace = 40 * time.Millisecond
		for i, want := range []time.Duration{backoff, 2 * backoff} {
			from := refusedAt[i]
			first := time.Time{}
			for _, at := range arrivals {
				if at.After(from.Add(grace)) && (first.IsZero() || at.Before(first)) {
					first = at
				}
			}
			if first.IsZero() {
				t.Fatalf("no request after the %s backoff", want)
			}
			if gap := first.Sub(from); gap < want*85/100 {
				t.Errorf("backoff %d: a request reached the site %s after the 503, want none for %s (-10%% jitter)", i+1, gap, want)
			}
		}
		var backs int64
		for _, tr := range trs {
			backs += tr.Limiter.AdaptStats().Backoffs
		}
		if backs != 2 {
			t.Errorf("%d backoffs counted, want 2", backs)
		}
	})
}

// However healthy the site, the effective cap never rises above robots.txt's
// Concurrency: the site never sees 3 at once when it asks for 2, through
// decreases and increases (counted at the site).
func TestAdaptiveNeverAboveRobotsCap(t *testing.T) {
	forLimiterModes(t, func(t *testing.T, mode limiter.Mode) {
		var inFlight, maxIn, n atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				fmt.Fprint(w, "User-agent: *\nConcurrency: 2\n")
				return
			}
			c := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := maxIn.Load(); c > m && !maxIn.CompareAndSwap(m, c); m = maxIn.Load() {
			}
			// Slow now and then, so that the cap falls and climbs back.
			d := 2 * time.Millisecond
			if k := n.Add(1); k%40 >= 30 {
				d = 80 * time.Millisecond
			}
			time.Sleep(d)
			io.WriteString(w, "ok")
		})
		hs := httptest.NewServer(h)
		defer hs.Close()
		a := &limiter.Adaptive{Window: 4, Cooldown: 1, FirstDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond}
		trs := fleet(t, 4, keyPrefix(t), limiter.Options{Mode: mode, Adaptive: a})
		codes := crawlPages(t, trs, hs.URL, 240, nil)
		var s limiter.AdaptStats
		for _, tr := range trs {
			x := tr.Limiter.AdaptStats()
			s.Increases += x.Increases
			s.Decreases += x.Decreases
		}
		t.Logf("%s: %v, max in flight %d, %d decreases, %d increases", mode, codes, maxIn.Load(), s.Decreases, s.Increases)
		if maxIn.Load() > 2 {
			t.Fatalf("%d requests at once, robots.txt asks for 2", maxIn.Load())
		}
		if s.Increases < 2 || s.Decreases < 2 {
			t.Fatalf("%d increases, %d decreases: the controller never moved, the test shows nothing", s.Increases, s.Decreases)
		}
	})
}

// A site that suffers, then recovers, gets its full cap back within the
// stated bound: the smoothed time's way down, then one slot per window.
func TestAdaptiveRecovery(t *testing.T) {
	forLimiterModes(t, func(t *testing.T, mode limiter.Mode) {
		var inFlight, maxIn atomic.Int64
		var healthy atomic.Bool
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				fmt.Fprint(w, "User-agent: *\nAllow: /\n")
				return
			}
			c := inFlight.Add(1)
			defer inFlight.Add(-1)
			d := 20 * time.Millisecond
			if !healthy.Load() {
				d = 20 * time.Millisecond * time.Duration(1<<(2*(c-1))) // 4× per other request in flight
			} else {
				for m := maxIn.Load(); c > m && !maxIn.CompareAndSwap(m, c); m = maxIn.Load() {
				}
			}
			time.Sleep(d)
			io.WriteString(w, "ok")
		})
		hs := httptest.NewServer(h)
		defer hs.Close()
		const window = 10
		a := &limiter.Adaptive{Window: window}
		trs := fleet(t, 4, keyPrefix(t), limiter.Options{Mode: mode, Adaptive: a})
		site := robots.Site(mustURL(t, hs.URL))
		capNow := func() int {
			st, err := trs[0].Limiter.Status(t.Context(), site, 3)
			if err != nil {
				t.Fatal(err)
			}
			return st.Cap
		}
		crawlPages(t, trs, hs.URL, 40, nil)
		if c := capNow(); c != 1 {
			t.Fatalf("suffering site: effective cap %d, want 1", c)
		}
		healthy.Store(true)
		var back atomic.Int64
		back.Store(-1)
		crawlPages(t, trs, hs.URL, 120, func(i int) {
			if back.Load() < 0 && capNow() == 3 {
				back.Store(int64(i))
			}
		})
		// Bound: the cool-down and the smoothed time's way down (under 10
		// fetches here), then (3-1) windows, plus the fetches in flight.
		t.Logf("%s: full cap back after %d healthy fetches (window %d); max in flight then %d", mode, back.Load(), window, maxIn.Load())
		if back.Load() < 0 || back.Load() > 2*window+15 {
			t.Fatalf("full cap back after %d fetches, want within %d", back.Load(), 2*window+15)
		}
		if maxIn.Load() != 3 {
			t.Errorf("recovered: at most %d in flight, want the full 3", maxIn.Load())
		}
	})
}

// A healthy site on this busy machine is not mistaken for a suffering one:
// four processes at its cap, no decrease. Logs the time-to-first-byte noise
// the thresholds must stand above.
func TestAdaptiveHealthySiteUntouched(t *testing.T) {
	p, err := testserver.Preset("uniform", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ts := sitetest.Start(t, p)
	site := ts.Sites()[0]
	var mu sync.Mutex
	var ttfb []time.Duration
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && r.URL.Path != "/robots.txt" {
			mu.Lock()
			ttfb = append(ttfb, time.Since(start))
			mu.Unlock()
		}
		return resp, err
	})
	trs := fleet(t, 4, keyPrefix(t), limiter.Options{Mode: limiter.ModeAtomic})
	for _, tr := range trs {
		tr.Base = base
	}
	crawlPages(t, trs, site.URL, 50, nil) // the uniform site has 50 pages
	crawlPages(t, trs, site.URL, 50, nil) // and again
	var dec int64
	for _, tr := range trs {
		dec += tr.Limiter.AdaptStats().Decreases
	}
	st, err := trs[0].Limiter.Status(t.Context(), robots.Site(mustURL(t, site.URL)), 3)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ttfb)
	q := func(f float64) time.Duration { return ttfb[int(f*float64(len(ttfb)-1))].Round(time.Millisecond) }
	t.Logf("uniform site, 4 processes at cap 3: TTFB p50 %s p95 %s p99 %s max %s; smoothed %s, best %s; %d decreases",
		q(0.5), q(0.95), q(0.99), q(1), st.TTFB.Round(time.Millisecond), st.BestTTFB.Round(time.Millisecond), dec)
	if dec != 0 || st.Cap != 3 {
		t.Fatalf("a healthy site: %d decreases, effective cap %d, want none and 3", dec, st.Cap)
	}
}

// A reserved permit (the crawl's path) carries its fetch's outcome to the
// release the owner sends in its own pipeline (Reservation.ReleaseOn).
func TestAdaptiveOutcomeOnReservation(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/robots.txt" {
			time.Sleep(30 * time.Millisecond)
		}
		io.WriteString(w, "ok")
	}))
	defer hs.Close()
	tr := fleet(t, 1, keyPrefix(t), limiter.Options{})[0]
	u := mustURL(t, hs.URL+"/p/1")
	ctx := t.Context()
	res, err := tr.Reserve(ctx, u, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := getCtx(WithReservation(ctx, res), &http.Client{Transport: tr}, u.String()); err != nil || code != 200 {
		t.Fatalf("GET: %d %v", code, err)
	}
	rdb := srv.Client()
	defer rdb.Close()
	pipe := rdb.Pipeline()
	after := res.ReleaseOn(ctx, pipe)
	pipe.Exec(ctx)
	if err := after(); err != nil {
		t.Fatal(err)
	}
	st, err := tr.Limiter.Status(ctx, robots.Site(u), 3)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTFB < 25*time.Millisecond || st.TTLB < st.TTFB || st.Window.OK != 1 { // the page: robots.txt's fetch leaves the health alone (TestRobotsFetchKeepsReducedCap)
		t.Fatalf("health after a reserved fetch: TTFB %s TTLB %s, window %+v: want the fetch recorded", st.TTFB, st.TTLB, st.Window)
	}
}

// A robots.txt fetch leaves the site's health alone: its permit has limit
// 1, which the controller would take for the site's rule, so a cap the
// site's trouble reduced to 1 would come back as not reduced (3 at once
// for the pages again).
func TestRobotsFetchKeepsReducedCap(t *testing.T) {
	ctx := t.Context()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "User-agent: *\nAllow: /\n")
	}))
	defer site.Close()
	rdb := srv.Client()
	defer rdb.Close()
	l := limiter.New(rdb, &limiter.Options{Prefix: fmt.Sprintf("robotscap%d", time.Now().UnixNano()), NoRestartGuard: true,
		Adaptive: &limiter.Adaptive{Window: 5, Cooldown: 1, Backoff: 300 * time.Millisecond, FirstDelay: 20 * time.Millisecond, MaxDelay: 80 * time.Millisecond}})
	defer l.Close()
	u, _ := url.Parse(site.URL + "/robots.txt")
	key := robots.Site(u)
	capNow := func() int {
		t.Helper()
		st, err := l.Status(ctx, key, 3)
		if err != nil {
			t.Fatal(err)
		}
		return st.Cap
	}
	for i := 0; capNow() != 1; i++ {
		if i == 20 {
			t.Fatalf("20 failed fetches left the cap at %d, want 1", capNow())
		}
		p, err := l.Acquire(ctx, key, 3)
		if err != nil {
			t.Fatal(err)
		}
		p.SetOutcome(limiter.Outcome{Class: limiter.OutcomeServerError})
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c := &http.Client{Transport: &RobotsTransport{Limiter: l}, Timeout: 10 * time.Second}
	for range 3 { // as many as it takes to make a window of healthy outcomes
		resp, err := c.Get(u.String())
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := capNow(); got != 1 {
			t.Fatalf("after a robots.txt fetch the site's cap is %d, want it left at 1", got)
		}
	}
}
