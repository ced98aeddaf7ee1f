package limiter

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// stallAfterLock holds up the round trip that follows a won ModeLocked site
// lock (its SET NX) until release is closed: the worker stalls between
// taking the lock and running locked.lua, which then needs a round trip of
// its own (the node lacked the script, NOSCRIPT).
type stallAfterLock struct {
	mu      sync.Mutex
	armed   bool // the next round trip stalls
	done    bool // it stalled once
	stalled chan struct{}
	release chan struct{}
}

func (s *stallAfterLock) DialHook(n redis.DialHook) redis.DialHook { return n }

func (s *stallAfterLock) ProcessHook(n redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		s.maybeStall()
		err := n(ctx, c)
		// SET lock token NX GET replies nil when it took the lock.
		if strings.EqualFold(c.Name(), "set") && errors.Is(err, redis.Nil) {
			s.mu.Lock()
			s.armed = !s.done
			s.mu.Unlock()
		}
		return err
	}
}

func (s *stallAfterLock) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.maybeStall()
		err := n(ctx, cmds)
		if set := cmds[0]; strings.EqualFold(set.Name(), "set") && errors.Is(set.Err(), redis.Nil) {
			s.mu.Lock()
			s.armed = !s.done
			s.mu.Unlock()
		}
		return err
	}
}

func (s *stallAfterLock) maybeStall() {
	s.mu.Lock()
	stall := s.armed
	s.armed, s.done = false, s.done || stall
	s.mu.Unlock()
	if stall {
		close(s.stalled)
		<-s.release
	}
}

// A worker that stalls between taking the site lock and running locked.lua
// (a second round trip when the node lacked the script) past LockTTL loses
// the site lock to others, who take places meanwhile. When its script runs
// at last it must not lower the counter: the place it takes on its retry
// must rank behind the permit held now, so at limit 1 it waits.
func TestLockedStallPastLockTTLNeverLowersCounter(t *testing.T) {
	ctx := ctxT(t)
	const lockTTL = 100 * time.Millisecond
	stall := &stallAfterLock{stalled: make(chan struct{}), release: make(chan struct{})}
	ra := newClient(t)
	ra.AddHook(stall)
	prefix := testPrefix(t)
	la := newLimiter(t, ra, Options{Prefix: prefix, LockTTL: lockTTL})
	lb := newLimiter(t, newClient(t), Options{Prefix: prefix, LockTTL: lockTTL})
	rdb := newClient(t)
	k := keysFor(prefix, "site")
	loadScripts(t, ctx, la) // settled as functions, then lost: the script runs alone
	forgetScripts(t, ctx, rdb)

	aGot := make(chan *Permit, 1)
	go func() {
		p, err := la.Acquire(ctx, "site", 1)
		if err != nil {
			t.Error(err)
		}
		aGot <- p
	}()
	<-stall.stalled
	waitFor(t, "A's site lock to expire", func() bool { return rdb.Exists(ctx, k.lock).Val() == 0 })

	// B takes three places (1, 2, 3) and lets the first two go: B3 holds.
	got := make(chan *Permit, 3)
	for range 3 {
		go func() {
			p, err := lb.Acquire(ctx, "site", 1)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
	}
	for range 2 {
		if err := (<-got).Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b3 := <-got

	close(stall.release) // A's script runs, long after its lock expired
	select {
	case p := <-aGot:
		t.Fatalf("A got a permit (%s) while B3 (%s) holds it at limit 1", p.ID(), b3.ID())
	case <-time.After(500 * time.Millisecond):
	}
	if err := b3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-aGot:
		p.Release(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("A got no permit after B3 released")
	}
}

// failWrite makes the first script call or write of a ModeLocked entry
// report an error, after Redis ran it, as a reply that failed on the way
// back would.
type failWrite struct {
	mu   sync.Mutex
	done bool
}

var errInjected = errors.New("injected write failure")

func (f *failWrite) once() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	first := !f.done
	f.done = true
	return first
}

func (f *failWrite) DialHook(n redis.DialHook) redis.DialHook { return n }

func (f *failWrite) ProcessHook(n redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		err := n(ctx, c)
		if name := strings.ToLower(c.Name()); (name == "eval" || name == "evalsha" || name == "fcall") && err == nil && f.once() {
			c.SetErr(errInjected)
			return errInjected
		}
		return err
	}
}

func (f *failWrite) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := n(ctx, cmds)
		for i := len(cmds) - 1; i >= 0; i-- {
			if name := strings.ToLower(cmds[i].Name()); name == "zadd" || ((name == "eval" || name == "evalsha" || name == "fcall") && cmds[i].Err() == nil) {
				if f.once() {
					cmds[i].SetErr(errInjected)
				}
				break
			}
		}
		return err
	}
}

