package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestLimitRespected(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		l := newLimiter(t, newClient(t), Options{Mode: mode})
		var held []*Permit
		for i := 0; i < 3; i++ {
			p, err := l.TryAcquire(ctx, "a.example", 3)
			if err != nil {
				t.Fatalf("permit %d: %v", i, err)
			}
			held = append(held, p)
		}
		_, err := l.TryAcquire(ctx, "a.example", 3)
		var busy *BusyError
		if !errors.Is(err, ErrBusy) || !errors.As(err, &busy) || busy.Wait <= 0 {
			t.Fatalf("4th TryAcquire: got %v, want *BusyError with a wait hint", err)
		}
		// Another site is not affected.
		if p, err := l.TryAcquire(ctx, "b.example", 3); err != nil {
			t.Fatalf("other site: %v", err)
		} else {
			p.Release(ctx)
		}
		if err := held[1].Release(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := l.TryAcquire(ctx, "a.example", 3)
		if err != nil {
			t.Fatalf("after a release: %v", err)
		}
		held[1] = p
		for _, p := range held {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		wantNoEntries(t, l.rdb, l, "a.example", "entries left after releasing all")
	})
}

func TestInvalidArguments(t *testing.T) {
	ctx := ctxT(t)
	l := newLimiter(t, newClient(t), Options{})
	for _, c := range []struct {
		site  string
		limit int
	}{{"", 1}, {"a{b}", 1}, {"a b", 1}, {"ok.example", 0}, {"ok.example", -2}} {
		if _, err := l.TryAcquire(ctx, c.site, c.limit); !errors.Is(err, ErrInvalid) {
			t.Errorf("TryAcquire(%q, %d) = %v, want ErrInvalid", c.site, c.limit, err)
		}
	}
	if _, err := l.AcquireRule(ctx, "ok.example", Rule{Limit: 1, Delay: -time.Second}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative delay: %v, want ErrInvalid", err)
	}
}

// Waiters are granted in the order they joined the line, each only after the
// one before it released.
func TestFairnessOrder(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		// Each waiter has a Limiter of its own, as if in another process.
		first := newLimiter(t, rdb, Options{Mode: mode})
		holder, err := first.Acquire(ctx, "fair.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		const n = 6
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			l := newLimiter(t, rdb, Options{Mode: mode, Prefix: first.opts.prefix()})
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := l.Acquire(ctx, "fair.example", 1)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				p.Release(ctx)
			}()
			// Let waiter i join the line before waiter i+1 starts.
			waitFor(t, "waiter to queue", func() bool {
				_, o := members(t, rdb, first, "fair.example")
				return len(o) == i+2
			})
		}
		holder.Release(ctx)
		wg.Wait()
		for i, got := range order {
			if got != i {
				t.Fatalf("grant order %v, want 0..%d", order, n-1)
			}
		}
		if len(order) != n {
			t.Fatalf("%d of %d waiters were granted", len(order), n)
		}
	})
}

func TestRefreshAndLostPermit(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode, Lease: time.Second})
		p, err := l.Acquire(ctx, "r.example", 2)
		if err != nil {
			t.Fatal(err)
		}
		before := p.Deadline()
		time.Sleep(20 * time.Millisecond)
		if err := p.Refresh(ctx); err != nil {
			t.Fatalf("refresh: %v", err)
		}
		if !p.Deadline().After(before) {
			t.Fatalf("refresh did not move the deadline: %v then %v", before, p.Deadline())
		}
		select {
		case <-p.Done():
			t.Fatal("Done closed on a live permit")
		default:
		}
		// Redis restarts empty: the next refresh finds the permit gone.
		k := keysFor(l.opts.prefix(), "r.example")
		rdb.Del(ctx, k.holders, k.owners, k.counter)
		if err := p.Refresh(ctx); !errors.Is(err, ErrPermitLost) {
			t.Fatalf("refresh after the entry vanished: %v, want ErrPermitLost", err)
		}
		select {
		case <-p.Done():
		default:
			t.Fatal("Done not closed after the permit was lost")
		}
		if err := p.Err(); !errors.Is(err, ErrPermitLost) {
			t.Fatalf("Err() = %v", err)
		}
		if err := p.Release(ctx); !errors.Is(err, ErrPermitLost) {
			t.Fatalf("release of a lost permit: %v, want ErrPermitLost", err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatalf("second release: %v, want nil (idempotent)", err)
		}
	})
}

