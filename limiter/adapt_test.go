package limiter

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// fast is the controller scaled down for tests: small windows, short
// delays and backoffs.
func fast(a Adaptive) *Adaptive {
	if a.Window == 0 {
		a.Window = 5
	}
	if a.Cooldown == 0 {
		a.Cooldown = 1
	}
	if a.FirstDelay == 0 {
		a.FirstDelay = 20 * time.Millisecond
	}
	if a.MaxDelay == 0 {
		a.MaxDelay = 80 * time.Millisecond
	}
	if a.Backoff == 0 {
		a.Backoff = 300 * time.Millisecond
	}
	if a.Forgive == 0 {
		a.Forgive = 5 * time.Second
	}
	return &a
}

// feed takes a permit for site under rule, records o and releases it.
func feed(t *testing.T, l *Limiter, site string, rule Rule, o Outcome) {
	t.Helper()
	ctx := ctxT(t)
	p, err := l.AcquireRule(ctx, site, rule)
	if err != nil {
		t.Fatal(err)
	}
	p.SetOutcome(o)
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func ok(ttfb time.Duration) Outcome {
	return Outcome{Class: OutcomeOK, TTFB: ttfb, TTLB: ttfb + time.Millisecond}
}

func status(t *testing.T, l *Limiter, site string, limit int) SiteStatus {
	t.Helper()
	st, err := l.Status(ctxT(t), site, limit)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// granted takes as many permits of site under rule as it can without
// waiting, up to 10, and releases them (recording nothing).
func granted(t *testing.T, l *Limiter, site string, rule Rule) int {
	t.Helper()
	ctx := ctxT(t)
	var ps []*Permit
	defer func() {
		for _, p := range ps {
			p.Release(ctx)
		}
	}()
	for range 10 {
		p, err := l.TryAcquireRule(ctx, site, rule)
		if errors.Is(err, ErrBusy) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return len(ps)
}

// A site whose time to first byte grows well above its best gets half its
// cap, then 1, then an extra delay that doubles up to its maximum; every
// acquire, TryAcquire and waiter is held to it. Without the controller
// (Off) nothing changes.
func TestAdaptLatencyHalvesCap(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		for _, off := range []bool{false, true} {
			l := newLimiter(t, newClient(t), Options{Mode: mode, Adaptive: fast(Adaptive{Off: off}),
				Prefix: testPrefix(t) + map[bool]string{true: ":off"}[off]})
			site, rule := "slow.example", Rule{Limit: 4}
			for range 5 {
				feed(t, l, site, rule, ok(50*time.Millisecond))
			}
			if st := status(t, l, site, 4); st.Cap != 4 || st.Reduced {
				t.Fatalf("off=%v: healthy site: cap %d reduced=%v, want 4", off, st.Cap, st.Reduced)
			}
			n := 0
			for ; n < 12 && status(t, l, site, 4).Cap == 4; n++ {
				feed(t, l, site, rule, ok(200*time.Millisecond))
			}
			st := status(t, l, site, 4)
			if off {
				if st.Cap != 4 || granted(t, l, site, rule) != 4 {
					t.Fatalf("adaptive off: cap %d after slow fetches, want 4 (nothing recorded)", st.Cap)
				}
				continue
			}
			if st.Cap != 2 || n > 4 {
				t.Fatalf("after %d slow fetches: cap %d, want 2 within 4", n, st.Cap)
			}
			if got := granted(t, l, site, rule); got != 2 {
				t.Fatalf("cap 2: %d permits granted at once, want 2", got)
			}
			// A waiter is held to the effective cap too.
			ctx := ctxT(t)
			a, _ := l.AcquireRule(ctx, site, rule)
			b, _ := l.AcquireRule(ctx, site, rule)
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			if p, err := l.AcquireRule(wctx, site, rule); err == nil {
				p.Release(ctx)
				t.Fatal("a third permit at cap 2")
			}
			cancel()
			a.Release(ctx)
			b.Release(ctx)
			for range 20 {
				feed(t, l, site, rule, ok(200*time.Millisecond))
			}
			st = status(t, l, site, 4)
			if st.Cap != 1 || st.ExtraDelay != 80*time.Millisecond {
				t.Fatalf("a site slow on end: cap %d, extra delay %s, want 1 and the maximum 80ms", st.Cap, st.ExtraDelay)
			}
			if st.TTFB < 150*time.Millisecond || st.BestTTFB > 60*time.Millisecond {
				t.Errorf("smoothed TTFB %s best %s, want about 200ms and 50ms", st.TTFB, st.BestTTFB)
			}
			// The extra delay holds the next grant off after a release.
			p, err := l.AcquireRule(ctx, site, rule)
			if err != nil {
				t.Fatal(err)
			}
			p.Release(ctx)
			if _, err := l.TryAcquireRule(ctx, site, rule); !errors.Is(err, ErrBusy) {
				t.Fatalf("within the extra delay: %v, want busy", err)
			}
			if s := l.AdaptStats(); s.Decreases < 3 || s.Reduced != 1 || s.Delayed != 1 {
				t.Errorf("AdaptStats %+v: want >= 3 decreases, 1 site reduced and delayed", s)
			}
		}
	})
}

// Errors (5xx, 429/503 with Retry-After, timeouts, connection errors)
// count as trouble above their
// share of the window: not the first ones.
func TestAdaptErrorsHalveCap(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		l := newLimiter(t, newClient(t), Options{Mode: mode, Adaptive: fast(Adaptive{Window: 10, ErrorShare: 0.2})})
		site, rule := "errs.example", Rule{Limit: 3}
		feed(t, l, site, rule, ok(10*time.Millisecond))
		for i, c := range []OutcomeClass{OutcomeServerError, OutcomeRetryAfter} {
			feed(t, l, site, rule, Outcome{Class: c})
			if st := status(t, l, site, 3); st.Reduced {
				t.Fatalf("after %d errors of 10: reduced to %d, want errors above 2 to count", i+1, st.Cap)
			}
		}
		feed(t, l, site, rule, Outcome{Class: OutcomeConnError})
		st := status(t, l, site, 3)
		if st.Cap != 1 {
			t.Fatalf("after 3 errors of 10: cap %d, want 1", st.Cap)
		}
		if w := st.Window; w.OK != 1 || w.ServerErrors != 1 || w.Throttled != 1 || w.ConnErrors != 1 {
			t.Errorf("window counts %+v", w)
		}
	})
}

