package limiter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/polite-crawler/polite/internal/redisacl"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A hand-off tells the processes with an entry in the first limit places,
// each on its own channel, once, by pub/sub (the waiters' poll and
// heartbeats are far off), the releaser's own included (its reply can be
// lost); not a process whose waiter is still behind, and nothing on the
// site's channel.
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
		// a's release lets b in: a is told of its held[1], in front, and b
		// of its waiter. b's release lets c in: a is told of held[1] again,
		// c of its waiter.
		aHeld := a.hub.ch + " 2 0 " + held[1].ID()
		if len(seen) != 4 || seen[0] != aHeld || !strings.HasPrefix(seen[1], b.hub.ch+" 2 0 "+b.hub.tag+".") ||
			seen[2] != aHeld || !strings.HasPrefix(seen[3], c.hub.ch+" 2 0 "+c.hub.tag+".") {
			t.Errorf("messages %q, want a told of %s and b of its waiter, then a of %[2]s and c of its waiter", seen, held[1].ID())
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

// A Redis user without the channels under the prefix (Redis 7's default
// for a new user), or without SUBSCRIBE, cannot carry wake-ups:
// CheckWakeups says so (NOPERM), and
// a release that would publish one still succeeds, having let the waiter
// of another process in, which finds its turn by its poll. A user with the
// channels passes the check.
func TestReleaseWithoutChannels(t *testing.T) {
	ctx := ctxT(t)
	client := func(user string, rules ...any) *redis.Client {
		rdb, err := srv.ClientAs(ctx, "wake-"+user, rules...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	forModes(t, func(t *testing.T, mode Mode) {
		opts := Options{Mode: mode, Lease: 30 * time.Second, Poll: 100 * time.Millisecond, NoRestartGuard: true}
		if err := newLimiter(t, client("chan"), opts).CheckWakeups(ctx); err != nil {
			t.Errorf("a user with every channel: %v", err)
		}
		a := newLimiter(t, client("nochan", "resetchannels"), opts)
		opts.Prefix = a.opts.prefix()
		b := newLimiter(t, client("nochan", "resetchannels"), opts)
		if err := b.CheckWakeups(ctx); !redisacl.Refused(err) {
			t.Errorf("CheckWakeups for a user without channels: %v, want Redis's NOPERM", err)
		}
		if err := newLimiter(t, client("nosubscribe", "-subscribe"), opts).CheckWakeups(ctx); !redisacl.Refused(err) {
			t.Errorf("CheckWakeups for a user without SUBSCRIBE: %v, want Redis's NOPERM", err)
		}
		const site = "nochan.example"
		p, err := a.Acquire(ctx, site, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := waiter(ctx, b, site, 1)
		waitFor(t, "b to queue", func() bool { _, o := members(t, a.rdb, a, site); return len(o) == 2 })
		if err := p.Release(ctx); err != nil {
			t.Fatalf("a release whose wake-up Redis refuses: %v", err)
		}
		wantWoken(t, got, "b was not let in by its poll")
		wantNoEntries(t, a.rdb, a, site, "after the hand-off")
	})
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
	wantWoken(t, gotC, "c was not woken by pub/sub")
	var seen []string
	for len(seen) < 4 {
		m, err := spy.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("after %q: %v", seen, err)
		}
		if msg, ok := m.(*redis.Message); ok {
			seen = append(seen, msg.Channel+" "+msg.Payload)
		}
	}
	if m, err := spy.ReceiveTimeout(ctx, 200*time.Millisecond); err == nil {
		t.Errorf("after %q, one more: %v", seen, m)
	}
	// p1's release drops the dead entry and lets b in: a is told of p2, in
	// front, and b of its waiter. b's waiter releases at once and lets c
	// in: a is told of p2 again, c of its waiter.
	aHeld := a.hub.ch + " 2 0 " + p2.ID()
	if seen[0] != aHeld || !strings.HasPrefix(seen[1], b.hub.ch+" 2 0 "+b.hub.tag+".") ||
		seen[2] != aHeld || !strings.HasPrefix(seen[3], c.hub.ch+" 2 0 "+c.hub.tag+".") {
		t.Errorf("messages %q, want a told of %s and b of its waiter, then a of %[2]s and c of its waiter", seen, p2.ID())
	}
	if err := p2.Release(ctx); err != nil {
		t.Fatal(err)
	}
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
		// Subscribed already, and the subscription's nudge past, so that no
		// early look can let the waiter in.
		b.hub.listen()
		waitFor(t, "b to subscribe", func() bool {
			n, err := a.rdb.PubSubNumSub(ctx, b.hub.ch).Result()
			return err == nil && n[b.hub.ch] == 1
		})
		time.Sleep(50 * time.Millisecond)
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

// loseReply makes the reply of the release script for the entry id look
// lost, as a timeout or a cancelled context would after the script ran in
// Redis. It matches by id: the waiter that release lets in may release its
// own permit (on the same client) before the releaser's reply is read.
type loseReply struct{ id string }

func (r *loseReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *loseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (r *loseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if releaseScript.Is(cmd) && slices.Contains(cmd.Args(), any(r.id)) {
			cmd.SetErr(context.DeadlineExceeded)
			return context.DeadlineExceeded
		}
		return err
	}
}

// holderAndLocalWaiter makes an atomic Limiter on rdb (poll and heartbeats
// 10 s off), takes site's one permit and queues a waiter of the same
// Limiter behind it (see waiter), past its subscription's early look: only
// a wake-up can let it in within wantWoken's 5 s.
func holderAndLocalWaiter(t *testing.T, ctx context.Context, rdb *redis.Client, site string) (*Limiter, *Permit, <-chan error) {
	t.Helper()
	l := newLimiter(t, rdb, Options{Mode: ModeAtomic, Lease: 30 * time.Second, Poll: 10 * time.Second, NoRestartGuard: true})
	p, err := l.Acquire(ctx, site, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := waiter(ctx, l, site, 1)
	waitFor(t, "waiter to queue", func() bool { _, o := members(t, rdb, l, site); return len(o) == 2 })
	time.Sleep(50 * time.Millisecond) // past the fresh subscription's early look
	return l, p, got
}

// A release whose reply is lost after the script ran still wakes the
// waiter of its own process that it let in: by the message on the
// process's channel, not only by the reply.
func TestLostReleaseReplyWakesLocalWaiter(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	_, p, got := holderAndLocalWaiter(t, ctx, rdb, "lost-reply.example")
	rdb.AddHook(&loseReply{id: p.id})
	if err := p.Release(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("release: %v, want the lost reply's error", err)
	}
	wantWoken(t, got, "the local waiter was not woken after a release whose reply was lost")
}

// A keep that cannot keep its slot (someone waits) is a release: a caller
// that reads only kept, not released, still has the waiter of its own
// process that it let in woken.
func TestFailedKeepWakesLocalWaiter(t *testing.T) {
	ctx := ctxT(t)
	l, p, got := holderAndLocalWaiter(t, ctx, newClient(t), "failed-keep.example")
	pipe := l.Pipeline()
	_, kept := p.KeepOn(ctx, pipe, Rule{Limit: 1})
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := kept(); !errors.Is(err, ErrBusy) {
		t.Fatalf("kept: %v, want busy (a waiter is in line)", err)
	}
	wantWoken(t, got, "the local waiter was not woken after a keep that released")
}

// Every waiter registered with the hub leaves it: after waits cut by their
// context and a wait ended by a wake-up, the hub knows no waiter.
func TestHubForgetsWaiters(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode, Lease: 3 * time.Second, NoRestartGuard: true})
		const site = "forget.example"
		p, err := l.Acquire(ctx, site, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			c, cancel := context.WithTimeout(ctx, time.Duration(i)*time.Millisecond)
			_, err := l.Acquire(c, site, 1)
			cancel()
			if err == nil {
				t.Fatal("granted while the site was full")
			}
		}
		got := waiter(ctx, l, site, 1)
		waitFor(t, "waiter to queue", func() bool { _, o := members(t, rdb, l, site); return len(o) == 2 })
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		wantGranted(t, got)
		l.hub.mu.Lock()
		n := len(l.hub.waiters)
		l.hub.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d waiters still registered with the hub", n)
		}
	})
}