func TestReleasedPermitCannotRefresh(t *testing.T) {
	ctx := ctxT(t)
	l := newLimiter(t, newClient(t), Options{})
	p, err := l.Acquire(ctx, "x.example", 1)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(ctx)
	if err := p.Refresh(ctx); !errors.Is(err, ErrPermitLost) {
		t.Fatalf("refresh after release: %v", err)
	}
	var nilPermit *Permit
	if err := nilPermit.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nilPermit.Refresh(ctx); !errors.Is(err, ErrPermitLost) {
		t.Fatal(err)
	}
	<-nilPermit.Done()
}

// Refreshing or releasing an id one does not hold changes nothing.
func TestForeignIDChangesNothing(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{})
	p, err := l.Acquire(ctx, "f.example", 1)
	if err != nil {
		t.Fatal(err)
	}
	k := keysFor(l.opts.prefix(), "f.example")
	rule := Rule{Limit: 1}
	if present, err := l.leave(ctx, k, "not-a-permit", rule, true, Outcome{}); err != nil || present {
		t.Fatalf("release of a foreign id: present=%v err=%v", present, err)
	}
	if o, err := l.check(ctx, k, "not-a-permit", rule); err != nil || o.state != stLost {
		t.Fatalf("refresh of a foreign id: %+v %v", o, err)
	}
	if h, o := members(t, rdb, l, "f.example"); len(h) != 1 || len(o) != 1 || h[0] != p.ID() {
		t.Fatalf("entries changed: holders %v owners %v", h, o)
	}
	if _, err := l.TryAcquire(ctx, "f.example", 1); !errors.Is(err, ErrBusy) {
		t.Fatalf("site should still be full: %v", err)
	}
	p.Release(ctx)
}

// A holder that stops refreshing loses its permit: its own Deadline passes
// before the slot goes to the next waiter, and Done closes.
func TestLeaseExpiryFreesSlot(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		const lease = 500 * time.Millisecond
		a := newLimiter(t, rdb, Options{Mode: mode, Lease: lease})
		b := newLimiter(t, rdb, Options{Mode: mode, Lease: lease, Prefix: a.opts.prefix()})
		dead, err := a.Acquire(ctx, "e.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		p, err := b.Acquire(ctx, "e.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		got := time.Now()
		if got.Before(dead.Deadline()) {
			t.Fatalf("slot handed over at %v, before the old holder's own deadline %v", got, dead.Deadline())
		}
		if waited := got.Sub(start); waited > 5*lease {
			t.Fatalf("waited %v for an expired lease of %v", waited, lease)
		}
		select {
		case <-dead.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("expired permit's Done never closed")
		}
		if err := dead.Release(ctx); !errors.Is(err, ErrPermitLost) {
			t.Fatalf("release of the expired permit: %v", err)
		}
		// The expired holder's release must not have freed b's slot.
		if _, err := b.TryAcquire(ctx, "e.example", 1); !errors.Is(err, ErrBusy) {
			t.Fatalf("after a stale release: %v, want ErrBusy", err)
		}
		p.Release(ctx)
	})
}