// reduce feeds slow outcomes until site's effective cap is 1 (at most 30).
func reduce(t *testing.T, l *Limiter, site string, rule Rule) {
	t.Helper()
	for range 30 {
		if status(t, l, site, rule.Limit).Cap == 1 {
			return
		}
		feed(t, l, site, rule, ok(300*time.Millisecond))
	}
	t.Fatal("30 slow fetches did not bring the effective cap to 1")
}

// A site that recovers gets its full cap back, one slot per window of
// healthy fetches, never above the rule's limit; an increase that brings
// trouble back doubles the window before the next one.
func TestAdaptRecovers(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		const window = 5
		l := newLimiter(t, newClient(t), Options{Mode: mode, Adaptive: fast(Adaptive{Window: window, Cooldown: 1})})
		site, rule := "back.example", Rule{Limit: 3}
		feed(t, l, site, rule, ok(50*time.Millisecond))
		reduce(t, l, site, rule)
		// Healthy from here: the smoothed time falls back, then the cap grows.
		// Bound: the EWMA's way down and the cool-down (a few fetches), then
		// (limit-1) windows.
		caps := []int{}
		n := 0
		for ; n < 60; n++ {
			feed(t, l, site, rule, ok(50*time.Millisecond))
			c := status(t, l, site, 3).Cap
			if c > 3 {
				t.Fatalf("cap %d above the rule's 3", c)
			}
			if len(caps) == 0 || caps[len(caps)-1] != c {
				caps = append(caps, c)
			}
			if c == 3 {
				break
			}
		}
		if n >= 2*window+8 || len(caps) != 3 {
			t.Fatalf("recovery: caps %v after %d healthy fetches, want 1, 2, 3 within %d", caps, n+1, 2*window+8)
		}
		if got := granted(t, l, site, rule); got != 3 {
			t.Fatalf("recovered: %d granted at once, want 3 (the rule's limit, not more)", got)
		}
		for range 30 {
			feed(t, l, site, rule, ok(50*time.Millisecond))
		}
		if got := granted(t, l, site, rule); got != 3 {
			t.Fatalf("long healthy: %d granted at once, want the rule's 3", got)
		}

		// Fine at 1, not at 2: each probe at 2 fails and widens the window.
		l2 := newLimiter(t, newClient(t), Options{Mode: mode, Adaptive: fast(Adaptive{Window: window, Cooldown: 1}), Prefix: testPrefix(t) + ":2"})
		feed(t, l2, site, rule, ok(50*time.Millisecond))
		reduce(t, l2, site, rule)
		var gaps []int
		last := 0
		for i := range 120 {
			ttfb := 50 * time.Millisecond
			if status(t, l2, site, 3).Cap >= 2 {
				ttfb = 150 * time.Millisecond // three times slower at 2
			}
			feed(t, l2, site, rule, ok(ttfb))
			if ttfb > 50*time.Millisecond && status(t, l2, site, 3).Cap == 1 {
				gaps = append(gaps, i-last)
				last = i
			}
		}
		if len(gaps) < 3 || gaps[2] < 2*gaps[1]-4 || gaps[1] < window {
			t.Fatalf("fetches between failed probes %v: want each about twice the last", gaps)
		}
		t.Logf("%s: recovery 1->3 in %d healthy fetches (window %d); failed probes every %v fetches", mode, n+1, window, gaps)
	})
}

