package crawl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/keyname"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
)

// logBuf is a log sink that tests may read while crawlers write to it.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// crawlerOn is a crawler of crawl name under prefix, as one process of a
// fleet would build it, logging at debug level to log.
func crawlerOn(t *testing.T, prefix, name string, log *logBuf, o Options) *Crawler {
	t.Helper()
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	lim := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: time.Second})
	t.Cleanup(func() { lim.Close() })
	rob := NewRobotsCache(rdb, lim, 3, robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"}, nil)
	fr := frontier.New(rdb, &frontier.Options{Prefix: prefix, Crawl: name, Visibility: time.Minute})
	o.UserAgent, o.Timeout = "politebot/1.0", 20*time.Second
	if log != nil {
		o.Log = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return New(fr, lim, rob, o)
}

// waitFor polls cond every 10 ms until it holds or limit passes.
func waitFor(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// A worker started without seeds (`crawler run --forever`) follows the
// crawl's scope, which lives in Redis: it starts before anyone seeds the
// crawl, says it has no scope yet, and once another process seeds the
// crawl, and stops at once without fetching anything, it alone fetches
// every page reachable from the seeds. With the scope in each process's
// memory it fetched the seeds and dropped every link.
func TestSeedlessWorkerFollowsTheCrawlsScope(t *testing.T) {
	ts := serve(t, testserver.Profile{Name: "scope", Seed: 1, Sites: []testserver.SiteSpec{
		{Pages: 25, Links: 3, CrossLinks: 1}, {Pages: 25, Links: 3, CrossLinks: 1}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := redistest.Prefix(t)

	reads := scopeReads(t)
	var log logBuf
	seedless := crawlerOn(t, prefix, "scope", &log, Options{Workers: 2, Forever: true})
	stop, stopSeedless := context.WithCancel(ctx)
	defer stopSeedless()
	ran := make(chan error, 1)
	go func() { ran <- seedless.Run(stop) }()
	if !waitFor(10*time.Second, func() bool { return strings.Contains(log.String(), "no scope yet") }) {
		t.Fatalf("the seedless worker did not say the crawl has no scope yet; it logged:\n%s", log.String())
	}

	var seeds []string
	for _, s := range ts.Sites() {
		seeds = append(seeds, s.URL+"/")
	}
	seeder := crawlerOn(t, prefix, "scope", nil, Options{Workers: 1})
	if n, err := seeder.Seed(ctx, seeds); err != nil || n != len(seeds) {
		t.Fatalf("Seed: %d, %v", n, err)
	}
	// The seeder stops here: it never runs.

	expected := ts.Expected()
	complete := func() bool {
		for i := range expected {
			got := ts.FetchedOK(i)
			for p := range expected[i] {
				if !got[p] {
					return false
				}
			}
		}
		return true
	}
	// Once the frontier is drained, nothing more comes: the pages fetched
	// by then are all the seedless worker will ever fetch.
	drained := func() bool {
		st, err := seedless.fr.Stats(ctx)
		return err == nil && st.Done > 0 && st.Queued == 0 && st.InFlight == 0
	}
	waitFor(time.Minute, func() bool { return complete() || drained() })
	stopSeedless()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	fetched := 0
	for i := range expected {
		got := ts.FetchedOK(i)
		fetched += len(got)
		for p := range expected[i] {
			if !got[p] {
				t.Errorf("site %d: %s reachable but never fetched", i, p)
			}
		}
	}
	t.Logf("the seedless worker fetched %d pages of %d sites; it logged:\n%s", fetched, len(expected), log.String())
	if !strings.Contains(log.String(), "scope grew") {
		t.Error("the seedless worker did not log that the crawl's scope grew")
	}
	checkPoliteSites(t, ts)
	// The scope is read as each process starts or seeds, and when it
	// grows: a handful of reads, not one a page.
	n := scopeReads(t) - reads
	t.Logf("scope reads (SMEMBERS) during the test: %d", n)
	if n > 4 || n < 2 {
		t.Errorf("the scope was read %d times for %d pages; want 2 to 4", n, fetched)
	}
}

// scopeReads is how many SMEMBERS the test Redis has run.
func scopeReads(t *testing.T) int64 {
	t.Helper()
	rdb := srv.Client()
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_smembers:calls="); ok {
			var n int64
			fmt.Sscan(strings.SplitN(rest, ",", 2)[0], &n)
			return n
		}
	}
	return 0
}

// A crawl name or prefix that would break the crawl's keys or
// `crawler status` is refused by Seed and Run, with the frontier's error.
func TestInvalidCrawlNameIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct{ prefix, name string }{{"t:bad", "a\nb"}, {"t:bad", "{}"}, {"a{}", "ok"}} {
		c := crawlerOn(t, tc.prefix, tc.name, nil, Options{Workers: 1})
		if _, err := c.Seed(ctx, []string{"http://127.0.0.1:1/"}); !errors.Is(err, keyname.ErrInvalid) {
			t.Errorf("prefix %q, crawl %q: Seed = %v; want keyname.ErrInvalid", tc.prefix, tc.name, err)
		}
		if err := c.Run(ctx); !errors.Is(err, keyname.ErrInvalid) || !strings.Contains(err.Error(), "frontier: ") {
			t.Errorf("prefix %q, crawl %q: Run = %v; want the frontier's keyname.ErrInvalid", tc.prefix, tc.name, err)
		}
	}
}

// checkPoliteSites asserts at the server that no site saw more than its cap
// at once, a disallowed request, or a page twice.
func checkPoliteSites(t *testing.T, ts *testserver.Server) {
	t.Helper()
	for i, s := range ts.Stats().Sites {
		if s.MaxInFlight > s.Cap || s.DisallowedHits > 0 || s.DuplicateFetches > 0 {
			t.Errorf("site %d (%s): %+v", i, s.Rules, s)
		}
	}
}
