package frontier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

var (
	srv    *redistest.Server
	crawls atomic.Int64
)

func TestMain(m *testing.M) {
	redistest.Main(m, &srv, func(s *redistest.Server) error {
		return os.Setenv("REDIS_ADDR", s.Addr) // for the examples
	})
}

// On redis-server the shard scripts run as Redis Functions: the library
// loads (a prelude that read a global at its top level would not, and the
// scripts would run as scripts with every other test still passing).
func TestRunsAsFunctions(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	if !f.fn.Functions(ctx) {
		t.Fatal("the frontier's scripts do not run as functions on redis-server")
	}
	if n, err := f.Add(ctx, 0, "http://fn.example/"); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	if libs, err := f.rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lib.Name()}).Result(); err != nil || len(libs) != 1 || len(libs[0].Functions) != 7 {
		t.Fatalf("FUNCTION LIST: %v %v; want the library's 7 functions", libs, err)
	}
}

// forgetScripts makes c's server forget the frontier's library and
// scripts, as a restart without persistence does.
func forgetScripts(ctx context.Context, c redis.Cmdable) error {
	if err := c.FunctionFlush(ctx).Err(); err != nil {
		return err
	}
	return c.ScriptFlush(ctx).Err()
}

func newFrontier(t testing.TB, o Options) *Frontier {
	t.Helper()
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	o.Crawl = fmt.Sprintf("%s.%d", strings.ReplaceAll(t.Name(), "/", "."), crawls.Add(1)) // fresh per run (-count N)
	return New(rdb, &o)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// drain takes and settles everything, returning URLs in the order handed out.
func drain(t *testing.T, ctx context.Context, f *Frontier) []string {
	t.Helper()
	var got []string
	for {
		it, err := nextSoon(ctx, f, time.Second)
		if errors.Is(err, ErrDone) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, it.URL)
		if err := f.Done(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
}

// nextSoon is Next, waiting out EmptyError hints no longer than limit (a
// site just served is ready again a millisecond later).
func nextSoon(ctx context.Context, f *Frontier, limit time.Duration) (Item, error) {
	for {
		it, err := f.Next(ctx)
		var empty *EmptyError
		if errors.As(err, &empty) && empty.Wait <= limit {
			time.Sleep(empty.Wait)
			continue
		}
		return it, err
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"HTTP://Example.COM":               "http://example.com/",
		"http://example.com:80/a/./b/../c": "http://example.com/a/c",
		"https://example.com:443/x#frag":   "https://example.com/x",
		"http://example.com:8080/x?":       "http://example.com:8080/x",
		"http://example.com/a%2Fb?q=1":     "http://example.com/a%2Fb?q=1",
		"http://127.0.0.2:3000/p/1":        "http://127.0.0.2:3000/p/1",
	} {
		got, _, err := Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"javascript:alert(1)", "mailto:a@b.c", "file:///etc/passwd", "ftp://x/", "/relative", "http://", "http://user:pw@x/", "http://%zz/"} {
		if _, _, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) accepted", bad)
		}
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"http://a.example/x/../y?q#f", "HTTPS://B:443", "javascript:x", "http://[::1]:80/%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		norm, site, err := Normalize(raw)
		if err != nil {
			return
		}
		again, site2, err := Normalize(norm)
		if err != nil || again != norm || site2 != site {
			t.Fatalf("not idempotent: %q -> %q (%s) -> %q (%s) %v", raw, norm, site, again, site2, err)
		}
		if !strings.HasPrefix(norm, "http://") && !strings.HasPrefix(norm, "https://") {
			t.Fatalf("%q normalised to %q", raw, norm)
		}
	})
}