// A subscription whose host vanished without closing it (the proxy strands
// it: open, silent) is noticed at the hub's next ping and made again: a
// hand-off after that wakes the waiter it serves by the new subscription,
// and one while it was dead (its message lost) by the nudge the new
// subscription gives every waiter. Without the ping the hub would wait on
// the dead connection for good, and the waiter for its poll (10 s here).
func TestHubRenewsVanishedSubscription(t *testing.T) {
	for _, c := range []struct {
		name  string
		after bool // the release comes after the hub has had time to renew
	}{{"release after the renewal", true}, {"release while it was dead", false}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			px, err := redistest.NewProxy(srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer px.Close()
			far := redis.NewClient(&redis.Options{Addr: px.Addr, ReadTimeout: 500 * time.Millisecond, ConnMaxIdleTime: 100 * time.Millisecond}) // idle connections (stranded) are not reused
			defer far.Close()
			opts := Options{Mode: ModeAtomic, Lease: 30 * time.Second, Poll: 10 * time.Second, NoRestartGuard: true}
			l := newLimiter(t, far, opts)
			l.hub.idle, l.hub.pong = 200*time.Millisecond, 200*time.Millisecond
			opts.Prefix = l.opts.prefix()
			near := newLimiter(t, newClient(t), opts)
			site := fmt.Sprintf("vanished-%d.example", time.Now().UnixNano()) // a waiter's release over a stranded connection may never land
			p, err := near.Acquire(ctx, site, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				q, err := l.Acquire(ctx, site, 1)
				got <- err
				if err == nil {
					q.Release(context.WithoutCancel(ctx)) // may meet a stranded connection: best effort
				}
			}()
			waitFor(t, "waiter to queue", func() bool { _, o := members(t, near.rdb, near, site); return len(o) == 2 })
			time.Sleep(50 * time.Millisecond) // past the nudge of the waiter's subscription
			px.Strand()
			if c.after {
				time.Sleep(time.Second) // the hub's idle, ping and pong, then a new subscription
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			wantWoken(t, got, "the waiter was not woken: the hub stayed on its vanished subscription")
		})
	}
}

