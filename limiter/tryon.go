package limiter

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// TryAcquireRuleOn is TryAcquireRule sent on pipe, so that it shares a
// round trip with other commands: a worker that releases a site's permit
// and settles its page can ask, in the same round trip, for the site's
// permit for its next page. It queues the acquire on pipe and returns
// after, to call once pipe has been executed; after returns what
// TryAcquireRule would (a *Permit, a *BusyError at once when none is free,
// without joining the line, or another error). Commands queued on pipe
// before it run before it on the site's node: a release of the same site
// queued first frees its slot for this acquire, in arrival order with
// everyone else's.
//
// Only ModeAtomic acquires in one script call; in ModeLocked (and with the
// arguments wrong, or the Limiter closed) TryAcquireRuleOn queues nothing
// and after does the whole TryAcquireRule in its own round trips.
// Pipelines reports which. When the node does not have the script, after
// runs it alone, a round trip more. Called before pipe was executed, after
// returns an error. It may be called more than once and returns the same
// result; a permit it returns is the caller's to release.
func (l *Limiter) TryAcquireRuleOn(ctx context.Context, pipe redis.Pipeliner, site string, rule Rule) (after func() (*Permit, error)) {
	k, rule, err := l.prepare(site, rule)
	if err != nil || !l.Pipelines() || l.hub.isClosed() {
		return sync.OnceValues(func() (*Permit, error) { return l.TryAcquireRule(ctx, site, rule) })
	}
	id := uuid.NewString()
	sent := l.opts.now()()
	args := l.acquireArgs(id, rule, false)
	cmd := acquireScript.EvalSha(ctx, pipe, k.all(), args...)
	return sync.OnceValues(func() (*Permit, error) {
		v, err := cmd.Int64Slice()
		switch {
		case cmd.Err() == nil && cmd.Val() == nil:
			err = errNotExecuted
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			sent = l.opts.now()()
			v, err = acquireScript.Run(ctx, l.rdb, k.all(), args...).Int64Slice()
		}
		if err != nil {
			return nil, fmt.Errorf("limiter: acquire %s: %w", k.site, err)
		}
		o, err := parseOutcome(v, sent, rule)
		if err != nil {
			return nil, err
		}
		if o.state == stGranted {
			return newPermit(l, k, id, o.rule, o.eff, o.sent, o.rank+1 >= o.eff.Limit), nil
		}
		// Busy, or (stContended, stYoung) not decided: nothing was
		// written either way, and the caller can try the usual way.
		return nil, &BusyError{Site: site, Full: o.state == stBusy && o.rank >= o.eff.Limit, Wait: o.wait}
	})
}

// Pipeline is a pipeline on the Limiter's Redis client, for
// TryAcquireRuleOn and Permit.ReleaseOn.
func (l *Limiter) Pipeline() redis.Pipeliner { return l.rdb.Pipeline() }

// Pipelines reports whether TryAcquireRuleOn shares the pipeline's round
// trip (ModeAtomic) rather than making its own (ModeLocked).
func (l *Limiter) Pipelines() bool { return l.opts.mode() == ModeAtomic }