func TestAddDedupAndLimits(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxDepth: 2, MaxPages: 4})
	n, err := f.Add(ctx, 0, "http://a.example/", "HTTP://A.example:80/#top", "mailto:x@y", "http://a.example/1")
	if err != nil || n != 2 {
		t.Fatalf("added %d, %v; want 2 (one duplicate, one mailto)", n, err)
	}
	if n, _ := f.Add(ctx, 3, "http://a.example/deep"); n != 0 {
		t.Fatal("a link deeper than MaxDepth was admitted")
	}
	n, _ = f.Add(ctx, 1, "http://b.example/1", "http://b.example/2", "http://b.example/3")
	if n != 2 {
		t.Fatalf("admitted %d past the page limit of 4", 2+n)
	}
	st, _ := f.Stats(ctx)
	if st.Queued != 4 || st.Admitted != 4 {
		t.Fatalf("stats %+v", st)
	}
	if got := drain(t, ctx, f); len(got) != 4 {
		t.Fatalf("handed out %v", got)
	}
	st, _ = f.Stats(ctx)
	if st.Queued != 0 || st.InFlight != 0 || st.Done != 4 {
		t.Fatalf("stats after the crawl %+v", st)
	}
}

func TestRoundRobinAcrossSites(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 1}) // strict turns hold within a shard
	f.Add(ctx, 0, "http://a.example/1", "http://a.example/2", "http://a.example/3")
	f.Add(ctx, 0, "http://b.example/1", "http://b.example/2")
	got := drain(t, ctx, f)
	sites := ""
	for _, u := range got {
		sites += u[7:8]
	}
	if sites != "ababa" {
		t.Fatalf("order %v (sites %s), want sites taking turns", got, sites)
	}
}

// A deferred site stays out for its delay while the other sites go on; the
// crawl is not over while it waits.
func TestDeferDoesNotBlockOtherSites(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 1})
	f.Add(ctx, 0, "http://full.example/1", "http://full.example/2", "http://free.example/1", "http://free.example/2")
	it, _ := f.Next(ctx)
	if it.Site != "full.example" {
		it2, _ := f.Next(ctx)
		f.Release(ctx, it)
		it = it2
	}
	if err := f.Defer(ctx, it, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		got, err := nextSoon(ctx, f, 50*time.Millisecond)
		if err != nil || got.Site != "free.example" {
			t.Fatalf("while full.example waits: %+v %v", got, err)
		}
		f.Done(ctx, got)
	}
	_, err := nextSoon(ctx, f, 50*time.Millisecond)
	var empty *EmptyError
	if !errors.As(err, &empty) || empty.Queued != 2 || empty.Wait <= 0 || empty.Wait > 300*time.Millisecond {
		t.Fatalf("only a deferred site left: %v", err)
	}
	time.Sleep(empty.Wait + 10*time.Millisecond)
	got, err := f.Next(ctx)
	if err != nil || got.URL != it.URL {
		t.Fatalf("after the delay, the deferred URL comes first: %+v %v", got, err)
	}
}

// A fetch that ends gives its site's slot back: a site deferred as full is
// ready again at once, not when its deferral runs out. Neither a failure
// given up by Retry nor another site's Done brings it forward.
func TestDoneBringsDeferredSiteBack(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxAttempts: 1})
	f.Add(ctx, 0, "http://full.example/1", "http://full.example/2", "http://full.example/3", "http://other.example/1")
	var full []Item
	for len(full) < 3 {
		it, err := nextSoon(ctx, f, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		full = append(full, it)
		if it.Site != "full.example" {
			full = full[:len(full)-1]
			defer f.Done(ctx, it)
		}
	}
	failing, fetching, turnedAway := full[0], full[1], full[2]
	if err := f.Defer(ctx, turnedAway, 10*time.Second); err != nil { // full: come back in 10 s
		t.Fatal(err)
	}
	stillDeferred := func(after string) {
		t.Helper()
		if got, err := f.Next(ctx); !errors.As(err, new(*EmptyError)) {
			t.Fatalf("after %s the deferred site was handed out: %+v %v", after, got, err)
		}
	}
	stillDeferred("Defer")
	f.Add(ctx, 0, "http://other.example/2")
	other, err := nextSoon(ctx, f, time.Second)
	if err != nil || other.Site != "other.example" {
		t.Fatalf("other site: %+v %v", other, err)
	}
	f.Done(ctx, other)
	stillDeferred("another site's Done")
	if again, err := f.Retry(ctx, failing, time.Second); again || err != nil { // MaxAttempts 1: given up
		t.Fatalf("Retry: %v %v", again, err)
	}
	stillDeferred("a failure given up")
	if err := f.Done(ctx, fetching); err != nil {
		t.Fatal(err)
	}
	got, err := nextSoon(ctx, f, 50*time.Millisecond) // its turn, not its 10 s deferral
	if err != nil || got.URL != turnedAway.URL {
		t.Fatalf("after a fetch of its site ended, want %s at once: %+v %v", turnedAway.URL, got, err)
	}
}