func TestKeepAliveOutlivesLease(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		const lease = 300 * time.Millisecond
		l := newLimiter(t, rdb, Options{Mode: mode, Lease: lease})
		p, err := l.Acquire(ctx, "k.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		p.KeepAlive(ctx)
		time.Sleep(4 * lease)
		if err := p.Err(); err != nil {
			t.Fatalf("kept-alive permit lost: %v", err)
		}
		if _, err := l.TryAcquire(ctx, "k.example", 1); !errors.Is(err, ErrBusy) {
			t.Fatalf("slot of a kept-alive permit was given away: %v", err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if q, err := l.TryAcquire(ctx, "k.example", 1); err != nil {
			t.Fatalf("after release: %v", err)
		} else {
			q.Release(ctx)
		}
	})
}

func TestContextCancelLeavesNothing(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode})
		p, err := l.Acquire(ctx, "c.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := l.Acquire(short, "c.example", 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire on a full site with a short ctx: %v", err)
		}
		h, o := members(t, rdb, l, "c.example")
		if len(h) != 1 || len(o) != 1 || h[0] != p.ID() || o[0] != p.ID() {
			t.Fatalf("cancelled waiter left entries: holders %v owners %v", h, o)
		}
		// An already-cancelled context still lets the release through.
		done, stop := context.WithCancel(ctx)
		stop()
		if err := p.Release(done); err != nil {
			t.Fatal(err)
		}
		wantNoEntries(t, rdb, l, "c.example", "")
	})
}

func TestCloseStopsWaiters(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{})
	other := newLimiter(t, rdb, Options{Prefix: l.opts.prefix()})
	p, err := other.Acquire(ctx, "z.example", 1)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := l.Acquire(ctx, "z.example", 1); errc <- err }()
	waitFor(t, "waiter to queue", func() bool { _, o := members(t, rdb, l, "z.example"); return len(o) == 2 })
	l.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter after Close: %v", err)
	}
	if _, err := l.TryAcquire(ctx, "z.example", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryAcquire after Close: %v", err)
	}
	if _, o := members(t, rdb, l, "z.example"); len(o) != 1 {
		t.Fatalf("closed waiter left its place: %v", o)
	}
	p.Release(ctx)
}

// A grant says whether it took the site's last free slot: a scheduler's
// hint to try other sites first.
func TestTookLastSlot(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := context.Background()
		l := newLimiter(t, newClient(t), Options{Mode: mode})
		var ps []*Permit
		for i, want := range []bool{false, false, true} {
			p, err := l.TryAcquire(ctx, "a.example", 3)
			if err != nil {
				t.Fatal(err)
			}
			if p.TookLastSlot() != want {
				t.Fatalf("grant %d of 3: TookLastSlot %v, want %v", i+1, p.TookLastSlot(), want)
			}
			ps = append(ps, p)
		}
		ps[0].Release(ctx)
		p, err := l.TryAcquire(ctx, "a.example", 3)
		if err != nil || !p.TookLastSlot() {
			t.Fatalf("the slot a release freed was the last: %v %v", p.TookLastSlot(), err)
		}
		// A waiter handed a slot by a release finds the site full.
		got := make(chan *Permit)
		go func() {
			p, _ := l.Acquire(ctx, "a.example", 3)
			got <- p
		}()
		waitFor(t, "a waiter in line", func() bool {
			st, err := l.Status(ctx, "a.example", 3)
			return err == nil && st.Waiting == 1
		})
		ps[1].Release(ctx)
		if w := <-got; w == nil || !w.TookLastSlot() {
			t.Fatalf("a waiter's grant: %v", w)
		}
		if (*Permit)(nil).TookLastSlot() {
			t.Fatal("a nil permit took a slot")
		}
		one, err := l.TryAcquire(ctx, "b.example", 1)
		if err != nil || !one.TookLastSlot() {
			t.Fatalf("limit 1: %v %v", one.TookLastSlot(), err)
		}
	})
}

