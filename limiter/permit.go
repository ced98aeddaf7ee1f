package limiter

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/luafn"
)

// Permit is one slot of a site's semaphore, held until Release or until it is
// lost. Its methods are safe for concurrent use and on a nil *Permit.
//
// Self-fencing: a permit is valid for one lease from the last moment Redis
// confirmed it (Acquire, Refresh, or the keep-alive). The holder measures that
// on its own clock from just before the confirming request was sent, which is
// never later than the server time Redis recorded, and gives up a small margin
// (Lease/50 + 2ms, for millisecond rounding and clock-rate drift, plus the
// stop margin, max(Options.StopMargin, Lease/10), for the work to stop at the
// far end) early. So when
// Redis is unreachable, paused or restarted empty, Done closes before Redis
// could hand the slot to anyone else.
type Permit struct {
	l    *Limiter
	k    keys
	id   string
	rule Rule // the rule asked for (ceiled): what its release passes on
	eff  Rule // rule tightened by the site's health when it was granted
	full bool // the grant took the site's last free slot

	ctx  context.Context // cancelled, with cause ErrPermitLost, when the permit is lost
	lose context.CancelCauseFunc

	mu        sync.Mutex
	confirmed time.Time // worker clock just before the last confirmed request
	fence     *time.Timer
	released  bool
	outcome   Outcome            // what the fetch under it came to (SetOutcome)
	keeper    context.CancelFunc // stops KeepAlive's goroutine
	keeperEnd chan struct{}      // closed when that goroutine has returned
}

func newPermit(l *Limiter, k keys, id string, rule, eff Rule, confirmed time.Time, full bool) *Permit {
	p := &Permit{l: l, k: k, id: id, rule: rule, eff: eff, confirmed: confirmed, full: full}
	p.ctx, p.lose = context.WithCancelCause(context.Background())
	until := p.untilFence()
	if until <= 0 {
		// Already past its fence (confirmed from an old heartbeat, then
		// delayed): lost now, not when a timer gets round to it, or a caller
		// could start work under it while Redis hands its slot on.
		p.lose(ErrPermitLost)
	}
	p.fence = time.AfterFunc(max(until, 0), func() { p.lose(ErrPermitLost) })
	return p
}

// Site is the site the permit is for.
func (p *Permit) Site() string {
	if p == nil {
		return ""
	}
	return p.k.site
}

// ID is the permit's id in Redis: its Limiter's random 64-bit tag, a dot
// and a count ("<tag>.<n>"), unique across the fleet.
func (p *Permit) ID() string {
	if p == nil {
		return ""
	}
	return p.id
}

// Rule is the rule the permit was granted under: the one asked for, or with
// Rule.From the site's rule then (the strictest of its contributors'), with
// From kept; with adaptive politeness, tightened by the site's effective cap
// and extra delay then (Options.Adaptive).
func (p *Permit) Rule() Rule {
	if p == nil {
		return Rule{}
	}
	return p.eff
}

// SetOutcome records what the fetch made under the permit came to. Its
// release (Release or ReleaseOn, called after) writes it into the site's
// health in the same script, at no extra round trip, when adaptive
// politeness is on (Options.Adaptive). The last call before the release
// counts; a permit released without one records nothing. Safe on nil.
func (p *Permit) SetOutcome(o Outcome) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.outcome = o
	p.mu.Unlock()
}

// TookLastSlot reports whether the permit took its site's last free slot
// when it was granted, so that right then the site was full. Slots may have
// been released since: it is a hint for a scheduler (try other sites
// first), never a reason to skip the limiter. False on a nil permit.
func (p *Permit) TookLastSlot() bool {
	return p != nil && p.full
}

