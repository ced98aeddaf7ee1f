package frontier

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// call is one script call, run on its own or queued on a pipeline.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

// run runs the call on its own: EVALSHA, or EVAL when Redis does not know
// the script.
func (c *call) run(ctx context.Context, s redis.Scripter) {
	c.cmd = c.script.Run(ctx, s, c.keys, c.args...)
}

// pipelined runs calls in order in one round trip. A call that finds Redis
// without its script (restarted, or SCRIPT FLUSH) did nothing, and runs
// again on its own, in order, after the others.
func (f *Frontier) pipelined(ctx context.Context, calls ...*call) {
	pipe := f.rdb.Pipeline()
	for _, c := range calls {
		c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	pipe.Exec(ctx) // each call's outcome is in its cmd
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			c.run(ctx, f.rdb)
		}
	}
}

// DoneNext is what a worker does after a fetch, in one round trip: it
// admits the links found on it (Add, at it.Depth+1), settles it as fetched
// (Done), and takes the next item (Next). settled reports Add's and Done's
// failures (ErrLost among them); next and err are Next's answer. It costs
// Redis what the three calls do, and the worker one round trip, not three.
func (f *Frontier) DoneNext(ctx context.Context, it Item, links []string) (next Item, settled, err error) {
	if f.err != nil {
		return Item{}, f.err, f.err
	}
	add, done, nc := f.addCall(it.Depth+1, links, false), f.settleCall(it, "done", "", 0, false), f.nextCall()
	if add == nil {
		f.pipelined(ctx, done, nc)
	} else {
		f.pipelined(ctx, add, done, nc)
		if _, aerr := add.added(); aerr != nil {
			settled = aerr
		}
	}
	if derr := done.settled(it, "done"); derr != nil {
		settled = errors.Join(settled, derr)
	}
	next, err = f.next(nc)
	return next, settled, err
}
