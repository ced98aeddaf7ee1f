package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/polite-crawler/polite/internal/sitetest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/testserver"
)

// fleet starts n `crawler run` processes on one crawl.
func fleet(t *testing.T, ctx context.Context, n int, redisAddr string, seeds []string, extra ...string) []*exec.Cmd {
	t.Helper()
	var cmds []*exec.Cmd
	for i := 0; i < n; i++ {
		cmds = append(cmds, worker(t, ctx, build(t), nil, redisAddr, seeds, extra...))
	}
	return cmds
}

// worker starts one `crawler run` process of bin, with env added to the
// environment, on the test's crawl. Its stderr is kept in cmd.Stderr (a
// *strings.Builder: read it only after Wait).
func worker(t *testing.T, ctx context.Context, bin string, env []string, redisAddr string, seeds []string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"run", "--redis", "redis://" + redisAddr, "--crawl", t.Name(), "--progress", "1h",
		"--out", filepath.Join(t.TempDir(), "out.jsonl")}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, seeds...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = &strings.Builder{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A failed test shows what each worker that has ended logged.
		if t.Failed() && cmd.ProcessState != nil {
			log := cmd.Stderr.(*strings.Builder).String()
			t.Logf("worker %d (%v) logged, last 8 KiB:\n%s", cmd.Process.Pid, cmd.ProcessState, log[max(len(log)-8<<10, 0):])
		}
	})
	return cmd
}

func startSites(t *testing.T, preset string, n int) (*testserver.Server, []string) {
	t.Helper()
	p, err := testserver.Preset(preset, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	return serveSites(t, p)
}

// serveSites serves p's sites until the test ends, and returns their seeds.
func serveSites(t *testing.T, p testserver.Profile) (*testserver.Server, []string) {
	t.Helper()
	ts := sitetest.Start(t, p)
	var seeds []string
	for _, s := range ts.Sites() {
		seeds = append(seeds, s.URL+"/")
	}
	return ts, seeds
}

// checkPolite asserts at the server that no site saw more than its cap at
// once, a disallowed request, or a gap under its crawl delay.
func checkPolite(t *testing.T, ts *testserver.Server) {
	t.Helper()
	for i, s := range ts.Stats().Sites {
		if s.MaxInFlight > s.Cap || s.OverCap > 0 {
			t.Errorf("site %d (%s): %d at once, %d starts over cap %d:\n%s", i, s.Rules, s.MaxInFlight, s.OverCap, s.Cap, strings.Join(s.OverCapSamples, "\n"))
		}
		if s.DisallowedHits > 0 {
			t.Errorf("site %d (%s): %d disallowed requests", i, s.Rules, s.DisallowedHits)
		}
		// With one slot, the request that was told to wait holds the only
		// permit until the whole fleet has been told (fetch.Transport).
		if s.Cap == 1 && s.EarlyAfterRetry > 0 {
			t.Errorf("site %d (%s): %d requests before its Retry-After ran out", i, s.Rules, s.EarlyAfterRetry)
		}
		if s.CrawlDelayMs > 0 && s.MinGapMs >= 0 && s.MinGapMs < float64(s.CrawlDelayMs) {
			t.Errorf("site %d (%s): gap %.1f ms under its delay %d ms", i, s.Rules, s.MinGapMs, s.CrawlDelayMs)
		}
	}
}

// waitAll waits for every process to exit, and fails the test at the
// first that did not exit 0.
func waitAll(t *testing.T, cmds []*exec.Cmd) {
	t.Helper()
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, cmd.Stderr)
		}
	}
}

// checkFetchedOnce asserts at the server that each site's robots.txt was
// fetched once for the whole fleet, no page twice, and every streamed page
// to its end (a permit refreshed for as long as the download lasts).
func checkFetchedOnce(t *testing.T, ts *testserver.Server) {
	t.Helper()
	for i, s := range ts.Stats().Sites {
		if s.CutShort != 0 {
			t.Errorf("site %d (%s): %d downloads cut short", i, s.Rules, s.CutShort)
		}
		if s.RobotsFetches != 1 {
			t.Errorf("site %d: robots.txt fetched %d times by the fleet", i, s.RobotsFetches)
		}
		if s.DuplicateFetches != 0 {
			t.Errorf("site %d: %d pages fetched twice", i, s.DuplicateFetches)
		}
	}
}

// checkRefetchedAtMost asserts at the server that at most n pages were
// fetched again after a fault: at-least-once delivery refetches only what
// was in the hands of the workers the fault hit (n of them), no more.
func checkRefetchedAtMost(t *testing.T, ts *testserver.Server, n int64) {
	t.Helper()
	var dups int64
	for _, s := range ts.Stats().Sites {
		dups += s.DuplicateFetches
	}
	t.Logf("pages fetched twice: %d (at most %d: the URLs in hand of the workers hit)", dups, n)
	if dups > n {
		t.Errorf("%d pages fetched twice; at-least-once allows at most %d", dups, n)
	}
}

