package frontier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// gateHook holds the first pipeline sent (the first hold, with hold set)
// until its gate opens (and then panics, with panics set), and records each pipeline's size, its
// context's deadline and its context's ctxKey value.
type gateHook struct {
	gate      chan struct{}
	panics    bool
	hold      int
	mu        sync.Mutex
	sizes     []int
	deadlines []time.Time
	values    []any
}

type ctxKey struct{}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		switch cmds[0].Name() {
		case "hello", "client", "auth", "select": // a new connection's
			return next(ctx, cmds)
		}
		h.mu.Lock()
		first := len(h.sizes) < max(h.hold, 1)
		d, _ := ctx.Deadline()
		h.sizes, h.deadlines, h.values = append(h.sizes, len(cmds)), append(h.deadlines, d), append(h.values, ctx.Value(ctxKey{}))
		h.mu.Unlock()
		if first {
			<-h.gate
			if h.panics {
				panic("hook")
			}
		}
		return next(ctx, cmds)
	}
}

func (h *gateHook) sent() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.sizes...)
}

// eventually fails t unless ok comes true within 10 s.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// waitAll waits for wg, failing t after 10 s.
func waitAll(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("never: %s", what)
	}
}

// queued waits until n callers wait in c's queue.
func queued(t *testing.T, c *combiner, n int) {
	t.Helper()
	eventually(t, fmt.Sprint(n, " callers queued"), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue) == n
	})
}

// combined is a combiner of one lane that never goes beside a stalled
// round trip, and a client whose first pipeline waits for h's gate; its first caller's
// round trip is on its way when it returns (done closes after).
func combined(t *testing.T, h *gateHook) (c *combiner, rdb *redis.Client, done chan struct{}) {
	t.Helper()
	c = &combiner{stall: time.Hour, lanes: 1}
	rdb = srv.Client()
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(h)
	done = make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }() // h.panics
		c.exec(context.Background(), rdb, []redis.Cmder{redis.NewStatusCmd(context.Background(), "ping")})
	}()
	eventually(t, "the first round trip on its way", func() bool { return len(h.sent()) == 1 })
	return c, rdb, done
}

// idle fails t unless c has nothing on its way and nobody queued.
func idle(t *testing.T, c *combiner) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy != 0 || len(c.queue) != 0 {
		t.Errorf("combiner left %d round trips on their way, %d callers queued", c.busy, len(c.queue))
	}
}

// laned is a combiner of lanes lanes that goes beside stalled round trips
// after stall, and a client whose pipelines h holds (see gateHook).
func laned(t *testing.T, h *gateHook, lanes int, stall time.Duration) (*combiner, *redis.Client) {
	t.Helper()
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(h)
	return &combiner{stall: stall, lanes: lanes}, rdb
}

// echoes are callers of a combiner, caller i sending ECHO i.
type echoes struct {
	cmds []*redis.StringCmd
	wg   sync.WaitGroup
}

func newEchoes(n int) *echoes { return &echoes{cmds: make([]*redis.StringCmd, n)} }

// start starts caller i, through c on rdb.
func (e *echoes) start(ctx context.Context, c *combiner, rdb *redis.Client, i int) {
	e.cmds[i] = redis.NewStringCmd(ctx, "echo", fmt.Sprint(i))
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		c.exec(ctx, rdb, []redis.Cmder{e.cmds[i]})
	}()
}

// check waits for every caller (failing t after 10 s, saying what), and
// fails t unless each had its own answer.
func (e *echoes) check(t *testing.T, what string) {
	t.Helper()
	waitAll(t, &e.wg, what)
	for i, cmd := range e.cmds {
		if got, err := cmd.Result(); err != nil || got != fmt.Sprint(i) {
			t.Errorf("caller %d: %q, %v", i, got, err)
		}
	}
}