// A waiter handed a slot by a release still waits out the site's hold-off,
// whoever set it: here a Backoff (a 429's Retry-After, or a crawl delay
// started at the robots.txt fetch) while the releaser's own rule has no
// delay.
func TestReleaseHandsOverOnlyAfterBackoff(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := context.Background()
		l := newLimiter(t, newClient(t), Options{Mode: mode})
		holder, err := l.TryAcquire(ctx, "a.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			if p, err := l.Acquire(ctx, "a.example", 1); err == nil {
				got <- time.Now()
				p.Release(ctx)
			}
		}()
		waitFor(t, "a waiter in line", func() bool {
			st, err := l.Status(ctx, "a.example", 1)
			return err == nil && st.Waiting == 1
		})
		const hold = 400 * time.Millisecond
		start := time.Now()
		if err := l.Backoff(ctx, "a.example", hold); err != nil {
			t.Fatal(err)
		}
		holder.Release(ctx)
		select {
		case at := <-got:
			if early := hold - at.Sub(start); early > 0 {
				t.Fatalf("granted %s before the site's backoff ended", early)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the waiter was never granted")
		}
	})
}

// Releasing a permit with a crawl delay never shortens a longer backoff.
func TestReleaseKeepsLongerBackoff(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := context.Background()
		l := newLimiter(t, newClient(t), Options{Mode: mode})
		p, err := l.TryAcquireRule(ctx, "a.example", Rule{Limit: 1, Delay: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Backoff(ctx, "a.example", time.Minute); err != nil { // a 429's Retry-After, mid-download
			t.Fatal(err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = l.TryAcquireRule(ctx, "a.example", Rule{Limit: 1, Delay: 50 * time.Millisecond})
		var busy *BusyError
		if !errors.As(err, &busy) || busy.Wait < 50*time.Second {
			t.Fatalf("after the release: %v, want the minute's backoff", err)
		}
	})
}

// A crawl delay or a backoff is a minimum: the next-request time it sets is
// never less than the true server time (µs) before the call plus the delay,
// though Redis time is kept in whole ms.
func TestHoldOffRoundsUp(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := context.Background()
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode})
		k := keysFor(testPrefix(t), "a.example")
		const delay = 200 * time.Millisecond
		for i := 0; i < 20; i++ {
			p, err := l.TryAcquireRule(ctx, "a.example", Rule{Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			p.rule.Delay = delay // released as a permit with a crawl delay
			before := rdb.Time(ctx).Val()
			p.Release(ctx)
			next, _ := rdb.Get(ctx, k.next).Int64()
			if want := before.Add(delay); time.UnixMilli(next).Before(want) {
				t.Fatalf("release: next %d ms is %s before the release began + %s", next, want.Sub(time.UnixMilli(next)), delay)
			}
			rdb.Del(ctx, k.next)
			before = rdb.Time(ctx).Val()
			l.Backoff(ctx, "a.example", delay)
			next, _ = rdb.Get(ctx, k.next).Int64()
			if want := before.Add(delay); time.UnixMilli(next).Before(want) {
				t.Fatalf("backoff: next %d ms is %s early", next, want.Sub(time.UnixMilli(next)))
			}
			rdb.Del(ctx, k.next)
		}
	})
}

