package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/luafn"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// roundTrips counts a client's trips to Redis: single commands and
// pipelines (one trip each), and the commands the pipelines carried; not
// those that set up a new connection (HELLO, CLIENT SETINFO).
type roundTrips struct {
	mu                     sync.Mutex
	single, pipes, inPipes int
	names                  []string
}

func (r *roundTrips) DialHook(n redis.DialHook) redis.DialHook { return n }

func (r *roundTrips) ProcessHook(n redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		if connSetup(c) {
			return n(ctx, c)
		}
		r.mu.Lock()
		r.single++
		r.names = append(r.names, c.Name())
		r.mu.Unlock()
		return n(ctx, c)
	}
}

func (r *roundTrips) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && connSetup(cmds[0]) {
			return n(ctx, cmds)
		}
		r.mu.Lock()
		r.pipes++
		r.inPipes += len(cmds)
		r.mu.Unlock()
		return n(ctx, cmds)
	}
}

func connSetup(c redis.Cmder) bool {
	switch c.Name() {
	case "hello", "client", "auth", "select":
		return true
	}
	return false
}

func (r *roundTrips) reset() {
	r.mu.Lock()
	r.single, r.pipes, r.inPipes, r.names = 0, 0, 0, nil
	r.mu.Unlock()
}

func (r *roundTrips) counts() (single, pipes, inPipes int, names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.single, r.pipes, r.inPipes, append([]string(nil), r.names...)
}

// waiter takes a permit of site from l in the background, in line, and
// releases it at once; the channel gets Acquire's or Release's error.
func waiter(ctx context.Context, l *Limiter, site string, limit int) <-chan error {
	got := make(chan error, 1)
	go func() {
		q, err := l.Acquire(ctx, site, limit)
		if err == nil {
			err = q.Release(ctx)
		}
		got <- err
	}()
	return got
}

// wantGranted fails the test unless waiter's permit is granted and
// released within 10 s.
func wantGranted(t *testing.T, got <-chan error) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was never granted")
	}
}

// wantGrantedWithin fails the test unless waiter's permit is granted and
// released within d (what names the waiter); past d it waits for the
// waiter to end (its poll) and says how long it took.
func wantGrantedWithin(t *testing.T, got <-chan error, d time.Duration, what string) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(d):
		err := <-got
		t.Fatalf("%s was granted after %s (%v); want it within %s", what, time.Since(start), err, d)
	}
}

// releaseOn releases p on a pipeline of rdb that also carries an unrelated
// command, as the crawl's settlement does, and returns after's result.
func releaseOn(t testing.TB, ctx context.Context, rdb redis.UniversalClient, ps ...*Permit) []error {
	t.Helper()
	pipe := rdb.Pipeline()
	var afters []func() error
	for _, p := range ps {
		afters = append(afters, p.ReleaseOn(ctx, pipe))
	}
	other := pipe.Incr(ctx, "t:releaseon:other")
	if _, err := pipe.Exec(ctx); err != nil && !luafn.Missing(err) {
		t.Fatalf("exec: %v", err)
	}
	if err := other.Err(); err != nil {
		t.Fatalf("the other command of the pipeline: %v", err)
	}
	var errs []error
	for _, after := range afters {
		errs = append(errs, after())
	}
	return errs
}

// A ReleaseOn is one pipelined round trip shared with other commands, and
// the waiter it lets in (in another process) gets the permit.
func TestReleaseOnOneRoundTrip(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rt := &roundTrips{}
		rdb := newClient(t)
		rdb.AddHook(rt)
		prefix := testPrefix(t)
		l := newLimiter(t, rdb, Options{Mode: mode, Prefix: prefix})
		other := newLimiter(t, newClient(t), Options{Mode: mode, Prefix: prefix})
		loadScripts(t, ctx, l) // (TestReleaseOnNoScript tests the path without it)
		p, err := l.Acquire(ctx, "rt.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		got := waiter(ctx, other, "rt.example", 1)
		waitFor(t, "waiter to queue", func() bool { _, o := members(t, rdb, l, "rt.example"); return len(o) == 2 })
		rt.reset()
		if errs := releaseOn(t, ctx, rdb, p); errs[0] != nil {
			t.Fatalf("after: %v", errs[0])
		}
		single, pipes, inPipes, names := rt.counts()
		if single != 0 || pipes != 1 || inPipes != 2 {
			t.Fatalf("release cost %d single commands %v and %d pipelines of %d commands, want one pipeline of 2", single, names, pipes, inPipes)
		}
		wantGranted(t, got)
		// Released: another ReleaseOn queues nothing, Release does nothing.
		pipe := rdb.Pipeline()
		if err := p.ReleaseOn(ctx, pipe)(); err != nil || pipe.Len() != 0 {
			t.Fatalf("second ReleaseOn: %v, %d commands queued", err, pipe.Len())
		}
		if err := p.Release(ctx); err != nil {
			t.Fatalf("Release after ReleaseOn: %v", err)
		}
		var nilPermit *Permit
		if err := nilPermit.ReleaseOn(ctx, pipe)(); err != nil || pipe.Len() != 0 {
			t.Fatalf("nil permit: %v, %d commands queued", err, pipe.Len())
		}
		wantNoEntries(t, rdb, l, "rt.example", "")
	})
}

