package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/testserver"
)

// faultSites are 4 sites whose slow pages (the share slow of them) stream
// for 2.5 s, longer than the crawlers' 1 s lease, so that permits are held
// across a fault.
func faultSites(t *testing.T, slow float64) (*testserver.Server, []string) {
	t.Helper()
	spec := func(r testserver.Robots) testserver.SiteSpec {
		r.Disallow = []string{"/private/"}
		return testserver.SiteSpec{Pages: 8, Links: 4, Latency: testserver.Duration(20 * time.Millisecond), PageBytes: 2 << 10,
			Slow: slow, SlowFor: testserver.Duration(2500 * time.Millisecond), Robots: r}
	}
	return serveSites(t, testserver.Profile{Name: "faults", Seed: 3, Sites: []testserver.SiteSpec{
		spec(testserver.Robots{}), spec(testserver.Robots{Concurrency: 2}), spec(testserver.Robots{Concurrency: 1}),
		spec(testserver.Robots{CrawlDelay: testserver.Duration(200 * time.Millisecond)}),
	}})
}

// faultCrawl starts a private Redis, the fault sites and 3 crawler
// processes on them (1 s lease), and returns once 4 requests are in flight:
// the moment to inject a fault.
func faultCrawl(t *testing.T, ctx context.Context) (*redistest.Server, *testserver.Server, []*exec.Cmd) {
	t.Helper()
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rs.Close)
	ts, seeds := faultSites(t, 0.4)
	cmds := fleet(t, ctx, 3, rs.Addr, seeds, "--workers", "6", "--lease", "1s", "--timeout", "8s", "--visibility", "12s")
	waitHeld(t, ts, 4, 0)
	return rs, ts, cmds
}

// waitHeld waits until the sites have at least n requests in flight that
// all started at least age ago: none has started since (age 0: any n in
// flight).
func waitHeld(t *testing.T, ts *testserver.Server, n int, age time.Duration) {
	t.Helper()
	last, since := int64(-1), time.Now()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		inFlight, requests := totals(ts)
		if requests != last {
			last, since = requests, time.Now()
		}
		if inFlight >= n && time.Since(since) >= age {
			return
		}
	}
	t.Fatalf("never %d requests in flight for %s", n, age)
}

// overCapWindow is the longest run of 100 ms steps in which a site had more
// requests in flight than its cap, and when the steps over cap were (ms
// since the test server started).
func overCapWindow(ts *testserver.Server) (time.Duration, []int64) {
	longest := 0
	var at []int64
	for _, s := range ts.Stats().Sites {
		run := 0
		for i, n := range s.Series {
			if n > s.Cap {
				run++
				longest = max(longest, run)
				at = append(at, s.SeriesEndMs-int64(len(s.Series)-1-i)*100)
			} else {
				run = 0
			}
		}
	}
	return time.Duration(longest) * 100 * time.Millisecond, at
}