// A permit counts as lost the stop margin before the rounding margin, so
// the work it covers has stopped before Redis can hand the slot on: the
// margin is max(StopMargin, Lease/10), at most Lease/4, so it grows with
// the lease. The table is the margin at the 1 s lease the crawler tests use
// and at the default 10 s lease; the last case measures it against Redis.
func TestStopMargin(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fixed := func() time.Time { return t0 }
	for _, c := range []struct{ lease, margin, want time.Duration }{
		{time.Second, 0, 22*time.Millisecond + 100*time.Millisecond},                              // Lease/10
		{time.Second, 50 * time.Millisecond, 22*time.Millisecond + 100*time.Millisecond},          // fetch.AbortGrace: Lease/10 is more
		{time.Second, 200 * time.Millisecond, 22*time.Millisecond + 200*time.Millisecond},         // a larger floor wins
		{time.Second, time.Hour, 22*time.Millisecond + 250*time.Millisecond},                      // at most Lease/4
		{10 * time.Second, 0, 202*time.Millisecond + time.Second},                                 // the default lease
		{10 * time.Second, 50 * time.Millisecond, 202*time.Millisecond + time.Second},             // crawler run's setting
		{200 * time.Millisecond, 50 * time.Millisecond, 6*time.Millisecond + 50*time.Millisecond}, // the floor, on a short lease
	} {
		name := fmt.Sprintf("lease %s, StopMargin %s", c.lease, c.margin)
		l := newLimiter(t, rdb, Options{Lease: c.lease, StopMargin: c.margin, Now: fixed, Prefix: testPrefix(t) + ":" + c.lease.String() + ":" + c.margin.String()})
		p, err := l.TryAcquire(ctx, "a.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.lease - p.Deadline().Sub(t0); got != c.want {
			t.Errorf("%s: fence %s before the lease ends, want %s", name, got, c.want)
		}
		if due := c.lease / 3; p.Deadline().Sub(t0) < due+c.lease/4 {
			t.Errorf("%s: fence %s after the grant leaves too little time after the Lease/3 refresh", name, p.Deadline().Sub(t0))
		}
		p.Release(ctx)
	}

	// Measured: the fence of a permit nobody refreshes closes Done before
	// Redis's clock reaches the end of its lease, by about the margin.
	l := newLimiter(t, rdb, Options{Lease: time.Second, StopMargin: 50 * time.Millisecond, Prefix: testPrefix(t) + ":real"})
	p, err := l.TryAcquire(ctx, "a.example", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	<-p.Done()
	fenced := time.Now()
	granted, err := rdb.ZScore(ctx, keysFor(l.opts.prefix(), "a.example").holders, p.ID()).Result()
	if err != nil {
		t.Fatal(err)
	}
	freed := time.UnixMilli(int64(granted)).Add(time.Second) // Redis drops the entry after this
	if margin := freed.Sub(fenced); margin <= 0 {
		t.Errorf("Done closed %s after Redis could hand the slot on", -margin)
	} else {
		t.Logf("1 s lease: Done closed %s before Redis could hand the slot on (rule: 122 ms)", margin.Round(time.Millisecond))
	}
}

// A permit confirmed so long ago that its fence has passed is lost the
// moment it exists, not when a timer gets round to it: a caller checking
// Err before starting work must not start it.
func TestPermitPastItsFenceIsLostAtOnce(t *testing.T) {
	l := newLimiter(t, newClient(t), Options{Lease: time.Second})
	k := keysFor(testPrefix(t), "a.example")
	for i := 0; i < 100; i++ {
		p := newPermit(l, k, "old", Rule{Limit: 1}, Rule{Limit: 1}, time.Now().Add(-2*time.Second), true)
		if p.Err() == nil {
			t.Fatalf("try %d: a permit past its fence was usable", i)
		}
		select {
		case <-p.Done():
		default:
			t.Fatal("Done not closed")
		}
	}
}

// A full site's wait hint is when the oldest holder's lease could run out
// (a holder that died frees its slot then), not the crawl delay's end
// (which the site has none of): the hint for a ticket behind the limit.
func TestFullSiteWaitIsTheOldestLease(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		const lease = 10 * time.Second
		l := newLimiter(t, newClient(t), Options{Mode: mode, Lease: lease})
		p, err := l.TryAcquire(ctx, "full.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
		_, err = l.TryAcquire(ctx, "full.example", 1)
		var busy *BusyError
		if !errors.As(err, &busy) || !busy.Full {
			t.Fatalf("second TryAcquire: got %v, want a full site's *BusyError", err)
		}
		// The holder took its permit moments ago: its lease runs out about
		// a lease from now, never later than that and a millisecond.
		if busy.Wait <= lease/2 || busy.Wait > lease+time.Millisecond {
			t.Fatalf("wait hint %s, want about the lease (%s)", busy.Wait, lease)
		}
	})
}
