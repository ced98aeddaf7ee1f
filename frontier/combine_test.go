package frontier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// gateHook holds the first pipeline sent until its gate opens, and records
// each pipeline's size and its context's deadline.
type gateHook struct {
	gate      chan struct{}
	mu        sync.Mutex
	sizes     []int
	deadlines []time.Time
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := cmds[0].Name(); n == "hello" || n == "client" { // a new connection's
			return next(ctx, cmds)
		}
		h.mu.Lock()
		first := len(h.sizes) == 0
		d, _ := ctx.Deadline()
		h.sizes, h.deadlines = append(h.sizes, len(cmds)), append(h.deadlines, d)
		h.mu.Unlock()
		if first {
			<-h.gate
		}
		return next(ctx, cmds)
	}
}

// queued waits until n callers wait in c's queue.
func queued(t *testing.T, c *combiner, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		got := len(c.queue)
		c.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers queued, want %d", got, n)
		}
	}
}

// TestCombinerCombines: pipelines sent while one is on its way go together
// in the next round trip, each caller's commands in order and with their
// own outcomes, and every caller returns once its commands have run.
func TestCombinerCombines(t *testing.T) {
	ctx := ctxT(t)
	rdb := srv.Client()
	defer rdb.Close()
	h := &gateHook{gate: make(chan struct{})}
	rdb.AddHook(h)
	base := fmt.Sprintf("combine:%d:", crawls.Add(1))
	var c combiner

	first := make(chan struct{})
	go func() {
		defer close(first)
		c.exec(ctx, rdb, []redis.Cmder{redis.NewStatusCmd(ctx, "set", base+"first", "1")})
	}()
	for { // the first pipeline is on its way, held at the gate
		h.mu.Lock()
		n := len(h.sizes)
		h.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}

	const callers = 10
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
	}
	queued(t, &c, callers)
	close(h.gate)
	wg.Wait()
	<-first

	if len(h.sizes) != 2 || h.sizes[1] != 3*callers {
		t.Fatalf("pipelines sent: %v commands each, want [1 %d]", h.sizes, 3*callers)
	}
	seen := map[int64]bool{}
	for i := range callers {
		if got, err := gets[i].Result(); err != nil || got != fmt.Sprint("v", i) {
			t.Errorf("caller %d read %q, %v: want its own SET's value", i, got, err)
		}
		n, err := incrs[i].Result()
		if err != nil || n < 1 || n > callers || seen[n] {
			t.Errorf("caller %d's INCR answered %d, %v", i, n, err)
		}
		seen[n] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy || len(c.queue) != 0 {
		t.Errorf("combiner left busy=%v with %d queued", c.busy, len(c.queue))
	}
}

// TestCombinerContexts: a caller whose context ends while it waits has its
// commands not sent, each failing with its context's error; the others'
// round trip has the latest of their deadlines, and none when one of them
// has none.
func TestCombinerContexts(t *testing.T) {
	ctx := ctxT(t)
	base := fmt.Sprintf("combine:%d:", crawls.Add(1))

	for _, unbounded := range []bool{false, true} {
		h := &gateHook{gate: make(chan struct{})}
		rdb := srv.Client()
		defer rdb.Close()
		rdb.AddHook(h)
		var c combiner
		go c.exec(ctx, rdb, []redis.Cmder{redis.NewStatusCmd(ctx, "ping")})
		for c.mu.Lock(); !c.busy; c.mu.Lock() {
			c.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
		c.mu.Unlock()

		root := context.Background() // no deadline of its own, unlike ctx
		gone, cancel := context.WithCancel(root)
		lost := redis.NewStatusCmd(gone, "set", base+"lost", "1")
		near, cancelNear := context.WithTimeout(root, time.Minute)
		defer cancelNear()
		far, cancelFar := context.WithTimeout(root, 2*time.Minute)
		defer cancelFar()
		if unbounded {
			far = root
		}
		kept := redis.NewIntCmd(near, "incr", base+"kept")
		var wg sync.WaitGroup
		for k, p := range []struct {
			ctx context.Context
			cmd redis.Cmder
		}{{gone, lost}, {near, kept}, {far, redis.NewStatusCmd(far, "ping")}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.exec(p.ctx, rdb, []redis.Cmder{p.cmd})
			}()
			queued(t, &c, k+1) // in this order
		}
		cancel()
		close(h.gate)
		wg.Wait()

		if err := lost.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled caller's command: %v, want context.Canceled", err)
		}
		if err := kept.Err(); err != nil {
			t.Errorf("a live caller's command: %v", err)
		}
		if n, _ := rdb.Exists(ctx, base+"lost").Result(); n != 0 {
			t.Error("the cancelled caller's SET ran")
		}
		fd, _ := far.Deadline()
		if len(h.sizes) != 2 || h.sizes[1] != 2 || !h.deadlines[1].Equal(fd) {
			t.Errorf("unbounded=%v: pipelines %v with deadlines %v, want [1 2] with the second's %v", unbounded, h.sizes, h.deadlines, fd)
		}
	}
}
