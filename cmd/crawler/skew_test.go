package main

import (
	"context"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/testserver"
)

// skewSites are 4 sites where half the pages stream for 1.5 s (longer than
// the 1 s lease) and the one-slot sites also answer some pages with 503 or
// 429 and a Retry-After, as an HTTP date or in seconds.
func skewSites(t *testing.T) (*testserver.Server, []string) {
	t.Helper()
	spec := func(r testserver.Robots, retry float64) testserver.SiteSpec {
		r.Disallow = []string{"/private/"}
		return testserver.SiteSpec{Pages: 12, Links: 4, Latency: testserver.Duration(20 * time.Millisecond), PageBytes: 2 << 10,
			Slow: 0.5, SlowFor: testserver.Duration(1500 * time.Millisecond), Retry: retry, Robots: r}
	}
	return serveSites(t, testserver.Profile{Name: "skew", Seed: 5, Sites: []testserver.SiteSpec{
		spec(testserver.Robots{}, 0), spec(testserver.Robots{Concurrency: 2}, 0),
		spec(testserver.Robots{Concurrency: 1}, 0.2), spec(testserver.Robots{CrawlDelay: testserver.Duration(200 * time.Millisecond)}, 0.2),
	}})
}

// Worker processes whose clocks are an hour fast and an hour slow share a
// crawl with one whose clock is right (a binary built with the skewtest tag
// honours CRAWLER_TEST_CLOCK_SKEW). Caps, crawl delays and Retry-After hold
// as with true clocks, and when the fast worker is killed (SIGKILL) while it
// fills a site with long downloads, the site's slots come back within one
// lease, by Redis's clock: the others fetch from it again, then fetch the
// killed worker's URLs, and the crawl completes.
func TestSkewedClocksAndAKilledWorker(t *testing.T) {
	const lease = time.Second
	bin := buildTagged(t, "skewtest")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ts, seeds := skewSites(t)
	args := []string{"--lease", lease.String(), "--timeout", "4s", "--visibility", "6s"}
	skew := func(d string) []string { return []string{"CRAWLER_TEST_CLOCK_SKEW=" + d} }

	fast := worker(t, ctx, bin, skew("1h"), rs.Addr, seeds, append(args, "--workers", "7")...)
	rdb := rs.Client()
	defer rdb.Close()
	fr := frontier.New(rdb, &frontier.Options{Crawl: t.Name()})
	site, host := waitFull(t, ctx, ts, fr, 300*time.Millisecond)
	slow := worker(t, ctx, bin, skew("-1h"), rs.Addr, seeds, append(args, "--workers", "4")...)
	right := worker(t, ctx, bin, nil, rs.Addr, seeds, append(args, "--workers", "4")...)
	time.Sleep(500 * time.Millisecond) // the others start and find the site full

	st := ts.Stats().Sites[site]
	if st.InFlight < st.Cap {
		t.Fatalf("site %d (%s) no longer full when the fast worker was to be killed: %d in flight", site, host, st.InFlight)
	}
	before := st.Requests
	if err := fast.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	fast.Wait()
	for ts.Stats().Sites[site].Requests == before && time.Since(killed) < time.Minute {
		time.Sleep(5 * time.Millisecond)
	}
	back := time.Since(killed)
	t.Logf("killed the worker an hour fast while it filled site %d (%s, cap %d): the next request came %s later (lease %s)",
		site, st.Rules, st.Cap, back.Round(time.Millisecond), lease)
	// The slot is free in Redis within one lease; a waiting worker hears of
	// it at once, one busy elsewhere within fullSiteRecheck (250 ms). Here
	// 1.2-1.3 s; 1.75 s once in CI, with other packages' tests on both
	// cores. A clock taken from the killed worker (an hour fast) would keep
	// the slots an hour (or free them at once: over cap, which checkPolite
	// counts); its items' visibility (6 s) would free them later.
	if back > lease+time.Second {
		t.Errorf("the killed worker's slots came back after %s; want within the lease (%s) and the others' reaction", back, lease)
	}

	for name, cmd := range map[string]interface{ Wait() error }{"an hour slow": slow, "right": right} {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %s: %v", name, err)
		}
	}
	for name, out := range map[string]string{"fast": fast.Stderr.(*strings.Builder).String(), "slow": slow.Stderr.(*strings.Builder).String()} {
		if !strings.Contains(out, "clock is shifted") {
			t.Fatalf("the %s worker does not say its clock is shifted: the test proves nothing\n%s", name, out)
		}
	}
	var told int64
	for _, s := range ts.Stats().Sites {
		told += s.Status["503"] + s.Status["429"]
	}
	if told == 0 {
		t.Fatal("no site answered 503 or 429: Retry-After went untested")
	}
	checkPolite(t, ts)
	checkAllFetched(t, ts)
	checkRefetchedAtMost(t, ts, 7) // the killed worker's
}

// waitFull waits until a site has all its slots taken by requests that all
// started at least age ago, with URLs still queued for it, and returns its
// index and host.
func waitFull(t *testing.T, ctx context.Context, ts *testserver.Server, fr *frontier.Frontier, age time.Duration) (int, string) {
	t.Helper()
	since := map[int]time.Time{}
	last := map[int]int64{}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		queues, err := fr.Sites(ctx)
		if err != nil {
			t.Fatal(err)
		}
		queued := map[string]bool{}
		for _, q := range queues {
			queued[q.Site] = q.Queued > 0
		}
		for i, s := range ts.Stats().Sites {
			if r, ok := last[i]; !ok || r != s.Requests {
				last[i], since[i] = s.Requests, time.Now()
			}
			u, _ := url.Parse(s.URL)
			if s.InFlight >= s.Cap && time.Since(since[i]) >= age && queued[u.Host] {
				return i, u.Host
			}
		}
	}
	t.Fatal("no site was ever full of long downloads with URLs still queued")
	return 0, ""
}