// untilNextRequest waits (up to a minute) for the sites' next request and
// says how long that took.
func untilNextRequest(ts *testserver.Server) time.Duration {
	_, before := totals(ts)
	from := time.Now()
	for time.Since(from) < time.Minute {
		if _, n := totals(ts); n != before {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(from).Round(time.Millisecond)
}

// totals reads, from one snapshot of the sites, the requests in flight
// and the requests seen in all.
func totals(ts *testserver.Server) (inFlight int, requests int64) {
	for _, s := range ts.Stats().Sites {
		inFlight, requests = inFlight+s.InFlight, requests+s.Requests
	}
	return inFlight, requests
}

// Redis paused (CLIENT PAUSE) for 3 leases while permits are held for slow
// downloads: holders stop by their own clock before their lease runs out,
// so when Redis answers again and hands their slots on, no site sees more
// than its cap; the workers carry on and the crawl completes, nothing lost.
func TestRedisPausedMidCrawl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs, ts, cmds := faultCrawl(t, ctx)
	rdb := rs.Client()
	defer rdb.Close()
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", 3000, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	paused, pausedMs := time.Now(), ts.Stats().UptimeMs
	time.Sleep(time.Until(paused.Add(3 * time.Second)))
	t.Logf("first request %s after Redis answered again", untilNextRequest(ts))
	waitAll(t, cmds)
	window, at := overCapWindow(ts)
	t.Logf("crawl done %s after the pause began at %d ms; longest window over a cap: %s (steps at %v ms)", time.Since(paused).Round(100*time.Millisecond), pausedMs, window, at)
	checkPolite(t, ts)
	checkAllFetched(t, ts)
	checkRefetchedAtMost(t, ts, 3*6) // downloads fenced during the pause: all 3 workers' 6
}

// Redis killed and restarted empty while permits are held for slow
// downloads: every worker exits 0 (the crawl's state went with Redis), none
// crashes, and no site sees more than its cap or a gap under its delay. The
// restarted Redis has forgotten the permits out; its restart guard grants
// none until their holders have stopped (fenced, or told at their refresh).
func TestRedisRestartedEmptyMidCrawl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs, ts, cmds := faultCrawl(t, ctx)
	if err := rs.Restart(); err != nil {
		t.Fatal(err)
	}
	restartedMs := ts.Stats().UptimeMs
	t.Logf("first request %s after Redis restarted (lease 1 s)", untilNextRequest(ts))
	waitAll(t, cmds)
	for i, s := range ts.Stats().Sites {
		t.Logf("site %d (%s): max at once %d (cap %d), starts over cap %d, min gap %.0f ms (delay %d ms)", i, s.Rules, s.MaxInFlight, s.Cap, s.OverCap, s.MinGapMs, s.CrawlDelayMs)
	}
	window, at := overCapWindow(ts)
	t.Logf("restarted at %d ms; longest window over a cap: %s (steps at %v ms)", restartedMs, window, at)
	if window > 0 {
		t.Errorf("a site was over its cap for %s after Redis restarted empty", window)
	}
	lost, total := 0, 0
	for i, want := range ts.Expected() {
		got := ts.FetchedOK(i)
		for p := range want {
			total++
			if !got[p] {
				lost++
			}
		}
	}
	t.Logf("pages never fetched, their queue gone with Redis: %d of %d", lost, total)
	checkPolite(t, ts)
}

// A worker cut off from Redis but not from the sites (its Redis traffic goes
// through a proxy the test cuts, like a network partition) stops fetching
// within one lease: it cannot refresh its permits, so its own clock stops
// its downloads, and it can take no new ones. Another worker then finishes
// the crawl; once the partition heals, the cut-off one sees that and exits.
// Both exit 0, every page is fetched, and every cap holds throughout.
func TestWorkerCutOffFromRedis(t *testing.T) {
	const lease = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	px, err := redistest.NewProxy(rs.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	ts, seeds := faultSites(t, 1) // every page streams: what is in flight at the cut is held past a lease
	args := []string{"--workers", "6", "--lease", lease.String(), "--timeout", "4s", "--visibility", "6s"}
	cutOff := fleet(t, ctx, 1, px.Addr, seeds, args...)[0]
	waitHeld(t, ts, 2, 300*time.Millisecond)
	px.Cut()
	cut := time.Now()

	// Only the cut-off worker is crawling: watch the sites for 3 leases.
	var busy, started time.Time // last seen with a request in flight; last new request
	_, before := totals(ts)
	for time.Since(cut) < 3*lease {
		inFlight, n := totals(ts)
		if n != before {
			before, started = n, time.Now()
		}
		if inFlight > 0 {
			busy = time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("cut off from Redis: the sites saw its last request end %s after the cut (lease %s)", busy.Sub(cut).Round(time.Millisecond), lease)
	if busy.Sub(cut) > lease {
		t.Errorf("a request was still in flight %s after the worker was cut off from Redis; want within one lease (%s)", busy.Sub(cut), lease)
	}
	if started.Sub(cut) > lease {
		t.Errorf("a new request started %s after the worker was cut off from Redis", started.Sub(cut))
	}

	other := fleet(t, ctx, 1, rs.Addr, seeds, args...)[0]
	if err := other.Wait(); err != nil {
		t.Fatalf("the worker with Redis: %v\n%s", err, other.Stderr)
	}
	px.Heal()
	healed := time.Now()
	if err := cutOff.Wait(); err != nil {
		t.Fatalf("the cut-off worker, after the partition healed: %v\n%s", err, cutOff.Stderr)
	}
	t.Logf("the cut-off worker exited %s after the partition healed", time.Since(healed).Round(time.Millisecond))
	if log := cutOff.Stderr.(*strings.Builder).String(); !strings.Contains(log, `"msg":"permit lost mid-request`) {
		t.Errorf("the cut-off worker's log does not say its requests were stopped for lost permits:\n%s", log)
	}
	checkPolite(t, ts)
	checkAllFetched(t, ts)
	checkRefetchedAtMost(t, ts, 6) // the cut-off worker's
}