// A worker that dies holding an item loses it to another after the
// visibility timeout; nothing is lost.
func TestVisibilityTimeout(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Visibility: 200 * time.Millisecond})
	f.Add(ctx, 0, "http://v.example/1")
	dead, _ := f.Next(ctx)
	_, err := f.Next(ctx)
	var empty *EmptyError
	if !errors.As(err, &empty) || empty.InFlight != 1 {
		t.Fatalf("while held: %v", err)
	}
	time.Sleep(empty.Wait + 20*time.Millisecond)
	again, err := f.Next(ctx)
	if err != nil || again.URL != dead.URL || again.ID == dead.ID {
		t.Fatalf("not handed out again: %+v %v", again, err)
	}
	if r := f.Settle(ctx, Settlement{Item: dead, Outcome: Fetched}); !errors.Is(r.Settled, ErrLost) || !r.Unsettled {
		t.Fatalf("the dead worker's late settlement: %v, unsettled %v; want ErrLost, unsettled", r.Settled, r.Unsettled)
	}
	if r := f.Settle(ctx, Settlement{Item: again, Outcome: Fetched}); r.Settled != nil || r.Unsettled {
		t.Fatalf("settling the item held: %v, unsettled %v", r.Settled, r.Unsettled)
	}
	if _, err := f.Next(ctx); !errors.Is(err, ErrDone) {
		t.Fatalf("%v", err)
	}
}

func TestRetryIsBounded(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxAttempts: 3})
	f.Add(ctx, 0, "http://r.example/flaky")
	tries := 0
	for {
		it, err := f.Next(ctx)
		if errors.Is(err, ErrDone) {
			break
		}
		var empty *EmptyError
		if errors.As(err, &empty) {
			time.Sleep(empty.Wait)
			continue
		}
		tries++
		if again, err := f.Retry(ctx, it, 10*time.Millisecond); err != nil || again != (tries < 3) {
			t.Fatalf("try %d: again=%v %v", tries, again, err)
		}
	}
	st, _ := f.Stats(ctx)
	if tries != 3 || st.Failed != 1 || st.Done != 0 {
		t.Fatalf("%d tries, stats %+v", tries, st)
	}
}

// 8 workers, 400 URLs over 10 sites: each URL handed out exactly once.
func TestConcurrentWorkersExactlyOnce(t *testing.T) {
	exactlyOnce(t, newFrontier(t, Options{}))
}

// exactlyOnce has 8 workers take 400 URLs over 10 sites from f and checks
// that each was handed out exactly once.
func exactlyOnce(t *testing.T, f *Frontier) {
	t.Helper()
	ctx := ctxT(t)
	var urls []string
	for i := 0; i < 400; i++ {
		urls = append(urls, fmt.Sprintf("http://s%d.example/%d", i%10, i))
	}
	f.Add(ctx, 0, urls...)
	f.Add(ctx, 0, urls...) // seeds given twice, as by several processes
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				it, err := f.Next(ctx)
				if errors.Is(err, ErrDone) {
					return
				}
				var empty *EmptyError
				if errors.As(err, &empty) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[it.URL]++
				mu.Unlock()
				f.Done(ctx, it)
			}
		}()
	}
	wg.Wait()
	if len(seen) != 400 {
		t.Fatalf("%d distinct URLs handed out, want 400", len(seen))
	}
	for u, n := range seen {
		if n != 1 {
			t.Fatalf("%s handed out %d times", u, n)
		}
	}
}

// The demo runs on miniredis: the scripts must work there too.
func TestOnMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := ctxT(t)
	f := New(rdb, &Options{Crawl: "mini"})
	f.Add(ctx, 0, "http://a.example/1", "http://b.example/1", "http://a.example/2")
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Defer(ctx, it, 0); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, ctx, f); len(got) != 3 {
		t.Fatalf("on miniredis: %v", got)
	}
}

