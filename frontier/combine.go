package frontier

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// maxCombined bounds how many callers' pipelines one combined round
	// trip carries, and maxCombinedCmds how many commands (a caller's
	// pipeline goes whole, so one larger than this goes alone); callers
	// past either wait for the next.
	maxCombined, maxCombinedCmds = 64, 256
	// lanes is how many round trips a process's callers start at once
	// without waiting. With one, a settlement waited for the round trip
	// on its way and then for its own (Redis busy with the scripts of the
	// pages before it): 4-8 ms of a 58 ms turn on 50 ms pages, the whole
	// of a one-process crawl's gap to colly alone. With four, a
	// one-process crawl ran at 0.92-0.95 of colly alone's rate instead of
	// 0.86-0.89, for 0.7-0.8 round trips a page instead of 0.3-0.4 and
	// the same Redis CPU (crawler bench --only crawl, before and after
	// twice); with several processes, the gain is within the noise.
	lanes = 4
	// stallAfter is how long a caller waits for the round trips on their
	// way before it goes beside them with the callers queued (a round
	// trip takes well under a millisecond to a few ms): one round trip
	// beside the lanes at most, so that a hung connection cannot pile
	// them up.
	stallAfter = 100 * time.Millisecond
)

// combiner sends the pipelines that a process's callers send while lanes
// of theirs are on their way as one pipeline, when one of those is back:
// a crawl's workers finish their pages in waves, and one settlement a
// round trip left Redis waking for each, with a read and a write system
// call a settlement. A caller that finds a lane free still goes at once:
// nothing waits for a timer.
//
// Each caller's commands stay together and in order. Callers are taken
// from the queue in the order they came (a stalled one first), and within
// one round trip run in that order; separate round trips, in different
// lanes, keep no order between them, as any two callers' own would not.
// The caller that finds fewer than lanes round trips on
// their way sends its own (it leads); one that finds them all taken
// waits, and when one is back the first waiter leads the next with the
// callers that came meanwhile. A waiter whose round trips on their way are
// slow (stallAfter) goes beside them with the callers queued, one beside
// the lanes at most, so that a connection that hangs until its timeout
// does not hold the process.
// A caller whose context ends before its commands are sent leaves with its
// context's error on each command, as a pipeline of its own would; once
// sent, commands are not cut by one caller's context: a combined round
// trip runs with the first caller's context values, uncancelled, and the
// latest of the callers' deadlines (none when one has none).
type combiner struct {
	stall time.Duration // stallAfter, unless set (tests)
	lanes int           // lanes, unless set (tests)
	mu    sync.Mutex
	busy  int        // round trips on their way
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

// fail sets err on each of p's commands, which were not sent.
func (p *pending) fail(err error) {
	for _, cmd := range p.cmds {
		cmd.SetErr(err)
	}
}

// exec sends cmds on rdb, combined with other callers' (see combiner), and
// returns when each command's outcome is in it.
func (c *combiner) exec(ctx context.Context, rdb redis.Cmdable, cmds []redis.Cmder) {
	if len(cmds) == 0 {
		return
	}
	me := &pending{ctx: ctx, cmds: cmds, turn: make(chan []*pending, 1)}
	c.mu.Lock()
	if c.busy < c.lanesOr() {
		c.busy++
		c.mu.Unlock()
		c.lead(rdb, []*pending{me})
		return
	}
	c.queue = append(c.queue, me)
	c.mu.Unlock()

	wait := stallAfter
	if c.stall > 0 {
		wait = c.stall
	}
	stall := time.NewTimer(wait)
	defer stall.Stop()
	done := ctx.Done()
	for {
		select {
		case batch := <-me.turn:
			if batch != nil {
				c.lead(rdb, batch)
			}
			return
		case <-done:
			c.mu.Lock()
			left := c.remove(me)
			c.mu.Unlock()
			if left {
				me.fail(ctx.Err())
				return
			}
			// Taken already: its round trip is on its way, or this caller
			// leads it now; wait for its turn.
			done = nil
		case <-stall.C:
			c.mu.Lock()
			if c.busy < c.lanesOr()+1 && c.remove(me) {
				c.queue = append([]*pending{me}, c.queue...)
				batch := c.take()
				c.busy++
				c.mu.Unlock()
				c.lead(rdb, batch)
				return
			}
			c.mu.Unlock()
			stall.Reset(wait)
		}
	}
}

// lanesOr is c.lanes, or lanes when unset.
func (c *combiner) lanesOr() int {
	if c.lanes > 0 {
		return c.lanes
	}
	return lanes
}

// remove takes p out of the queue, and reports whether it was there. The
// caller holds mu.
func (c *combiner) remove(p *pending) bool {
	for i, q := range c.queue {
		if q == p {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return true
		}
	}
	return false
}

// take takes the next round trip's callers from the head of the queue (see
// maxCombined). The caller holds mu.
func (c *combiner) take() []*pending {
	n, cmds := 0, 0
	for n < len(c.queue) && n < maxCombined && (n == 0 || cmds+len(c.queue[n].cmds) <= maxCombinedCmds) {
		cmds += len(c.queue[n].cmds)
		n++
	}
	batch := append([]*pending(nil), c.queue[:n]...)
	c.queue = c.queue[n:]
	return batch
}

// lead sends batch (batch[0] is the caller's own), then hands the next
// round trip to the first caller queued, if any, and tells the others in
// batch that theirs is done. If the send panics, every command of batch
// gets an error first, and the panic goes on.
func (c *combiner) lead(rdb redis.Cmdable, batch []*pending) {
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("frontier: pipeline panicked: %v", r)
			for _, p := range batch {
				p.fail(err)
			}
			defer panic(r)
		}
		c.mu.Lock()
		next := c.take()
		if len(next) == 0 {
			c.busy--
		}
		c.mu.Unlock()
		if len(next) > 0 {
			next[0].turn <- next // its caller leads them
		}
		for _, p := range batch[1:] {
			p.turn <- nil
		}
	}()
	c.send(rdb, batch)
}

// send sends the batch's commands in one pipeline.
func (c *combiner) send(rdb redis.Cmdable, batch []*pending) {
	pipe := rdb.Pipeline()
	var live []*pending
	var last time.Time // the latest deadline; zero when a caller has none
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.fail(err)
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
