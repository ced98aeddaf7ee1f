package limiter

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// A hand-off tells the processes with an entry in the first limit places,
// each on its own channel, once, by pub/sub (the waiters' poll and
// heartbeats are far off): not the releaser's own process (it has the ids
// in the reply), not a process whose waiter is still behind, and nothing
// on the site's channel.
func TestHandOffWakesOnlyItsProcess(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		opts := Options{Mode: mode, Lease: 30 * time.Second, Poll: 10 * time.Second, NoRestartGuard: true} // the guard would hold a fresh server for 31 s
		a := newLimiter(t, newClient(t), opts)
		opts.Prefix = a.opts.prefix()
		b, c := newLimiter(t, newClient(t), opts), newLimiter(t, newClient(t), opts)
		const site = "handoff.example"
		var held [2]*Permit
		for i := range held {
			p, err := a.Acquire(ctx, site, 2)
			if err != nil {
				t.Fatal(err)
			}
			held[i] = p
		}
		queued := func(n int) func() bool {
			return func() bool { _, o := members(t, a.rdb, a, site); return len(o) == n }
		}
		gotB := waiter(ctx, b, site, 2)
		waitFor(t, "b to queue", queued(3))
		gotC := waiter(ctx, c, site, 2)
		waitFor(t, "c to queue", queued(4))
		time.Sleep(50 * time.Millisecond) // past the fresh subscriptions' early look

		spy := spyOn(t, ctx, a.hub.ch, b.hub.ch, c.hub.ch, siteChannel(a, site))
		t0 := time.Now()
		if err := held[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		wantWoken(t, gotB, "waiter b was not woken by pub/sub")
		wantWoken(t, gotC, "waiter c was not woken by pub/sub")
		t.Logf("both waiters granted %s after the release", time.Since(t0))
		if err := held[1].Release(ctx); err != nil {
			t.Fatal(err)
		}
		var seen []string
		for {
			m, err := spy.ReceiveTimeout(ctx, 200*time.Millisecond)
			if err != nil {
				break
			}
			if msg, ok := m.(*redis.Message); ok {
				seen = append(seen, msg.Channel+" "+msg.Payload)
			}
		}
		// a's release lets b in: b is told (a's own held[1] is in front too,
		// but a has the reply). b's release lets c in: a is told of held[1],
		// c of its waiter.
		if len(seen) != 3 || !strings.HasPrefix(seen[0], b.hub.ch+" 2 0 "+b.hub.tag+".") ||
			seen[1] != a.hub.ch+" 2 0 "+held[1].ID() || !strings.HasPrefix(seen[2], c.hub.ch+" 2 0 "+c.hub.tag+".") {
			t.Errorf("messages %q, want b told of its waiter, then a of %s and c of its waiter", seen, held[1].ID())
		}
	})
}

// A waiter of an older version (its id a bare UUID) is told on the site's
// channel, where that version listens.
func TestHandOffTellsOlderWaiterOnSiteChannel(t *testing.T) {
	ctx := ctxT(t)
	l := newLimiter(t, newClient(t), Options{Mode: ModeAtomic, Lease: 30 * time.Second, NoRestartGuard: true})
	const site = "older.example"
	p, err := l.Acquire(ctx, site, 1)
	if err != nil {
		t.Fatal(err)
	}
	k, rule, err := l.prepare(site, Rule{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	old := uuid.NewString()
	if o, err := l.enter(ctx, k, old, rule, true); err != nil || o.state != stQueued {
		t.Fatalf("older waiter: state %d, %v; want queued", o.state, err)
	}
	defer l.giveUp(k, old, rule)
	spy := spyOn(t, ctx, siteChannel(l, site), l.hub.ch)
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := spy.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := "1 0 " + old; m.Channel != siteChannel(l, site) || m.Payload != want {
		t.Errorf("told %q on %s, want %q on the site's channel", m.Payload, m.Channel, want)
	}
}

// wantWoken fails the test with lost unless the waiter (see waiter) is
// granted and released within 5 s: the tests here poll every 10 s and
// heartbeat every 10 s, so only a wake-up can have let it in.
func wantWoken(t *testing.T, got <-chan error, lost string) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(lost)
	}
}