// TestCombinerCombines: pipelines sent while one is on its way go together
// in the next round trip, at most maxCombined callers each, callers in the
// order they came, each caller's commands in order and with their own
// outcomes; every caller returns once its commands have run.
func TestCombinerCombines(t *testing.T) {
	ctx := ctxT(t)
	h := &gateHook{gate: make(chan struct{})}
	c, rdb, first := combined(t, h)
	base := fmt.Sprintf("combine:%d:", crawls.Add(1))

	const callers = maxCombined + 6
	gets := make([]*redis.StringCmd, callers)
	incrs := make([]*redis.IntCmd, callers)
	var wg sync.WaitGroup
	for i := range callers {
		set := redis.NewStatusCmd(ctx, "set", fmt.Sprint(base, i), fmt.Sprint("v", i))
		incrs[i] = redis.NewIntCmd(ctx, "incr", base+"n")
		gets[i] = redis.NewStringCmd(ctx, "get", fmt.Sprint(base, i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.exec(ctx, rdb, []redis.Cmder{set, incrs[i], gets[i]})
		}()
		queued(t, c, i+1) // in this order
	}
	close(h.gate)
	waitAll(t, &wg, "every caller returned")
	<-first

	if got, want := fmt.Sprint(h.sent()), fmt.Sprint([]int{1, 3 * maxCombined, 3 * (callers - maxCombined)}); got != want {
		t.Fatalf("pipelines sent: %s commands each, want %s", got, want)
	}
	for i := range callers {
		if got, err := gets[i].Result(); err != nil || got != fmt.Sprint("v", i) {
			t.Errorf("caller %d read %q, %v: want its own SET's value", i, got, err)
		}
		if n, err := incrs[i].Result(); err != nil || n != int64(i+1) {
			t.Errorf("caller %d's INCR answered %d, %v: want %d (callers in the order they came)", i, n, err, i+1)
		}
	}
	idle(t, c)
}

// TestCombinerLanes: callers go at once while fewer than lanes round trips
// are on their way; the next wait, and go together when one is back.
func TestCombinerLanes(t *testing.T) {
	ctx := ctxT(t)
	h := &gateHook{gate: make(chan struct{}), hold: 2}
	c, rdb := laned(t, h, 2, time.Hour)
	e := newEchoes(4)
	for i := range e.cmds {
		e.start(ctx, c, rdb, i)
		if i < 2 {
			eventually(t, fmt.Sprint(i+1, " round trips on their way"), func() bool { return len(h.sent()) == i+1 })
		} else {
			queued(t, c, i-1)
		}
	}
	if got := h.sent(); len(got) != 2 {
		t.Fatalf("pipelines sent with both lanes taken: %v, want the first two callers' only", got)
	}
	close(h.gate)
	e.check(t, "every caller returned")
	if got, want := fmt.Sprint(h.sent()), fmt.Sprint([]int{1, 1, 2}); got != want {
		t.Errorf("pipelines sent: %s commands each, want %s (the two that waited together)", got, want)
	}
	idle(t, c)
}

// TestCombinerContexts: a caller whose context ends while it waits leaves
// at once, its commands not sent, each failing with its context's error;
// the others' round trip has the first live caller's context values and
// the latest of their deadlines, or none when one of them has none.
func TestCombinerContexts(t *testing.T) {
	base := fmt.Sprintf("combine:%d:", crawls.Add(1))
	for _, unbounded := range []bool{false, true} {
		h := &gateHook{gate: make(chan struct{})}
		c, rdb, first := combined(t, h)

		root := context.Background() // no deadline of its own
		gone, cancel := context.WithCancel(root)
		lost := redis.NewStatusCmd(gone, "set", base+"lost", "1")
		near, cancelNear := context.WithTimeout(context.WithValue(root, ctxKey{}, "near"), time.Minute)
		defer cancelNear()
		far, cancelFar := context.WithTimeout(root, 3*time.Minute)
		defer cancelFar()
		if unbounded {
			far = root
		}
		mid, cancelMid := context.WithTimeout(root, 2*time.Minute)
		defer cancelMid()
		kept := redis.NewIntCmd(near, "incr", base+"kept")
		var wg sync.WaitGroup
		left := make(chan struct{})
		for k, p := range []struct {
			ctx context.Context
			cmd redis.Cmder
		}{{gone, lost}, {near, kept}, {far, redis.NewStatusCmd(far, "ping")}, {mid, redis.NewStatusCmd(mid, "ping")}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.exec(p.ctx, rdb, []redis.Cmder{p.cmd})
				if k == 0 {
					close(left)
				}
			}()
			queued(t, c, k+1) // in this order
		}
		cancel()
		select {
		case <-left:
		case <-time.After(10 * time.Second):
			t.Fatal("a caller whose context ended still waits for the round trip on its way")
		}
		queued(t, c, 3)
		close(h.gate)
		waitAll(t, &wg, "every caller returned")
		<-first

		if err := lost.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled caller's command: %v, want context.Canceled", err)
		}
		if err := kept.Err(); err != nil {
			t.Errorf("a live caller's command: %v", err)
		}
		if n, _ := rdb.Exists(context.Background(), base+"lost").Result(); n != 0 {
			t.Error("the cancelled caller's SET ran")
		}
		fd, _ := far.Deadline()
		if got := h.sent(); len(got) != 2 || got[1] != 3 || !h.deadlines[1].Equal(fd) || h.values[1] != "near" {
			t.Errorf("unbounded=%v: pipelines %v with deadlines %v and values %v, want [1 3], the second with deadline %v and value near",
				unbounded, got, h.deadlines, h.values, fd)
		}
		idle(t, c)
	}
}

