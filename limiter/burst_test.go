package limiter

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A burst of callers on a busy site costs Redis a bounded number of
// commands per caller before each has its place in line, in both modes, and
// then every caller gets its permit. A ModeLocked that spun on the site
// lock would cost hundreds of commands a caller here.
func TestBurstBoundedWork(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		const procs, perProc, maxPerCaller = 2, 150, 20
		ctx := ctxT(t)
		prefix := testPrefix(t)
		var lims []*Limiter
		for i := 0; i < procs; i++ { // one Limiter and client per "process"
			lims = append(lims, newLimiter(t, newClient(t), Options{Mode: mode, Prefix: prefix}))
		}
		rdb := newClient(t)
		held, err := lims[0].TryAcquire(ctx, "burst.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		k := keysFor(prefix, "burst.example")
		before := commandCalls(t, rdb)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, procs*perProc)
		for _, l := range lims {
			for i := 0; i < perProc; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p, err := l.Acquire(ctx, "burst.example", 1)
					if err == nil {
						err = p.Release(ctx)
					}
					errs <- err
				}()
			}
		}
		polls := 0
		for {
			n, err := rdb.ZCard(ctx, k.owners).Result()
			polls++
			if err != nil {
				t.Fatal(err)
			}
			if n == procs*perProc+1 {
				break
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("only %d of %d callers have a place after 20 s", n-1, procs*perProc)
			}
			time.Sleep(time.Millisecond)
		}
		took := time.Since(start)
		cmds := commandCalls(t, rdb) - before - float64(polls)
		per := cmds / (procs * perProc)
		t.Logf("%s: %d callers in %d processes had their places after %s and %.0f commands (%.1f per caller)", mode, procs*perProc, procs, took.Round(time.Millisecond), cmds, per)
		if per > maxPerCaller {
			t.Errorf("%.1f commands per caller before every caller had its place, want at most %d", per, maxPerCaller)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a caller got no permit: %v", err)
			}
		}
		if h, o := members(t, rdb, lims[0], "burst.example"); len(h)+len(o) != 0 {
			t.Errorf("entries left: holders %v owners %v", h, o)
		}
	})
}

// commandCalls is how many commands Redis has run (INFO commandstats), those
// inside scripts included, leaving out INFO itself.
func commandCalls(t testing.TB, rdb *redis.Client) float64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var calls float64
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("INFO commandstats %s: %v", name, err)
				}
				calls += n
			}
		}
	}
	return calls
}

// Callers that give up while another process holds the site lock, or while
// they queue behind a caller of their own process, leave no entry behind,
// and the others still get their places once the lock is free.
func TestLockedCallersLeaveWhileContended(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{LockTTL: 5 * time.Second})
	k := keysFor(l.opts.prefix(), "c.example")
	// Another process holds the site lock (for up to its LockTTL).
	if err := rdb.Set(ctx, k.lock, "someone-else", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 6
	type result struct {
		i   int
		err error
	}
	results := make(chan result, n)
	cancels := make([]context.CancelFunc, n)
	for i := 0; i < n; i++ {
		cctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		go func() {
			p, err := l.Acquire(cctx, "c.example", n)
			if err == nil {
				err = p.Release(ctx)
			}
			results <- result{i, err}
		}()
		time.Sleep(5 * time.Millisecond) // arrive in order: 0 leads, the rest queue
	}
	// The leader and two queued callers give up.
	for _, i := range []int{0, 2, 5} {
		cancels[i]()
		if r := <-results; r.err != context.Canceled {
			t.Fatalf("caller %d: %v, want context.Canceled", r.i, r.err)
		}
	}
	wantNoEntries(t, rdb, l, "c.example", "entries written while the lock was held")
	rdb.Del(ctx, k.lock)
	for i := 0; i < n-3; i++ {
		if r := <-results; r.err != nil {
			t.Fatalf("caller %d: %v", r.i, r.err)
		}
	}
	for _, c := range cancels {
		c()
	}
	wantNoEntries(t, rdb, l, "c.example", "")
}

// Many callers give up at random moments during a burst on a busy site (in
// the queue, in a batch under way, just after it): none leaves an entry
// that blocks the line, and every caller that stays gets its permit.
func TestBurstWithCancels(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		prefix := testPrefix(t)
		rdb := newClient(t)
		lims := []*Limiter{
			newLimiter(t, newClient(t), Options{Mode: mode, Prefix: prefix}),
			newLimiter(t, newClient(t), Options{Mode: mode, Prefix: prefix}),
		}
		held, err := lims[0].TryAcquire(ctx, "b.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		const n = 200
		var wg sync.WaitGroup
		var mu sync.Mutex
		var stayed, granted int
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx := ctx
				if i%2 == 0 { // half give up within 0-20 ms
					var cancel context.CancelFunc
					cctx, cancel = context.WithTimeout(ctx, time.Duration(i%21)*time.Millisecond)
					defer cancel()
				}
				p, err := lims[i%2].Acquire(cctx, "b.example", 1)
				mu.Lock()
				defer mu.Unlock()
				if i%2 == 1 {
					stayed++
				}
				if err == nil {
					granted++
					p.Release(ctx)
				} else if i%2 == 1 {
					t.Errorf("caller %d: %v", i, err)
				}
			}()
		}
		time.Sleep(50 * time.Millisecond) // every timeout has passed
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if granted < stayed {
			t.Errorf("%d permits for %d callers that stayed", granted, stayed)
		}
		if h, o := members(t, rdb, lims[0], "b.example"); len(h)+len(o) != 0 {
			t.Errorf("entries left: holders %v owners %v", h, o)
		}
	})
}

// While a site lock left by a stalled process lasts (up to its TTL), the
// callers of a process cost Redis a bounded number of commands, not one
// spin each, and they all get in once it expires.
func TestStuckLockBoundedWork(t *testing.T) {
	const n, maxPerCaller = 50, 20
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{})
	k := keysFor(l.opts.prefix(), "s.example")
	if err := rdb.Set(ctx, k.lock, "stalled", 500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	before := commandCalls(t, rdb)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			p, err := l.Acquire(ctx, "s.example", n)
			if err == nil {
				err = p.Release(ctx)
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	per := (commandCalls(t, rdb) - before) / n
	t.Logf("%d callers behind a lock stuck for 500 ms: %.1f commands per caller, acquire and release included", n, per)
	if per > maxPerCaller {
		t.Errorf("%.1f commands per caller, want at most %d", per, maxPerCaller)
	}
}

// A process's callers that queue while the site lock is taken take their
// places, and so their permits, in the order they called; before the
// gate, whoever won the lock when it came free went first.
func TestLockedQueueKeepsArrivalOrder(t *testing.T) {
	const n = 8
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{})
	k := keysFor(l.opts.prefix(), "o.example")
	if err := rdb.Set(ctx, k.lock, "someone-else", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := l.Acquire(ctx, "o.example", 1)
			if err != nil {
				t.Error(err)
				order <- -1
				return
			}
			order <- i
			p.Release(ctx)
		}()
		time.Sleep(20 * time.Millisecond) // a generous gap: caller i calls before i+1
	}
	rdb.Del(ctx, k.lock)
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	for want, i := range got {
		if i != want {
			t.Fatalf("permits went to callers %v, want 0 to %d in order", got, n-1)
		}
	}
}