// spyOn subscribes a client of its own to channels and returns once Redis
// has confirmed each; it is closed when the test ends.
func spyOn(t *testing.T, ctx context.Context, channels ...string) *redis.PubSub {
	t.Helper()
	spy := newClient(t).Subscribe(ctx, channels...)
	t.Cleanup(func() { spy.Close() })
	for range channels {
		if _, err := spy.ReceiveTimeout(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return spy
}

// siteChannel is the channel a site's waiters listened on before each
// process had its own: the keys' base and "wake".
func siteChannel(l *Limiter, site string) string {
	return strings.TrimSuffix(keysFor(l.opts.prefix(), site).holders, "holders") + "wake"
}

// A release that also drops an expired entry ahead of it tells the waiter
// that moves into the first limit places.
func TestHandOffAfterPrune(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{Mode: ModeAtomic, Lease: 30 * time.Second, Poll: 10 * time.Second, NoRestartGuard: true}
	a := newLimiter(t, newClient(t), opts)
	opts.Prefix = a.opts.prefix()
	b, c := newLimiter(t, newClient(t), opts), newLimiter(t, newClient(t), opts)
	const site = "prune.example"
	p1, err := a.Acquire(ctx, site, 2)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := a.Acquire(ctx, site, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Release(ctx)
	queued := func(n int) func() bool {
		return func() bool { _, o := members(t, a.rdb, a, site); return len(o) == n }
	}
	gotB := waiter(ctx, b, site, 2)
	waitFor(t, "b to queue", queued(3))
	gotC := waiter(ctx, c, site, 2)
	waitFor(t, "c to queue", queued(4))
	time.Sleep(50 * time.Millisecond) // past the fresh subscriptions' early look
	// An entry whose holder died a lease ago, first in line: p1 and it are
	// in the first two places, p2 behind them.
	k := keysFor(a.opts.prefix(), site)
	now, err := a.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.rdb.ZAdd(ctx, k.holders, redis.Z{Score: float64(now.Add(-time.Minute).UnixMilli()), Member: "dead"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.rdb.ZAdd(ctx, k.owners, redis.Z{Score: 0, Member: "dead"}).Err(); err != nil {
		t.Fatal(err)
	}

	spy := spyOn(t, ctx, a.hub.ch, b.hub.ch, c.hub.ch)
	if err := p1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, gotB, "b was not woken by pub/sub")
	var seen []string
	for len(seen) < 1 {
		m, err := spy.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("after %q: %v", seen, err)
		}
		if msg, ok := m.(*redis.Message); ok {
			seen = append(seen, msg.Channel+" "+msg.Payload)
		}
	}
	// b is told; a, the releaser, has p2 in the reply; c is still behind.
	if !strings.HasPrefix(seen[0], b.hub.ch+" 2 0 "+b.hub.tag+".") {
		t.Errorf("messages %q, want b told of its waiter first", seen)
	}
	if err := p2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wantGranted(t, gotC)
}

// releaseAfterEntry releases p straight after the first script call that
// follows arming it (the waiter's entry), before the waiter's code has seen
// the reply.
type releaseAfterEntry struct {
	armed atomic.Bool
	p     *Permit
	err   chan error
}

func (r *releaseAfterEntry) DialHook(n redis.DialHook) redis.DialHook { return n }
func (r *releaseAfterEntry) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cs []redis.Cmder) error {
		err := n(ctx, cs)
		r.after(ctx, cs...)
		return err
	}
}
func (r *releaseAfterEntry) ProcessHook(n redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		err := n(ctx, c)
		r.after(ctx, c)
		return err
	}
}
func (r *releaseAfterEntry) after(ctx context.Context, cs ...redis.Cmder) {
	for _, c := range cs {
		if name := c.Name(); (name == "fcall" || name == "evalsha") && r.armed.CompareAndSwap(true, false) {
			err := r.p.Release(context.WithoutCancel(ctx))
			time.Sleep(50 * time.Millisecond) // the wake-up reaches the hub first
			r.err <- err
			return
		}
	}
}

// A release published the moment a waiter's entry was written, before the
// waiter has looked at the reply, still wakes it: the waiter is known to
// its process's hub before its entry is sent.
func TestWakeRightAfterEntryIsKept(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		opts := Options{Mode: mode, Lease: 30 * time.Second, Poll: 10 * time.Second, NoRestartGuard: true}
		a := newLimiter(t, newClient(t), opts)
		opts.Prefix = a.opts.prefix()
		rdb := newClient(t)
		b := newLimiter(t, rdb, opts)
		const site = "early.example"
		p, err := a.Acquire(ctx, site, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !b.hub.listen() { // subscribed already: no early look of a fresh subscription
			t.Fatal("b could not subscribe")
		}
		hook := &releaseAfterEntry{p: p, err: make(chan error, 1)}
		rdb.AddHook(hook)
		hook.armed.Store(true)
		got := waiter(ctx, b, site, 1)
		if err := <-hook.err; err != nil {
			t.Fatal(err)
		}
		wantWoken(t, got, "the wake-up published right after the entry was lost")
	})
}