// TestCombinerStall: a caller whose round trip on its way hangs goes beside
// it with the callers queued, after stall.
func TestCombinerStall(t *testing.T) {
	ctx := ctxT(t)
	h := &gateHook{gate: make(chan struct{})}
	c, rdb, first := combined(t, h)
	c.mu.Lock()
	c.stall = 20 * time.Millisecond
	c.mu.Unlock()
	e := newEchoes(3)
	for i := range e.cmds {
		e.start(ctx, c, rdb, i)
	}
	e.check(t, "the callers behind a hung round trip went beside it")
	close(h.gate)
	<-first
	idle(t, c)
}

// TestCombinerStallBound: callers behind hung round trips in every lane go
// beside them in one round trip at most; the next wait.
func TestCombinerStallBound(t *testing.T) {
	ctx := ctxT(t)
	h := &gateHook{gate: make(chan struct{}), hold: 3}
	c, rdb := laned(t, h, 2, 20*time.Millisecond)
	e := newEchoes(5)
	for i := range 2 {
		e.start(ctx, c, rdb, i)
		eventually(t, fmt.Sprint(i+1, " round trips on their way"), func() bool { return len(h.sent()) == i+1 })
	}
	e.start(ctx, c, rdb, 2)
	e.start(ctx, c, rdb, 3)
	eventually(t, "a stalled caller beside the hung lanes", func() bool { return len(h.sent()) == 3 })
	e.start(ctx, c, rdb, 4)  // after the one beside has gone
	time.Sleep(10 * c.stall) // ten stalls: no second round trip may go beside
	got := h.sent()
	if len(got) != 3 {
		t.Fatalf("pipelines sent behind two hung lanes: %v, want one beside them", got)
	}
	queued(t, c, 5-2-got[2]) // the rest still wait
	close(h.gate)
	e.check(t, "every caller returned")
	idle(t, c)
}

// TestCombinerPanic: a round trip that panics fails its callers' commands
// and hands the next round trip on; the panic goes on to its leader.
func TestCombinerPanic(t *testing.T) {
	ctx := ctxT(t)
	h := &gateHook{gate: make(chan struct{}), panics: true}
	c := &combiner{stall: time.Hour, lanes: 1}
	rdb := srv.Client()
	defer rdb.Close()
	rdb.AddHook(h)
	ping := redis.NewStatusCmd(ctx, "ping")
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		c.exec(ctx, rdb, []redis.Cmder{ping})
	}()
	eventually(t, "the first round trip on its way", func() bool { return len(h.sent()) == 1 })
	echo := redis.NewStringCmd(ctx, "echo", "after")
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.exec(ctx, rdb, []redis.Cmder{echo})
	}()
	queued(t, c, 1)
	close(h.gate)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the caller behind a round trip that panicked still waits")
	}
	if r := <-panicked; r != "hook" {
		t.Errorf("the leader recovered %v, want the hook's panic", r)
	}
	if err := ping.Err(); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("the panicked round trip's command: %v", err)
	}
	if got, err := echo.Result(); err != nil || got != "after" {
		t.Errorf("the next caller: %q, %v", got, err)
	}
	idle(t, c)
}
