package frontier

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxCombined bounds how many callers' pipelines one combined round trip
// carries; callers past it wait for the next.
const maxCombined = 64

// combiner sends the pipelines that a process's callers send while one of
// theirs is on its way as one pipeline, when that one is back: a crawl's
// workers finish their pages in waves, and one settlement a round trip
// left Redis waking for each, with cold caches and a read and a write
// system call a settlement. Combined, Redis runs a wave's scripts back to
// back (measured: see combine_test.go's benchmark and the README's
// figures), and a lone caller still goes at once: nothing waits for a
// timer.
//
// Each caller's commands stay together and in order; callers' order
// among themselves is the order they came in. The caller that finds no
// round trip on its way sends its own (it leads); one that finds one
// waits, and when that one is back the first waiter leads the next with
// every caller that came meanwhile. A caller whose context is done before
// its commands are sent gets its context's error on each command, as a
// pipeline of its own would; once sent, commands are not cut by one
// caller's context, but by the latest deadline among the callers (each
// caller's own round trip would have had its own).
type combiner struct {
	mu    sync.Mutex
	busy  bool       // a combined round trip is on its way
	queue []*pending // callers waiting for the next
}

// pending is one caller's pipeline, waiting to be sent.
type pending struct {
	ctx  context.Context
	cmds []redis.Cmder
	// turn gets nil when the commands were sent (their outcome is in
	// them), or the callers whose round trip this caller leads now.
	turn chan []*pending
}

// exec sends cmds on rdb, combined with other callers' (see combiner), and
// returns when each command's outcome is in it.
func (c *combiner) exec(ctx context.Context, rdb redis.Cmdable, cmds []redis.Cmder) {
	if len(cmds) == 0 {
		return
	}
	me := &pending{ctx: ctx, cmds: cmds, turn: make(chan []*pending, 1)}
	c.mu.Lock()
	batch := []*pending{me}
	if c.busy {
		c.queue = append(c.queue, me)
		c.mu.Unlock()
		if batch = <-me.turn; batch == nil {
			return // sent by another caller
		}
	} else {
		c.busy = true
		c.mu.Unlock()
	}
	c.send(rdb, batch)
	c.mu.Lock()
	next := c.queue[:min(len(c.queue), maxCombined):min(len(c.queue), maxCombined)]
	c.queue = c.queue[len(next):]
	c.busy = len(next) > 0
	c.mu.Unlock()
	if len(next) > 0 {
		next[0].turn <- next // its caller leads them
	}
	for _, p := range batch {
		if p != me {
			p.turn <- nil
		}
	}
}

// send sends the batch's commands in one pipeline.
func (c *combiner) send(rdb redis.Cmdable, batch []*pending) {
	pipe := rdb.Pipeline()
	var live []*pending
	var last time.Time // the latest deadline; zero when a caller has none
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			for _, cmd := range p.cmds {
				cmd.SetErr(err)
			}
			continue
		}
		d, ok := p.ctx.Deadline()
		if len(live) == 0 || (!last.IsZero() && (!ok || d.After(last))) {
			last = d // zero when !ok
		}
		live = append(live, p)
		_ = pipe.BatchProcess(p.ctx, p.cmds...) // queues only
	}
	switch len(live) {
	case 0:
		return
	case 1:
		_, _ = pipe.Exec(live[0].ctx) // each command's outcome is in it
		return
	}
	ctx := context.WithoutCancel(live[0].ctx)
	if !last.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, last)
		defer cancel()
	}
	_, _ = pipe.Exec(ctx) // each command's outcome is in it
}
