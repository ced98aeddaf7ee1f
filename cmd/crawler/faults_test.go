package main

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/testserver"
)

// faultSites are 4 sites whose slow pages stream for 2.5 s, longer than
// the crawlers' 1 s lease, so that permits are held across a fault.
func faultSites(t *testing.T) (*testserver.Server, []string) {
	t.Helper()
	spec := func(r testserver.Robots) testserver.SiteSpec {
		r.Disallow = []string{"/private/"}
		return testserver.SiteSpec{Pages: 8, Links: 4, Latency: testserver.Duration(20 * time.Millisecond), PageBytes: 2 << 10,
			Slow: 0.4, SlowFor: testserver.Duration(2500 * time.Millisecond), Robots: r}
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
	ts, seeds := faultSites(t)
	cmds := fleet(t, ctx, 3, rs.Addr, seeds, "--workers", "6", "--lease", "1s", "--timeout", "8s", "--visibility", "12s")
	waitInFlight(t, ts, 4)
	return rs, ts, cmds
}

// waitInFlight waits until the sites have at least n requests in flight.
func waitInFlight(t *testing.T, ts *testserver.Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		total := 0
		for _, s := range ts.Stats().Sites {
			total += s.InFlight
		}
		if total >= n {
			return
		}
	}
	t.Fatalf("never %d requests in flight", n)
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
	requests := func() (n int64) {
		for _, s := range ts.Stats().Sites {
			n += s.Requests
		}
		return n
	}
	before, from := requests(), time.Now()
	for requests() == before && time.Since(from) < time.Minute {
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(from).Round(time.Millisecond)
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
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, cmd.Stderr)
		}
	}
	window, at := overCapWindow(ts)
	t.Logf("crawl done %s after the pause began at %d ms; longest window over a cap: %s (steps at %v ms)", time.Since(paused).Round(100*time.Millisecond), pausedMs, window, at)
	checkPolite(t, ts)
	checkAllFetched(t, ts)
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
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, cmd.Stderr)
		}
	}
	for i, s := range ts.Stats().Sites {
		t.Logf("site %d (%s): max at once %d (cap %d), starts over cap %d, min gap %.0f ms (delay %d ms)", i, s.Rules, s.MaxInFlight, s.Cap, s.OverCap, s.MinGapMs, s.CrawlDelayMs)
	}
	window, at := overCapWindow(ts)
	t.Logf("restarted at %d ms; longest window over a cap: %s (steps at %v ms)", restartedMs, window, at)
	if window > 0 {
		t.Errorf("a site was over its cap for %s after Redis restarted empty", window)
	}
	checkPolite(t, ts)
}