// Done is closed when the permit is lost: its lease ran out before a refresh
// was confirmed, or a refresh found it gone. It is not closed by Release. On
// a nil permit it is closed.
func (p *Permit) Done() <-chan struct{} {
	if p == nil {
		return closed
	}
	return p.ctx.Done()
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Err is nil while the permit is valid and ErrPermitLost once it is lost.
func (p *Permit) Err() error {
	if p == nil {
		return ErrPermitLost
	}
	if p.ctx.Err() != nil {
		return context.Cause(p.ctx)
	}
	return nil
}

// Deadline is when, on the worker's clock, the permit will count as lost
// unless a refresh is confirmed first.
func (p *Permit) Deadline() time.Time {
	if p == nil {
		return time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deadline()
}

func (p *Permit) deadline() time.Time {
	lease := p.l.opts.lease()
	return p.confirmed.Add(lease - lease/50 - 2*time.Millisecond - p.l.opts.stopMargin())
}

func (p *Permit) untilFence() time.Duration {
	return p.deadline().Sub(p.l.opts.now()())
}

// Context returns a context derived from parent that is also cancelled, with
// cause ErrPermitLost, when the permit is lost. Run the work the permit covers
// under it. Call cancel when the work ends.
func (p *Permit) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	if p == nil {
		cancel(ErrPermitLost)
		return ctx, func() {}
	}
	stop := context.AfterFunc(p.ctx, func() { cancel(context.Cause(p.ctx)) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// Refresh renews the permit's lease from Redis's clock. It returns
// ErrPermitLost, and closes Done, if the permit had expired or been removed
// (or was released); another error means Redis did not answer, and the permit
// stays valid until its Deadline.
func (p *Permit) Refresh(ctx context.Context) error {
	if p == nil {
		return ErrPermitLost
	}
	if err := p.usable(); err != nil {
		return err
	}
	own := p.rule
	own.From = "" // a held permit's refresh needs no ceiling: only whether it is there
	o, err := p.l.check(ctx, p.k, p.id, own)
	if err != nil {
		return err
	}
	if o.state == stLost {
		p.lose(ErrPermitLost)
		return ErrPermitLost
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released || p.ctx.Err() != nil {
		return ErrPermitLost
	}
	p.confirmed = o.sent
	p.fence.Reset(p.untilFence())
	return nil
}

func (p *Permit) usable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released || p.ctx.Err() != nil {
		return ErrPermitLost
	}
	return nil
}

// KeepAlive refreshes the permit every Lease/3 in a goroutine of its own
// until ctx is done, the permit is released or it is lost. A failed refresh is
// retried every Lease/20 until the permit's Deadline. Calling it again while a
// keep-alive runs does nothing.
func (p *Permit) KeepAlive(ctx context.Context) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keeper != nil || p.released || p.ctx.Err() != nil {
		return
	}
	ctx, p.keeper = context.WithCancel(ctx)
	p.keeperEnd = make(chan struct{})
	go p.keepAlive(ctx, p.keeperEnd)
}

func (p *Permit) keepAlive(ctx context.Context, end chan struct{}) {
	defer close(end)
	lease := p.l.opts.lease()
	timer := time.NewTimer(0)
	defer timer.Stop()
	failed := false
	for {
		p.mu.Lock()
		due := p.confirmed.Add(lease / 3).Sub(p.l.opts.now()())
		until := p.untilFence()
		p.mu.Unlock()
		if failed {
			due = lease / 20
		}
		timer.Reset(max(due, 0))
		select {
		case <-ctx.Done():
			return
		case <-p.ctx.Done():
			return
		case <-timer.C:
		}
		rctx, cancel := context.WithTimeout(ctx, max(until, time.Millisecond))
		err := p.Refresh(rctx)
		cancel()
		if errors.Is(err, ErrPermitLost) {
			return
		}
		failed = err != nil
	}
}

// Release gives the permit back and wakes the waiter it lets in. It is
// idempotent. It returns ErrPermitLost if the permit had been lost (the work
// done under it may have overlapped another holder's), or a Redis error, in
// which case the slot frees itself when the lease runs out. Release does its
// work even when ctx is already cancelled (a stopped crawl must still give its
// slots back), then with a 2 s limit of its own.
func (p *Permit) Release(ctx context.Context) error {
	if !p.stop() {
		return nil
	}
	ctx, cancel := releaseCtx(ctx)
	defer cancel()
	return p.settle(p.l.leave(ctx, p.k, p.id, p.rule, true, p.recorded()))
}

// ReleaseOn is Release sent on pipe, so that it shares a round trip with
// other commands (the frontier's settlement): it queues the release on pipe
// and returns after, to call once pipe has been executed; after returns what
// Release would (nil, ErrPermitLost, or a Redis error). Until after is
// called the permit counts as released for everything else (KeepAlive stops,
// Release and ReleaseOn do nothing). On a permit already released it queues
// nothing and after returns nil.
//
// pipe may come from a *redis.Client or a *redis.ClusterClient (the release
// goes to the site's node) and is best a plain pipeline, not a transaction.
// The release is one FCALL (EVALSHA where Redis has no Functions); when the
// node does not have it (it restarted without persistence, FUNCTION FLUSH,
// a Cluster master that joined later), after loads it and runs the release
// alone, a round trip more. pipe.Exec then returns that error (Exec reports
// the first failed command; ScriptMissing tells it): check the pipeline's
// other commands one by one and leave the release's outcome to after. after
// wakes the waiters of this process the release lets in, as Release does,
// sooner than the message the release publishes for them; it
// may be called more than once and returns the same result. Called before
// pipe was executed, it returns an error and the slot frees itself when the
// lease runs out.
func (p *Permit) ReleaseOn(ctx context.Context, pipe redis.Pipeliner) (after func() error) {
	if !p.stop() {
		return func() error { return nil }
	}
	reply := p.l.releaseOn(ctx, pipe, p.k, p.l.leaveArgs(p.id, p.rule, true, p.recorded()), nil)
	return sync.OnceValue(func() error {
		v, err := reply()
		return p.settle(p.l.left(p.k, p.rule, v, err, true))
	})
}

// releaseOn queues release.lua with args on pipe and returns its reply, to
// read once pipe has run (errNotExecuted before). When the node does not
// have the script, the reply runs it alone, calling rerun (if not nil)
// just before.
func (l *Limiter) releaseOn(ctx context.Context, pipe redis.Pipeliner, k keys, args []any, rerun func()) func() (string, error) {
	cmd := releaseScript.Queue(ctx, l.fn, pipe, l.keyArgs(k), args...)
	return sync.OnceValues(func() (string, error) {
		v, err := cmd.Text()
		switch {
		case cmd.Err() == nil && cmd.Val() == nil:
			err = errNotExecuted
		case luafn.Missing(err):
			ctx, cancel := releaseCtx(ctx)
			defer cancel()
			if rerun != nil {
				rerun()
			}
			v, err = releaseScript.Rerun(ctx, l.fn, l.keyArgs(k), args...).Text()
		}
		return v, err
	})
}

var errNotExecuted = errors.New("the pipeline was not executed")

// stop marks the permit released, stops its fence and its keep-alive, and
// reports whether it was held until now (false on nil or released).
func (p *Permit) stop() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	if p.released {
		p.mu.Unlock()
		return false
	}
	p.released = true
	p.fence.Stop()
	keeper, keeperEnd := p.keeper, p.keeperEnd
	p.mu.Unlock()
	if keeper != nil {
		keeper()
		<-keeperEnd
	}
	return true
}

// recorded is the outcome SetOutcome recorded.
func (p *Permit) recorded() Outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outcome
}

// settle turns what the release found (whether the entry was still there,
// or a Redis error) into Release's result.
func (p *Permit) settle(present bool, err error) error {
	if err != nil {
		return err
	}
	if p.ctx.Err() != nil || !present {
		p.lose(ErrPermitLost)
		return ErrPermitLost
	}
	return nil
}

// releaseCtx is ctx, or when ctx is already done a context that is not,
// limited to 2 s: a stopped crawl must still give its slots back.
func releaseCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		return context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	}
	return ctx, func() {}
}