// No waiter waits for the process's subscription: with Redis silent, the
// first wait's listen returns at once, and the other waiters' register,
// listen and leave do not queue behind it (they waited out go-redis's dial
// and the SUBSCRIBE, 5 s here, holding the hub's lock). Once Redis answers,
// the hub's loop subscribes and nudges the waiters.
func TestListenWaitsForNoRedis(t *testing.T) {
	px, err := redistest.NewProxy(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	far := redis.NewClient(&redis.Options{Addr: px.Addr})
	defer far.Close()
	l := newLimiter(t, far, Options{Mode: ModeAtomic, NoRestartGuard: true})
	px.Cut() // nothing crosses: connections are accepted, nothing is answered
	start := time.Now()
	l.hub.listen()
	c := l.hub.register("waiter")
	l.hub.listen()
	l.hub.register("other")
	l.hub.leave("other")
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("listen, register and leave took %v with Redis silent; want at once", d)
	}
	time.Sleep(200 * time.Millisecond) // the loop's SUBSCRIBE meets the silence
	px.Heal()
	wantSubscribed(t, l, c, "once Redis answered")
	l.hub.leave("waiter")
}

// A SUBSCRIBE whose connection breaks as it is sent is sent again: go-redis
// replaces the connection before it notes the channel, so the new one was
// subscribed to nothing, and the hub kept reading it (pinged, it answers)
// without a wake-up or a nudge for the process's life.
func TestBrokenSubscribeIsSentAgain(t *testing.T) {
	var broke atomic.Bool
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return breakSubscribe{c, &broke}, nil
	}})
	defer rdb.Close()
	l := newLimiter(t, rdb, Options{Mode: ModeAtomic, NoRestartGuard: true})
	c := l.hub.register("waiter")
	defer l.hub.leave("waiter")
	l.hub.listen()
	wantSubscribed(t, l, c, "after its first SUBSCRIBE broke")
	if !broke.Load() {
		t.Fatal("the first SUBSCRIBE did not break: the test tests nothing")
	}
}

// wantSubscribed fails the test unless waiter c of l is nudged, as every
// subscription of l's hub nudges its waiters, within 10 s (when, says why
// the hub was to subscribe), and the process's channel has one subscriber.
func wantSubscribed(t *testing.T, l *Limiter, c <-chan grant, when string) {
	t.Helper()
	select {
	case g := <-c:
		if g.wait != time.Millisecond {
			t.Fatalf("got %+v; want the subscription's nudge", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no nudge: the hub did not subscribe %s", when)
	}
	n, err := newClient(t).PubSubNumSub(ctxT(t), l.hub.ch).Result()
	if err != nil || n[l.hub.ch] != 1 {
		t.Fatalf("subscribers of the process's channel: %v, %v; want 1", n, err)
	}
}

// breakSubscribe is a connection that the first SUBSCRIBE written on any of
// them (broke) closes, with an error, as a reset at that moment would.
type breakSubscribe struct {
	net.Conn
	broke *atomic.Bool
}

func (c breakSubscribe) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("subscribe")) && c.broke.CompareAndSwap(false, true) {
		c.Conn.Close()
		return 0, errors.New("connection reset by the test")
	}
	return c.Conn.Write(b)
}

// On a Ring, a waiter of another process is let in by its poll: the hub
// does not subscribe (a Ring's PUBLISH reaches one shard; the subscription
// may be on another), where it panicked (go-redis's Ring refuses a
// subscription to no channel).
func TestRingWaitersPoll(t *testing.T) {
	ring := func() *redis.Ring {
		r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": srv.Addr}})
		t.Cleanup(func() { r.Close() })
		return r
	}
	ctx := ctxT(t)
	opts := Options{Mode: ModeAtomic, Poll: 100 * time.Millisecond, NoRestartGuard: true}
	a := newLimiter(t, ring(), opts)
	opts.Prefix = a.opts.prefix()
	b := newLimiter(t, ring(), opts)
	p, err := a.Acquire(ctx, "ring.example", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := waiter(ctx, b, "ring.example", 1)
	rdb := newClient(t)
	waitFor(t, "the waiter to queue", func() bool { _, o := members(t, rdb, a, "ring.example"); return len(o) == 2 })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, got, "the Ring's waiter was not let in")
}
