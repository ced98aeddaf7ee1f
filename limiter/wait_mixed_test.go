package limiter

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// A waiter held to a lower limit than the holders ahead of it (a
// robots.txt fetch at 1 behind pages at 3) gets its turn soon after the
// holders leave, though the last releases, under 3, tell nobody once the
// line fits under 3: told once by a release under 3, it looks often.
func TestLowerLimitWaiterGetsItsTurn(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		_, held, got := mixedLine(t, mode, "lower.example")
		// The first release tells the waiter (now third) under 3: not its
		// turn under 1. The last two leave the line under 3 and tell nobody.
		for i, p := range held {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				time.Sleep(300 * time.Millisecond) // the waiter looks (1 ms on), finds itself second
			}
		}
		wantGrantedWithin(t, got, 3*time.Second, "the waiter held to 1, alone in line")
	})
}

// mixedLine is a site of two processes' limiters, a and b (Poll 10 s), with
// 3 permits of a held under limit 3 and, fourth in line, a waiter of b held
// to 1, queued and its process listening (a wake-up published before is
// lost; the subscription's nudge makes up for it, under no limit). got
// ends with the waiter's permit.
func mixedLine(t *testing.T, mode Mode, site string) (a *Limiter, held []*Permit, got <-chan error) {
	t.Helper()
	ctx := ctxT(t)
	opts := Options{Mode: mode, Lease: 30 * time.Second, Poll: 10 * time.Second, NoRestartGuard: true}
	a = newLimiter(t, newClient(t), opts)
	opts.Prefix = a.opts.prefix()
	b := newLimiter(t, newClient(t), opts)
	for range 3 {
		p, err := a.Acquire(ctx, site, 3)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	got = waiter(ctx, b, site, 1)
	waitFor(t, "the waiter to queue", func() bool { _, o := members(t, a.rdb, a, site); return len(o) == 4 })
	waitFor(t, "the waiter's process to listen", func() bool {
		n, err := a.rdb.PubSubNumSub(ctx, b.hub.ch).Result()
		return err == nil && n[b.hub.ch] > 0
	})
	return a, held, got
}

// Such a waiter, once in front and waiting out a hold-off Redis timed
// (a backoff), waits for it, not every mixedPoll: it looks a few times in
// a second, not 40.
func TestLowerLimitWaiterWaitsOutHoldOff(t *testing.T) {
	ctx := ctxT(t)
	site := "holdoff.example"
	a, held, got := mixedLine(t, ModeAtomic, site)
	for i, p := range held {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// That told the waiter under 3: it is mixed from then on, and
			// behind holders, looking every mixedPoll. Then the site is
			// held off, and the last holders leave: it is in front.
			time.Sleep(100 * time.Millisecond)
			if err := a.Backoff(ctx, site, 3*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // its look after the message, in front now
	before := fcalls(t, a)
	time.Sleep(time.Second)
	if n := fcalls(t, a) - before; n > 10 {
		t.Errorf("%d script calls in a second while the only waiter, in front, waited out a 3 s backoff; want a few", n)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// fcalls is how many FCALLs (and EVALSHAs) Redis has run.
func fcalls(t *testing.T, l *Limiter) int64 {
	t.Helper()
	info, err := l.rdb.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\r\n") {
		if !strings.HasPrefix(line, "cmdstat_fcall:") && !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		f := strings.SplitN(strings.SplitN(line, ":", 2)[1], ",", 2)[0] // calls=N
		v, _ := strconv.ParseInt(strings.TrimPrefix(f, "calls="), 10, 64)
		n += v
	}
	return n
}
