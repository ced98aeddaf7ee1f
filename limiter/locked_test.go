package limiter

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// stallAfterLock holds up the round trip that follows a won ModeLocked step 1
// (the site lock's SET NX) until release is closed: the worker stalls between
// its two round trips.
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
		return n(ctx, c)
	}
}

func (s *stallAfterLock) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.maybeStall()
		err := n(ctx, cmds)
		if sn, ok := cmds[0].(*redis.BoolCmd); ok && strings.EqualFold(sn.Name(), "set") && sn.Val() {
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

// A worker that stalls between its two round trips past LockTTL loses the
// site lock to others, who take places meanwhile. When its second round trip
// runs at last it must not lower the counter: the place it takes on its retry
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

	close(stall.release) // A's second round trip runs, long after its lock expired
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

// failWrite makes the first write round trip of a ModeLocked entry (step 2)
// report an error on its last write, after Redis ran it, as a reply
// that failed on the way back would.
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
		if name := strings.ToLower(c.Name()); (name == "eval" || name == "evalsha") && err == nil && f.once() {
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
			if strings.EqualFold(cmds[i].Name(), "zadd") {
				if f.once() {
					cmds[i].SetErr(errInjected)
				}
				break
			}
		}
		return err
	}
}

// A write of step 2 that fails makes Acquire fail and leave nothing, never
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

// countLocks counts ModeLocked's lock attempts (step 1 pipelines).
type countLocks struct{ n atomic.Int64 }

func (c *countLocks) DialHook(n redis.DialHook) redis.DialHook          { return n }
func (c *countLocks) ProcessHook(n redis.ProcessHook) redis.ProcessHook { return n }
func (c *countLocks) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if _, ok := cmds[0].(*redis.BoolCmd); ok && strings.EqualFold(cmds[0].Name(), "set") {
			c.n.Add(1)
		}
		return n(ctx, cmds)
	}
}

// A leader that keeps losing a busy site lock, one that changes hands, keeps
// the fast pace newcomers poll at (0.2–1 ms): only the same lock held past
// stuckLock slows it down (TestStuckLockBoundedWork). Slowing down after
// 20 ms of losing would let every newcomer overtake it.
func TestLockedBusyLockKeepsPace(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	count := &countLocks{}
	rdb.AddHook(count)
	l := newLimiter(t, rdb, Options{})
	k := keysFor(l.opts.prefix(), "busy")
	other := newClient(t)

	// Other processes take the lock in turn: a new token every 2 ms.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			other.Set(ctx, k.lock, "other-"+strconv.Itoa(i), 50*time.Millisecond)
			select {
			case <-stop:
				other.Del(ctx, k.lock)
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	waitFor(t, "the busy lock", func() bool { return other.Exists(ctx, k.lock).Val() == 1 })
	got := make(chan error, 1)
	go func() {
		p, err := l.Acquire(ctx, "busy", 1)
		if err == nil {
			err = p.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // past stuckLock
	before := count.n.Load()
	const window = 200 * time.Millisecond
	time.Sleep(window)
	tries := count.n.Load() - before
	close(stop)
	wg.Wait()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// At the stuck pace (5–10 ms) there are at most window/5ms+1 = 41.
	t.Logf("%d lock attempts in %s against a busy lock", tries, window)
	if tries <= 60 {
		t.Errorf("%d lock attempts in %s, want more than 60 (the 0.2–1 ms pace)", tries, window)
	}
}

// blockFirstRelease holds up the first release script call (it names the
// site's wake channel) until release is closed.
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
	undo := &blockFirstRelease{wake: k.wake, blocked: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(stall)
	rdb.AddHook(undo)
	other := newClient(t)
	if err := other.Set(ctx, k.lock, "other", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
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