// A 429/503 without Retry-After holds every worker off the site for the
// backoff; a repeat after it ended doubles it; one during it (the same
// burst) does not; a quiet spell of Forgive starts again from the first.
func TestAdaptHeaderlessBackoff(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		const backoff = 300 * time.Millisecond
		a := fast(Adaptive{Backoff: backoff, MaxBackoff: 2 * time.Second, Forgive: 1500 * time.Millisecond})
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode, Adaptive: a})
		other := newLimiter(t, rdb, Options{Mode: mode, Adaptive: a}) // another process
		site, rule := "throttle.example", Rule{Limit: 3}
		ctx := ctxT(t)
		throttle := func() time.Duration {
			t.Helper()
			feed(t, l, site, rule, Outcome{Class: OutcomeThrottled, TTFB: time.Millisecond})
			return status(t, l, site, 3).BackoffLeft
		}
		held := func(want time.Duration) {
			t.Helper()
			_, err := other.TryAcquireRule(ctx, site, rule)
			var busy *BusyError
			if !errors.As(err, &busy) || busy.Wait < want*8/10 {
				t.Fatalf("another process during a %s backoff: %v, want busy for most of it", want, err)
			}
		}
		left := throttle()
		if left < backoff*8/10 || left > backoff*11/10 {
			t.Fatalf("first backoff %s, want %s ±10%%", left, backoff)
		}
		held(backoff)
		if st := status(t, l, site, 3); st.Cap != 1 || st.Backoffs != 1 {
			t.Fatalf("after a headerless 503: cap %d level %d, want cap halved to 1, level 1", st.Cap, st.Backoffs)
		}
		// The same burst: a second 503 from a fetch that started before.
		p, err := l.AcquireRule(ctx, site, rule) // waits the backoff out
		if err != nil {
			t.Fatal(err)
		}
		p.SetOutcome(Outcome{Class: OutcomeThrottled})
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		left = status(t, l, site, 3).BackoffLeft
		if left < 2*backoff*8/10 || left > 2*backoff*11/10 {
			t.Fatalf("second backoff %s, want %s ±10%%", left, 2*backoff)
		}
		held(2 * backoff)
		if st := status(t, l, site, 3); st.Backoffs != 2 {
			t.Fatalf("level %d, want 2", st.Backoffs)
		}
		// Quiet for Forgive after it ends: back to the first backoff.
		time.Sleep(left + a.Forgive + 100*time.Millisecond)
		left = throttle()
		if left > backoff*11/10 {
			t.Fatalf("after a quiet spell: backoff %s, want the first %s again", left, backoff)
		}
		if s := l.AdaptStats(); s.Backoffs != 3 || s.HeldOff != 1 {
			t.Errorf("AdaptStats %+v: want 3 backoffs, 1 site held off", s)
		}
	})
}