// A script call that fails makes Acquire fail and leave nothing, never
// grant a permit with no entry behind it.
func TestLockedWriteFailureGrantsNothing(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	rdb.AddHook(&failWrite{})
	l := newLimiter(t, rdb, Options{})
	p, err := l.Acquire(ctx, "site", 1)
	if err == nil {
		t.Fatalf("Acquire granted %s; want the injected error", p.ID())
	}
	if !errors.Is(err, errInjected) {
		t.Fatalf("Acquire: %v, want the injected error", err)
	}
	if h, o := members(t, newClient(t), l, "site"); len(h)+len(o) > 0 {
		t.Fatalf("entries left behind: holders %v owners %v", h, o)
	}
}

// A leader that loses the site lock to a busy lock changing hands keeps the
// fast pace newcomers poll at; only the same lock (the same token) taken for
// longer than stuckLock slows it down. Before, the count started at the
// leader's first loss, so after 20 ms of losing to live processes it fell
// to the stuck pace and newcomers overtook it.
func TestLockWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var w lockWatch
	// A busy lock: a new token every 2 ms, for 200 ms.
	for i := 0; i <= 100; i++ {
		if w.stuck("other-"+strconv.Itoa(i), t0.Add(time.Duration(i)*2*time.Millisecond)) {
			t.Fatalf("a lock changing hands every 2 ms counted as stuck after %d ms", 2*i)
		}
	}
	// The same token: stuck once it has been seen for more than stuckLock.
	at := t0.Add(time.Second)
	for d := time.Duration(0); d <= stuckLock; d += time.Millisecond {
		if w.stuck("stalled", at.Add(d)) {
			t.Fatalf("one lock counted as stuck after %v, want after %v", d, stuckLock)
		}
	}
	if !w.stuck("stalled", at.Add(stuckLock+time.Millisecond)) {
		t.Fatalf("one lock taken for %v did not count as stuck", stuckLock+time.Millisecond)
	}
	// Its holder gives it up and another takes it: fast again.
	if w.stuck("next", at.Add(stuckLock+2*time.Millisecond)) {
		t.Fatal("a new holder counted as stuck")
	}
	// A lock whose token could not be read never counts as stuck.
	for d := time.Duration(0); d <= 3*stuckLock; d += 5 * time.Millisecond {
		if w.stuck("", at.Add(time.Second+d)) {
			t.Fatal("an unknown holder counted as stuck")
		}
	}
}

// blockFirstRelease holds up the first release script call (the one with
// the Limiter's tail among its arguments) until release is closed.
type blockFirstRelease struct {
	wake    string
	once    sync.Once
	blocked chan struct{}
	release chan struct{}
}

func (b *blockFirstRelease) DialHook(n redis.DialHook) redis.DialHook { return n }
func (b *blockFirstRelease) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return n
}
func (b *blockFirstRelease) ProcessHook(n redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		if slices.Contains(c.Args(), any(b.wake)) {
			b.once.Do(func() {
				close(b.blocked)
				<-b.release
			})
		}
		return n(ctx, c)
	}
}

