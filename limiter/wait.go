package limiter

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// errPlaceLost: a waiter's place expired (it missed its heartbeats); the
// caller joins the line again.
var errPlaceLost = errors.New("limiter: place in line lost")

// wait holds id's place in line until it reaches the front (a permit), ctx
// ends, or the Limiter closes. id was registered with the hub (grants)
// before its entry was written; wait ends the registration.
//
// Fairness rule: a place is a counter value, taken once when the waiter first
// enters the line and never lowered, and permits go to the lowest counters,
// so waiters are served in the order they took their places, whichever
// process they are in. ModeAtomic takes the place in the call's one round
// trip, so that is the order they asked. ModeLocked gives a process's
// callers their places in the order they called, but across processes in
// the order the processes won the site lock (see gates), which need not be
// the order their callers asked. A waiter keeps its place by heartbeating
// every Lease/3; one that stops (its process died) drops out after one lease
// and the line moves up.
//
// Wake-ups: the release that moves a waiter into the first `limit` places
// publishes the ids there, each on its process's channel (hub), and the
// waiter takes the permit without another round trip. Each time the
// process's subscription is made (the first time, or again after it was
// lost) every waiter looks again at once: messages published before it was
// live are lost. When no message comes (a holder died) the waiter looks
// again when Redis said the oldest lease can run out, at its next
// heartbeat, or after Options.Poll; one that a release under a higher
// limit than its own told, and that is still behind, every mixedPoll.
//
// own is the rule the caller asked for; the rule a waiter is held to is own
// tightened by the site's ceiling as the last visit to Redis found it
// (Rule.From), so a waiter that queued under a higher limit is held to a
// lower one recorded since, and one held to a ceiling that has since
// loosened is let in by it.
func (l *Limiter) wait(ctx context.Context, k keys, id string, own Rule, o outcome, grants <-chan grant) (*Permit, error) {
	rule, eff := o.rule, o.eff
	defer l.hub.leave(id)
	l.hub.listen()
	lease, poll, now := l.opts.lease(), l.opts.poll(), l.opts.now()
	beat, hint := o.sent, o.wait
	// mixed: a wake-up came from a release under a higher limit than
	// ours (a robots.txt fetch's 1 in a line of pages' 3). Such a release
	// tells nobody once the line fits under its own limit, so this waiter
	// could reach its turn untold: it looks every mixedPoll from then on.
	mixed := false
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		timer.Reset(max(min(hint, beat.Add(lease/3).Sub(now()), poll), 0))
		select {
		case <-ctx.Done():
			l.giveUp(k, id, rule)
			return nil, ctx.Err()
		case <-l.hub.done:
			l.giveUp(k, id, rule)
			return nil, ErrClosed
		case g := <-grants:
			if g.wait > 0 || g.limit > eff.Limit {
				hint = max(g.wait, time.Millisecond) // crawl delay, or another limit: check then
				mixed = mixed || g.limit > eff.Limit
				continue
			}
			// The releaser saw us among the first g.limit places, after
			// dropping expired entries; ranks only fall, so the permit is
			// ours, valid from our last confirmed heartbeat. We waited, so
			// the site was full and still is. Trust the message only while
			// that heartbeat is fresh; else confirm it with a check now.
			if now().Sub(beat) < lease/3 {
				return newPermit(l, k, id, rule, eff, beat, true), nil
			}
			hint = 0
			continue
		case <-timer.C:
		}
		o, err := l.check(ctx, k, id, own)
		if err != nil {
			l.giveUp(k, id, rule)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		switch o.state {
		case stGranted:
			return newPermit(l, k, id, o.rule, o.eff, o.sent, o.rank+1 >= o.eff.Limit), nil
		case stLost:
			return nil, errPlaceLost
		}
		beat, hint, rule, eff = o.sent, o.wait, o.rule, o.eff
		if mixed && o.rank >= o.eff.Limit {
			hint = min(hint, mixedPoll) // behind holders, not waiting out a delay Redis timed
		}
	}
}

// mixedPoll is how often a waiter in a line of higher limits than its own
// looks at its place (wait's mixed): a robots.txt fetch waits behind a
// site's pages for some of their fetches, a few looks a second.
const mixedPoll = 25 * time.Millisecond

// giveUp removes a waiter's place (which may already have reached the front:
// the release then lets the next one in). Best effort: if Redis does not
// answer, the place expires after one lease.
func (l *Limiter) giveUp(k keys, id string, rule Rule) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l.leave(ctx, k, id, rule, false, Outcome{})
}

// grant is a parsed wake-up message: the releaser's limit, and how long the
// named waiters must still wait (the crawl delay), in release.lua's format
// "<limit> <wait ms> <id>...".
type grant struct {
	limit int
	wait  time.Duration
}

func parseGrant(payload string) (grant, []string, bool) {
	f := strings.Fields(payload)
	if len(f) < 3 {
		return grant{}, nil, false
	}
	limit, err1 := strconv.Atoi(f[0])
	wait, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return grant{}, nil, false
	}
	return grant{limit: limit, wait: time.Duration(wait) * time.Millisecond}, f[2:], true
}

// sleep waits d. It returns nil after d, ctx.Err() if ctx is done first, or
// ErrClosed if closed is closed first; a nil closed never ends it.
func sleep(ctx context.Context, d time.Duration, closed <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return ErrClosed
	case <-t.C:
		return nil
	}
}

// jitter returns a random duration in [lo, max(lo, hi)].
func jitter(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}