// The health record expires Forgive after its last write: a site left
// alone starts afresh at its full cap.
func TestAdaptStateExpires(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode, Adaptive: fast(Adaptive{Forgive: time.Second})})
		site, rule := "idle.example", Rule{Limit: 3}
		feed(t, l, site, rule, ok(50*time.Millisecond))
		feed(t, l, site, rule, Outcome{Class: OutcomeThrottled})
		k := keysFor(l.opts.prefix(), site)
		ttl := rdb.PTTL(ctxT(t), k.health).Val()
		if ttl <= 0 || ttl > time.Second+400*time.Millisecond {
			t.Fatalf("health TTL %s, want about the backoff + 1s", ttl)
		}
		if status(t, l, site, 3).Cap != 1 {
			t.Fatal("not reduced")
		}
		waitFor(t, "the health record to expire", func() bool { return rdb.Exists(ctxT(t), k.health).Val() == 0 })
		if st := status(t, l, site, 3); st.Cap != 3 || st.Reduced || st.TTFB != 0 {
			t.Fatalf("after expiry: %+v, want a fresh site", st)
		}
	})
}

// Adaptive politeness costs no round trip, and few commands: acquire reads
// the health in the MGET it already makes, release reads and rewrites it.
// Off, nothing touches it.
func TestAdaptCommands(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		rdb := newClient(t)
		runs := 0
		run := func(a *Adaptive, o Outcome) float64 {
			runs++
			l := newLimiter(t, rdb, Options{Mode: mode, Adaptive: a, Prefix: testPrefix(t) + ":" + strconv.Itoa(runs)})
			ctx := ctxT(t)
			const n = 20
			cycle := func() {
				p, err := l.AcquireRule(ctx, "cost.example", Rule{Limit: 3})
				if err != nil {
					t.Fatal(err)
				}
				p.SetOutcome(o)
				if err := p.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cycle() // the site's keys exist from here on
			before := commandStats(t, rdb)
			for range n {
				cycle()
			}
			var total float64
			for cmd, v := range commandStats(t, rdb) {
				if cmd != "info" {
					total += v - before[cmd]
				}
			}
			if a.Off {
				k := keysFor(l.opts.prefix(), "cost.example")
				if rdb.Exists(ctx, k.health).Val() != 0 {
					t.Fatal("adaptive off wrote a health record")
				}
			}
			return total / n
		}
		off := run(&Adaptive{Off: true}, ok(5*time.Millisecond))
		bare := run(fast(Adaptive{}), Outcome{})
		on := run(fast(Adaptive{}), ok(5*time.Millisecond))
		if bare-off != 1 || on-off != 2 {
			t.Fatalf("commands per acquire+release: off %.2f, on without an outcome %.2f, on %.2f: want +1 (GET) and +2 (GET, SET)", off, bare, on)
		}
		t.Logf("%s: commands per acquire+release: adaptive off %.2f, on %.2f (+%.2f)", mode, off, on, on-off)
	})
}

func TestAdaptInvalid(t *testing.T) {
	for _, a := range []Adaptive{{Slowdown: 0.5}, {Smoothing: 2}, {Window: -1}, {Backoff: -time.Second}, {MaxBackoff: 48 * time.Hour}} {
		l := New(newClient(t), &Options{Adaptive: &a})
		if _, err := l.TryAcquire(ctxT(t), "x.example", 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", a, err)
		}
		l.Close()
	}
}

