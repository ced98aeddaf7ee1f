package limiter

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/luafn"
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
	id := l.hub.newID()
	sent := l.opts.now()()
	args := l.acquireArgs(id, rule, false)
	cmd := acquireScript.Queue(ctx, l.fn, pipe, l.keyArgs(k), args...)
	return sync.OnceValues(func() (*Permit, error) {
		v, err := scriptInts(cmd.Text())
		switch {
		case cmd.Err() == nil && cmd.Val() == nil:
			err = errNotExecuted
		case luafn.Missing(err):
			sent = l.opts.now()()
			v, err = scriptInts(acquireScript.Rerun(ctx, l.fn, l.keyArgs(k), args...).Text())
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

// KeepOn is ReleaseOn for a holder whose next request goes to the same
// site straight away, under next (the rule TryAcquireRule would be asked
// for): when the site's semaphore would grant next's permit at once anyway
// (fewer entries than the limit besides this one, so nobody waits under
// that limit; no crawl delay or hold-off, this release's own included; no
// ModeLocked site lock; the entry's lease not run out), the release keeps
// the slot instead of freeing it, in the same script call. It is
// TryAcquireRuleOn queued after ReleaseOn, in one script call instead of
// two: the entry takes a newcomer's place at the back of the line, and
// nobody could have taken the slot in between. A waiter held to a lower
// limit (a robots.txt fetch) moves up as after a release, and, as after a
// release that leaves no more entries than the limit, learns of it at its
// next check (Options.Poll), not by a wake-up message; but when the
// release raised the site's adaptive cap, the entries ranked below the new
// limit are told, as after a release (released wakes those of this
// process).
//
// released returns what ReleaseOn's after would for this permit (its
// outcome is recorded either way; SetOutcome). kept returns a new *Permit
// for the kept slot, as TryAcquireRuleOn's after would (same ID, its lease
// renewed from the call, rule and ceiling as next's grant), or a
// *BusyError when the slot was released instead, or another error. Both may
// be called more than once, once pipe has run. This permit counts as
// released from the call on, whatever kept returns.
//
// In ModeLocked a keep also needs the site's gate in this process idle: a
// caller of this process entering the site's line (gates) comes first, as
// it would before a new acquire of this process; a keep then queues only
// the release, and kept returns a *BusyError (take the next permit the
// usual way, through the gate). Where it cannot keep otherwise (next
// invalid; this permit lost, released or nil; the Limiter closed) it
// queues ReleaseOn and TryAcquireRuleOn. On a nil permit kept returns
// ErrPermitLost.
func (p *Permit) KeepOn(ctx context.Context, pipe redis.Pipeliner, next Rule) (released func() error, kept func() (*Permit, error)) {
	if p == nil {
		return func() error { return nil }, func() (*Permit, error) { return nil, ErrPermitLost }
	}
	l := p.l
	k, next, err := l.prepare(p.k.site, next)
	if err == nil && !l.Pipelines() && l.gates.busy(k.site) {
		return p.ReleaseOn(ctx, pipe), func() (*Permit, error) { return nil, &BusyError{Site: k.site} }
	}
	if err != nil || l.hub.isClosed() || p.Err() != nil || !p.stop() {
		return p.ReleaseOn(ctx, pipe), l.TryAcquireRuleOn(ctx, pipe, p.k.site, next)
	}
	sent := l.opts.now()()
	reply := l.releaseOn(ctx, pipe, k, l.keepArgs(p.id, p.rule, next, p.recorded()), func() { sent = l.opts.now()() })
	released = sync.OnceValue(func() error {
		v, err := reply()
		return p.settle(l.left(k, p.rule, v, err, true))
	})
	kept = sync.OnceValues(func() (*Permit, error) {
		// release.lua's numbers: the health's cap and extra delay at 4
		// and 5, then kept, server ms, rank, limit and delay ms at 7 to 11.
		v, err := reply()
		var n []int64
		if err == nil {
			n, _, err = releaseReply(v)
		}
		if err != nil {
			// The slot may be kept with nobody to use it (a lost or
			// unreadable reply): remove the entry (nothing, if the
			// release ran), starting the crawl delay as a release (never
			// shortening one).
			ctx, cancel := releaseCtx(ctx)
			defer cancel()
			_, _ = l.leave(ctx, k, p.id, p.rule, true, Outcome{})
			return nil, fmt.Errorf("limiter: keep %s: %w", k.site, err)
		}
		if n[7] != 1 {
			return nil, &BusyError{Site: k.site}
		}
		o, err := parseOutcome([]int64{stGranted, n[8], n[9], 0, n[10], n[11], n[4], n[5]}, sent, next)
		if err != nil {
			return nil, err
		}
		return newPermit(l, k, p.id, o.rule, o.eff, o.sent, o.rank+1 >= o.eff.Limit), nil
	})
	return released, kept
}

// Pipeline is a pipeline on the Limiter's Redis client, for
// TryAcquireRuleOn and Permit.ReleaseOn.
func (l *Limiter) Pipeline() redis.Pipeliner { return l.rdb.Pipeline() }

// Pipelines reports whether TryAcquireRuleOn shares the pipeline's round
// trip (ModeAtomic) rather than making its own (ModeLocked).
func (l *Limiter) Pipelines() bool { return l.opts.mode() == ModeAtomic }