// On a Redis whose ACL denies FUNCTION the shard scripts run as plain
// scripts (EVALSHA, luafn): there a script may not replace a global (Redis
// 7 makes them read-only), so the key names begin makes live in a local
// (common.lua K). Eight workers still take 400 URLs exactly once.
func TestScriptsWithoutFunctionsOnRedis(t *testing.T) {
	ctx := ctxT(t)
	own, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	rdb, err := own.ClientAs(ctx, "nofn", "-function")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	f := New(rdb, &Options{Crawl: "nofn"})
	if f.fn.Functions(ctx) {
		t.Fatal("the library runs as Functions for a user denied FUNCTION")
	}
	exactlyOnce(t, f)
}

// DoneNext is Add, Done and Next in one round trip, each run once, also
// when Redis has lost the scripts (restart, FUNCTION FLUSH).
func TestDoneNext(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("flushed=%v", flush), func(t *testing.T) {
			ctx := ctxT(t)
			f := newFrontier(t, Options{})
			f.Add(ctx, 0, "http://a.example/1", "http://a.example/2")
			it, err := f.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if flush {
				if err := forgetScripts(ctx, f.rdb); err != nil {
					t.Fatal(err)
				}
			}
			next, settled, err := f.DoneNext(ctx, it, []string{"http://a.example/3", "http://a.example/1", "mailto:x@a.example"})
			if err != nil && !errors.As(err, new(*EmptyError)) || settled != nil {
				t.Fatalf("DoneNext: next %+v, settled %v, err %v", next, settled, err)
			}
			if err != nil { // the same millisecond as the last Next: the site's turn is 1 ms away
				next, err = nextSoon(ctx, f, 50*time.Millisecond)
			}
			if err != nil || next.URL != "http://a.example/2" {
				t.Fatalf("next: %+v %v", next, err)
			}
			st, _ := f.Stats(ctx)
			if st.Done != 1 || st.Admitted != 3 || st.Queued != 1 || st.InFlight != 1 {
				t.Fatalf("stats %+v: want 1 done, 3 admitted (one link new), 1 queued, 1 in flight", st)
			}
			_, settled, err = f.DoneNext(ctx, it, nil) // settled already
			if !errors.Is(settled, ErrLost) {
				t.Fatalf("settling an item twice: %v", settled)
			}
			if err != nil && !errors.As(err, new(*EmptyError)) {
				t.Fatalf("next after a lost item: %v", err)
			}
		})
	}
}

// Hold keeps a full site out of Next until one of its fetches ends; it never
// adds a site with nothing queued, nor brings one forward.
func TestHold(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	f.Add(ctx, 0, "http://full.example/1", "http://full.example/2", "http://full.example/3")
	holding, _ := f.Next(ctx)
	if err := f.Hold(ctx, "full.example", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, err := nextSoon(ctx, f, 50*time.Millisecond); !errors.As(err, new(*EmptyError)) {
		t.Fatalf("a held site was handed out: %+v %v", got, err)
	}
	if err := f.Hold(ctx, "full.example", time.Millisecond); err != nil { // never shorter
		t.Fatal(err)
	}
	if got, err := nextSoon(ctx, f, 50*time.Millisecond); !errors.As(err, new(*EmptyError)) {
		t.Fatalf("a shorter Hold brought the site forward: %+v %v", got, err)
	}
	if err := f.Hold(ctx, "idle.example", time.Second); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.rdb.ZScore(ctx, shardOf(t, f, "idle.example").keys[0], "idle.example").Result(); n != 0 {
		t.Fatal("Hold added a site with nothing queued")
	}
	f.Done(ctx, holding)
	if got, err := nextSoon(ctx, f, 50*time.Millisecond); err != nil || got.Site != "full.example" {
		t.Fatalf("after a fetch ended: %+v %v", got, err)
	}
}

// shardOf is site's shard in f's crawl.
func shardOf(t testing.TB, f *Frontier, site string) *shard {
	t.Helper()
	lay, err := f.layout(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return lay.of(site)
}