// checkAllFetched asserts that each site's expected pages, and only those,
// were answered 200.
func checkAllFetched(t *testing.T, ts *testserver.Server) {
	t.Helper()
	for i, want := range ts.Expected() {
		got := ts.FetchedOK(i)
		delete(got, "/robots.txt")
		delete(got, "/sitemap.xml") // read with the seeds (--sitemaps), not a page
		for p := range want {
			if !got[p] {
				t.Errorf("site %d: %s never fetched", i, p)
			}
		}
		for p := range got {
			if !want[p] && !strings.HasPrefix(p, "/robots-hop/") {
				t.Errorf("site %d: %s fetched but not reachable", i, p)
			}
		}
	}
}

// 4 processes x 8 workers on the mixed profile, with a lease shorter than
// its slow pages.
func TestFleetCrawlEndToEnd(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ts, seeds := startSites(t, "mixed", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmds := fleet(t, ctx, 4, rs.Addr, seeds, "--workers", "8", "--lease", "1s", "--timeout", "20s", "--visibility", "40s")
	waitAll(t, cmds)
	checkPolite(t, ts)
	checkAllFetched(t, ts)
	checkFetchedOnce(t, ts)
	// A site closed by its robots.txt (5xx) is named once in the fleet's
	// logs, and no other site is.
	var logs strings.Builder
	for _, cmd := range cmds {
		logs.WriteString(cmd.Stderr.(*strings.Builder).String())
	}
	closed := 0
	for _, site := range ts.Sites() {
		n := strings.Count(logs.String(), `"msg":"robots.txt unreachable: the site is closed until it is fetched again","site":"`+site.Host+`"`)
		if site.ClosedSite {
			closed++
		}
		if want := map[bool]int{true: 1, false: 0}[site.ClosedSite]; n != want {
			t.Errorf("site %s (closed %v) named %d times as unreachable in the logs, want %d", site.Host, site.ClosedSite, n, want)
		}
	}
	if closed == 0 {
		t.Error("the mixed profile has no site whose robots.txt closes it")
	}
	// Every fetch is in some process's JSON lines, and the work was shared.
	lines, workers := 0, map[string]int{}
	for _, cmd := range cmds {
		out := cmd.Args[slicesIndex(cmd.Args, "--out")+1]
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r struct {
				URL       string    `json:"url"`
				Status    int       `json:"status"`
				FetchedAt time.Time `json:"fetched_at"`
				Worker    string    `json:"worker"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.URL == "" || r.Worker == "" || r.FetchedAt.IsZero() {
				t.Fatalf("bad result line %q: %v", sc.Text(), err)
			}
			lines++
			workers[r.Worker]++
		}
		f.Close()
	}
	if len(workers) != 4 || lines == 0 {
		t.Errorf("results from %d processes (%d lines): %v", len(workers), lines, workers)
	}
	t.Logf("%d results; per process %v", lines, workers)

	out, err := exec.Command(build(t), "status", "--redis", "redis://"+rs.Addr, "--crawl", t.Name()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0 queued, 0 in flight") {
		t.Errorf("crawler status after the crawl: %v\n%s", err, out)
	}
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// A worker killed mid-crawl loses no URL (others fetch its URLs after the
// visibility timeout); one interrupted lets its downloads under way finish
// (--stop-grace), settles them, gives the rest of its URLs back and exits
// 0; the crawl completes and every site stays within its cap. Only the
// killed worker's URLs are fetched twice.
func TestKilledAndInterruptedWorkers(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ts, seeds := startSites(t, "uniform", 8)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmds := fleet(t, ctx, 3, rs.Addr, seeds, "--workers", "8", "--lease", "1s", "--timeout", "2s", "--visibility", "3s")
	waitRequests := func(n int64) {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, total := totals(ts); total >= n {
				return
			}
		}
		t.Fatalf("the crawl never reached %d requests", n)
	}
	waitRequests(40)
	cmds[0].Process.Signal(syscall.SIGKILL)
	waitRequests(80)
	// It stops by itself: one still running when ctx ends is killed, and
	// a killed process does not exit with the interrupted code.
	cmds[1].Process.Signal(syscall.SIGINT)
	interrupted(t, cmds[1].Wait(), "interrupted worker", cmds[1].Stderr.(fmt.Stringer))
	if err := cmds[2].Wait(); err != nil {
		t.Fatalf("surviving worker: %v\n%s", err, cmds[2].Stderr)
	}
	cmds[0].Wait()
	checkPolite(t, ts)
	checkAllFetched(t, ts)
	checkRefetchedAtMost(t, ts, 8) // the killed worker's 8
}

func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	out, err := exec.CommandContext(ctx, build(t), "demo", "--sites", "6", "--procs", "2", "--workers", "3", "--warc", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz")); len(files) == 0 {
		t.Errorf("the demo wrote no WARC file in %s", dir)
	}
	for _, want := range []string{"embedded Redis", "max at once", "Every site saw at most its cap", "WARC: ", dir} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(string(out), " ok\n"); n != 6 {
		t.Errorf("%d sites ok in the demo's table, want 6:\n%s", n, out)
	}
}