// A worker whose clock is an hour off records and obeys the same health:
// every time the controller keeps is Redis's.
func TestAdaptSkewedWorker(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		const backoff = 300 * time.Millisecond
		a := fast(Adaptive{Backoff: backoff})
		rdb := newClient(t)
		off := newLimiter(t, rdb, Options{Mode: mode, Adaptive: a, Now: func() time.Time { return time.Now().Add(time.Hour) }})
		right := newLimiter(t, rdb, Options{Mode: mode, Adaptive: a})
		site, rule := "skew.example", Rule{Limit: 3}
		feed(t, off, site, rule, ok(50*time.Millisecond))
		feed(t, off, site, rule, Outcome{Class: OutcomeThrottled})
		ctx := ctxT(t)
		var busy *BusyError
		if _, err := right.TryAcquireRule(ctx, site, rule); !errors.As(err, &busy) || busy.Wait < backoff*8/10 || busy.Wait > backoff*11/10 {
			t.Fatalf("after a 503 recorded by a worker an hour ahead: %v, want busy for %s", err, backoff)
		}
		if st := status(t, right, site, 3); st.Cap != 1 || st.BackoffLeft > backoff*11/10 {
			t.Fatalf("status %+v: want cap 1 and the backoff as Redis keeps it", st)
		}
		if s := off.AdaptStats(); s.HeldOff != 1 {
			t.Errorf("the skewed worker's own view: %+v, want the site held off", s)
		}
		start := time.Now()
		p, err := off.AcquireRule(ctx, site, rule)
		if err != nil {
			t.Fatal(err)
		}
		p.Release(ctx)
		if waited := time.Since(start); waited < backoff*8/10 {
			t.Fatalf("the skewed worker waited %s, want the backoff", waited)
		}
	})
}

// A release whose healthy fetch raises the site's effective cap lets in,
// at once, a waiter that queued under the lower cap, even when the line
// then fits under the new cap (no one left behind it): the waiter is told,
// not left to its next poll (10 s here, a third of the lease).
func TestAdaptRaiseWakesWaiter(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		l := newLimiter(t, newClient(t), Options{Mode: mode, Lease: 30 * time.Second, Poll: 10 * time.Second, NoRestartGuard: true,
			Adaptive: fast(Adaptive{Window: 5, Cooldown: 1})})
		site, rule := "raise.example", Rule{Limit: 3}
		feed(t, l, site, rule, ok(50*time.Millisecond))
		reduce(t, l, site, rule)
		for range 40 {
			a, err := l.AcquireRule(ctx, site, rule)
			if err != nil {
				t.Fatal(err)
			}
			before := status(t, l, site, 3).Cap
			got := make(chan *Permit, 1)
			go func() { // ends when b is granted or ctx ends
				b, err := l.AcquireRule(ctx, site, rule)
				if err != nil {
					t.Error(err)
				}
				got <- b
			}()
			waitFor(t, "b in line behind a", func() bool {
				_, owners := members(t, l.rdb, l, site)
				return len(owners) == 2
			})
			select {
			case b := <-got:
				t.Fatalf("b granted (%v) while a held the site's only slot", b)
			default:
			}
			a.SetOutcome(ok(50 * time.Millisecond))
			start := time.Now()
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			var b *Permit
			select {
			case b = <-got:
			case <-time.After(3 * time.Second):
				b = <-got
				t.Fatalf("cap %d then %d: the waiter was granted %s after the release, want at once",
					before, status(t, l, site, 3).Cap, time.Since(start).Round(time.Millisecond))
			}
			after := status(t, l, site, 3).Cap
			b.Release(ctx)
			if before == 1 && after > 1 {
				return // the raise, which left the line (a, b) within the cap
			}
		}
		t.Fatal("40 healthy fetches did not raise the cap from 1")
	})
}