// A waiter of the releaser's own process is woken by after itself, not by
// pub/sub (which this test cuts) nor by polling (which the options make
// slow).
func TestReleaseOnWakesLocalWaiter(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode, Lease: 30 * time.Second, Poll: 10 * time.Second, NoRestartGuard: true}) // the guard would hold a fresh server for 31 s
		p, err := l.Acquire(ctx, "local.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		got := waiter(ctx, l, "local.example", 1)
		waitFor(t, "waiter to queue", func() bool { _, o := members(t, rdb, l, "local.example"); return len(o) == 2 })
		time.Sleep(50 * time.Millisecond) // past the fresh subscription's early look
		var ps *redis.PubSub
		waitFor(t, "waiter to subscribe", func() bool {
			l.hub.mu.Lock() // the waiter's join sets ps under it
			defer l.hub.mu.Unlock()
			ps = l.hub.ps
			return ps != nil
		})
		if err := ps.Unsubscribe(ctx, l.hub.ch); err != nil {
			t.Fatal(err)
		}
		if errs := releaseOn(t, ctx, rdb, p); errs[0] != nil {
			t.Fatalf("after: %v", errs[0])
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("waiter: %v", err)
			}
		case <-time.After(3 * time.Second): // the poll is 10 s
			t.Fatal("the local waiter was not woken by the release")
		}
	})
}

// A ReleaseOn starts the site's crawl delay, as Release does.
func TestReleaseOnStartsCrawlDelay(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode})
		rule := Rule{Limit: 1, Delay: 5 * time.Second}
		p, err := l.AcquireRule(ctx, "delay.example", rule)
		if err != nil {
			t.Fatal(err)
		}
		if errs := releaseOn(t, ctx, rdb, p); errs[0] != nil {
			t.Fatalf("after: %v", errs[0])
		}
		_, err = l.TryAcquireRule(ctx, "delay.example", rule)
		var busy *BusyError
		if !errors.As(err, &busy) || busy.Full || busy.Wait < 4*time.Second {
			t.Fatalf("TryAcquire right after ReleaseOn: %v, want busy for the 5 s crawl delay", err)
		}
	})
}

// A permit whose entry is gone is reported lost by after, and Done closes.
func TestReleaseOnLostPermit(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode})
		p, err := l.Acquire(ctx, "lost.example", 2)
		if err != nil {
			t.Fatal(err)
		}
		k := keysFor(l.opts.prefix(), "lost.example")
		rdb.ZRem(ctx, k.holders, p.ID())
		rdb.ZRem(ctx, k.owners, p.ID())
		if errs := releaseOn(t, ctx, rdb, p); !errors.Is(errs[0], ErrPermitLost) {
			t.Fatalf("after: %v, want ErrPermitLost", errs[0])
		}
		select {
		case <-p.Done():
		default:
			t.Fatal("Done not closed")
		}
	})
}

// When the node has forgotten the scripts (FUNCTION FLUSH, or a restart),
// the pipelined FCALL finds no function and after loads the library again
// and runs the release alone; the other commands of the pipeline are
// unaffected.
func TestReleaseOnNoScript(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rt := &roundTrips{}
		rdb := newClient(t)
		rdb.AddHook(rt)
		l := newLimiter(t, rdb, Options{Mode: mode})
		p, err := l.Acquire(ctx, "noscript.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		forgetScripts(t, ctx, rdb)
		rt.reset()
		if errs := releaseOn(t, ctx, rdb, p); errs[0] != nil {
			t.Fatalf("after: %v", errs[0])
		}
		if _, pipes, _, names := rt.counts(); pipes != 1 || !slices.Contains(names, "function") || !slices.Contains(names, "fcall") {
			t.Fatalf("%d pipelines and single commands %v: want the pipeline, then the library loaded and the release alone", pipes, names)
		}
		wantNoEntries(t, rdb, l, "noscript.example", "")
	})
}

// On Redis Cluster one pipeline releases permits of sites on every master
// (go-redis sends each EVALSHA to its site's node), and each site's waiter
// gets its permit.
func TestReleaseOnCluster(t *testing.T) {
	rc, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := ctxT(t)
	cc := rc.Client()
	defer cc.Close()
	rt := &roundTrips{}
	cc.AddHook(rt)
	var sites []string
	nodes := map[string]bool{}
	for i := 0; len(sites) < 3 && i < 1000; i++ {
		site := fmt.Sprintf("site%d.example", i)
		node, err := cc.MasterForKey(ctx, "{"+site+"}")
		if err != nil {
			t.Fatal(err)
		}
		if !nodes[node.Options().Addr] {
			nodes[node.Options().Addr] = true
			sites = append(sites, site)
		}
	}
	if len(sites) != 3 {
		t.Fatalf("sites on %d nodes, want 3", len(sites))
	}
	for _, mode := range []Mode{ModeLocked, ModeAtomic} {
		l := New(cc, &Options{Mode: mode, NoRestartGuard: true, Prefix: "t:releaseon:" + mode.String()})
		defer l.Close()
		var held []*Permit
		got := make(chan error, len(sites))
		for _, site := range sites {
			p, err := l.Acquire(ctx, site, 1)
			if err != nil {
				t.Fatalf("%s %s: %v", mode, site, err)
			}
			held = append(held, p)
			go func() {
				q, err := l.Acquire(ctx, site, 1)
				if err == nil {
					err = q.Release(ctx)
				}
				got <- err
			}()
			waitFor(t, "waiter to queue", func() bool { _, o := members(t, cc, l, site); return len(o) == 2 })
		}
		rt.reset()
		for i, err := range releaseOn(t, ctx, cc, held...) {
			if err != nil {
				t.Fatalf("%s %s: after: %v", mode, sites[i], err)
			}
		}
		if single, pipes, _, names := rt.counts(); pipes != 1 {
			t.Fatalf("%s: %d pipelines, single commands %v (%d), want one pipeline", mode, pipes, names, single)
		}
		for range sites {
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("%s waiter: %v", mode, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: a waiter was never granted", mode)
			}
		}
	}
}