// A caller that left while its batch was being entered has its entry taken
// out by the leader; the next caller must not wait for that: the lead is
// handed on first.
func TestLockedLeaverUndoDoesNotHoldUpNextBatch(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{})
	k := keysFor(l.opts.prefix(), "u")
	stall := &stallAfterLock{stalled: make(chan struct{}), release: make(chan struct{})}
	undo := &blockFirstRelease{wake: l.tail, blocked: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(stall)
	rdb.AddHook(undo)
	other := newClient(t)
	if err := other.Set(ctx, k.lock, "other", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	loadScripts(t, ctx, l)
	forgetScripts(t, ctx, other) // the script then runs alone: stall can hold it
	acquire := func(ctx context.Context, got chan<- *Permit) {
		p, err := l.Acquire(ctx, "u", 2)
		if err != nil && ctx.Err() == nil {
			t.Error(err)
		}
		got <- p
	}
	queued := func() int {
		l.gates.mu.Lock()
		defer l.gates.mu.Unlock()
		if s := l.gates.m[k.site]; s != nil {
			return len(s.queue)
		}
		return -1
	}
	// A leads, B joins A's batch while the lock is taken elsewhere.
	gotA, gotB, gotC := make(chan *Permit, 1), make(chan *Permit, 1), make(chan *Permit, 1)
	go acquire(ctx, gotA)
	waitFor(t, "A to lead", func() bool { return queued() == 0 })
	ctxB, cancelB := context.WithCancel(ctx)
	go acquire(ctxB, gotB)
	time.Sleep(20 * time.Millisecond)
	waitFor(t, "B in A's batch", func() bool { return queued() == 0 })
	// A wins the lock and stalls before writing; B leaves meanwhile.
	other.Del(ctx, k.lock)
	<-stall.stalled
	cancelB()
	<-gotB
	close(stall.release)
	// A's batch is written; B's entry is to be undone, and that is slow.
	<-undo.blocked
	go acquire(ctx, gotC)
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, o := members(t, other, l, "u"); len(o) == 3 {
			break // A, B (being undone) and C
		}
		if time.Now().After(deadline) {
			close(undo.release)
			t.Fatal("C took no place while the leader undid B's entry")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(undo.release)
	for _, ch := range []chan *Permit{gotA, gotC} {
		select {
		case p := <-ch:
			p.Release(ctx)
		case <-time.After(5 * time.Second):
			t.Fatal("no permit")
		}
	}
}

// An uncontended ModeLocked acquire is one round trip: the lock's SET NX
// and the script that enters the caller, on one pipeline; the script still
// writes only while the lock is ours (a lock held by another: nothing
// written, contention).
func TestLockedAcquireOneRoundTrip(t *testing.T) {
	ctx := ctxT(t)
	rt := &roundTrips{}
	rdb := newClient(t)
	rdb.AddHook(rt)
	l := newLimiter(t, rdb, Options{Mode: ModeLocked})
	loadScripts(t, ctx, l)
	rt.reset()
	p, err := l.Acquire(ctx, "one.example", 1)
	if err != nil {
		t.Fatal(err)
	}
	if single, pipes, inPipes, names := rt.counts(); single != 0 || pipes != 1 || inPipes != 2 {
		t.Fatalf("acquire cost %d single commands %v and %d pipelines of %d commands, want one pipeline of 2", single, names, pipes, inPipes)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	k := keysFor(l.opts.prefix(), "one.example")
	if err := rdb.Set(ctx, k.lock, "other", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	outs, holder, err := l.lockBatch(ctx, k, []*ticket{{id: "t1", rule: Rule{Limit: 1}, queue: true}})
	if err != nil || outs != nil || holder != "other" {
		t.Fatalf("lock held by another: %v, holder %q, %v; want contention", outs, holder, err)
	}
	wantNoEntries(t, rdb, l, "one.example", "the script wrote under another's lock")
}

// loseSetReply makes the first lock SET of a ModeLocked pipeline report an
// error after Redis ran it (and the script after it), as a reply lost on
// the way back would.
type loseSetReply struct{ failWrite }

func (f *loseSetReply) ProcessHook(n redis.ProcessHook) redis.ProcessHook { return n }

func (f *loseSetReply) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := n(ctx, cmds)
		if len(cmds) == 2 && strings.EqualFold(cmds[0].Name(), "set") && f.once() {
			cmds[0].SetErr(errInjected)
		}
		return err
	}
}

// The script's reply decides: a lock SET whose reply is lost, with the
// script run after it under the lock, grants what the script granted, with
// its entry behind it, and nothing is left once it is released.
func TestLockedScriptReplyStands(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{Mode: ModeLocked})
	loadScripts(t, ctx, l)
	rdb.AddHook(&loseSetReply{})
	p, err := l.Acquire(ctx, "lost.example", 1)
	if err != nil {
		t.Fatalf("Acquire: %v; want the script's grant", err)
	}
	if h, _ := members(t, rdb, l, "lost.example"); len(h) != 1 || h[0] != p.ID() {
		t.Fatalf("holders %v, want %s", h, p.ID())
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wantNoEntries(t, rdb, l, "lost.example", "")
}

// A TryAcquire entry locked.lua wrote and found busy is taken out as a
// waiter gives up, telling whoever that lets in: a release between the
// two can have moved it into the first limit places, ahead of a waiter
// that its leaving then lets in. With plain ZREMs that waiter sat until
// its poll with a slot free.
func TestLockedBusyDropWakes(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{Mode: ModeLocked, Lease: 30 * time.Second, Poll: 10 * time.Second, NoRestartGuard: true}
	rdb := newClient(t)
	a := newLimiter(t, rdb, opts)
	opts.Prefix = a.opts.prefix()
	b := newLimiter(t, newClient(t), opts)
	site, rule := "busydrop.example", Rule{Limit: 2}
	h1, err := a.Acquire(ctx, site, rule.Limit)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := a.Acquire(ctx, site, rule.Limit)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Release(ctx)
	// A busy TryAcquire entry of a's, as locked.lua leaves it until drop
	// takes it out: third in line, ahead of the waiter to come.
	k := keysFor(a.opts.prefix(), site)
	busy := &ticket{id: a.hub.newID(), rule: rule}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	c := rdb.Incr(ctx, k.counter).Val()
	rdb.ZAdd(ctx, k.holders, redis.Z{Score: float64(now.UnixMilli()), Member: busy.id})
	rdb.ZAdd(ctx, k.owners, redis.Z{Score: float64(c), Member: busy.id})
	got := waiter(ctx, b, site, rule.Limit)
	waitFor(t, "the waiter to queue", func() bool { _, o := members(t, rdb, a, site); return len(o) == 4 })
	if err := h1.Release(ctx); err != nil { // tells h2 and the busy entry; the waiter is third
		t.Fatal(err)
	}
	a.drop(k, []*ticket{busy}) // the waiter is second now: its turn
	wantGrantedWithin(t, got, 3*time.Second, "the waiter the busy entry's drop let in")
}
