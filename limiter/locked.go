package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/polite-crawler/polite/internal/luafn"
	"github.com/polite-crawler/polite/internal/luanums"
	"github.com/polite-crawler/polite/internal/ownedkey"
	"github.com/redis/go-redis/v9"
)

// lockBatch is the Redis in Action 6.3 acquire, guarded by the site lock,
// for the callers of one batch (see gates), in one round trip: a pipeline of
//
//  1. SET lock token NX PX GET: takes the lock, or names who holds it;
//  2. locked.lua, which does nothing unless the lock is ours: read the
//     server time of the site's node; drop expired entries when the
//     oldest holder has expired (ZREMRANGEBYSCORE holders, ZINTERSTORE
//     owners = owners ∩ holders WEIGHTS 1 0); ZCARD owners; read the
//     crawl-delay mark; take counters with INCRBY counter n (and, if that
//     created the counter, apply the restart guard, young.lua); ZADD
//     holders now; ZADD owners with those counters, in batch order; release
//     the lock.
//
// The script runs after the SET on the site's node, and checks the token
// first: every write happens while the lock is ours, as in the book, which
// takes the lock in a round trip of its own. When the node lacks the script
// and the lock was won, the library is loaded and the script run alone (or,
// as scripts, sent whole with EVAL): a round trip or two more. The
// script's reply decides when it ran: a pipeline that
// go-redis retried (a timeout) may find, in its SET, the lock its first
// attempt took, or another's taken since the script released ours.
//
// The book INCRs the counter and reads the rank with ZRANK after adding. Here
// nothing else adds an entry while we hold the lock (ModeLocked needs it,
// ModeAtomic backs off while it is held), so the i-th entry's rank is the
// count of owners before we add ours, plus the entries ahead of it in the
// batch. The counter is only ever raised (INCRBY), never set, so every new
// entry scores above every entry taken before, even if a worker stalled
// between taking the lock and running the script; the scores may leave
// gaps, which is harmless. The time is read in step 2, after the callers'
// clocks were read (sent): a permit's fence runs from before the time Redis
// records, as it must.
//
// If the lock is not ours by the time the script runs (another holds it,
// or we stalled past LockTTL), the script writes nothing: that is
// contention. Contention returns nil outcomes and no error; the caller
// retries. holder is the token of the lock that beat us in step 1, ""
// otherwise. TryAcquire entries that find the site full are taken out
// again: a second round trip, only on that path.
//
// The batch shares one restart guard and one key TTL, the largest its
// rules ask for. The rules of its tickets that have a contributor
// (Rule.From) are recorded in the same script, and those tickets are held to
// the site's ceiling it returns; the others to their own rules.
func (l *Limiter) lockBatch(ctx context.Context, k keys, ts []*ticket) (outs []outcome, holder string, err error) {
	lease := l.opts.lease()
	token := uuid.NewString()
	sent := l.opts.now()()
	args := l.lockedArgs(token, lease, ts)

	pipe := l.rdb.Pipeline()
	set := pipe.SetArgs(ctx, k.lock, token, redis.SetArgs{Mode: "NX", Get: true, TTL: l.opts.lockTTL()})
	run := lockedScript.Queue(ctx, l.fn, pipe, l.keyArgs(k), args...)
	pipe.Exec(ctx) // each command's outcome is read from it
	holder, serr := set.Result()
	// Ours: the SET took it, or a retried pipeline's SET found it taken by
	// its own first attempt.
	won := errors.Is(serr, redis.Nil) || (serr == nil && holder == token)
	v, err := run.Int64Slice()
	if won && luafn.Missing(err) {
		v, err = lockedScript.Rerun(ctx, l.fn, l.keyArgs(k), args...).Int64Slice()
	}
	switch {
	case err == nil && len(v) > 0 && v[0] != 0:
		// The script ran under our lock: its reply stands, whatever the
		// SET's said (a retried pipeline can find the lock its first
		// attempt took and the script already released).
	case serr != nil && !errors.Is(serr, redis.Nil):
		l.drop(k, ts) // the script may have run if the SET's reply alone was lost
		l.unlock(k, token)
		return nil, "", fmt.Errorf("limiter: acquire %s: lock: %w", k.site, serr)
	case !won:
		return nil, holder, nil // not ours: the script wrote nothing
	case err != nil:
		// The script may have stopped part way: take out what it wrote.
		l.drop(k, ts)
		l.unlock(k, token)
		return nil, "", fmt.Errorf("limiter: acquire %s: %w", k.site, err)
	}
	switch {
	case len(v) == 1 && v[0] == 0:
		return nil, "", nil // the lock was lost: nothing written
	case len(v) == 2 && v[0] == 2:
		// The restart guard: nothing written, the lock released.
		outs = make([]outcome, len(ts))
		for i := range outs {
			outs[i] = outcome{state: stYoung, rank: -1, wait: time.Duration(v[1]) * time.Millisecond, sent: sent, rule: ts[i].rule, eff: ts[i].rule}
		}
		return outs, "", nil
	case len(v) != 10 || v[0] != 1:
		l.drop(k, ts)
		l.unlock(k, token)
		return nil, "", fmt.Errorf("limiter: acquire %s: unexpected reply %v", k.site, v)
	}
	return l.lockedOutcomes(k, ts, v, sent), "", nil
}

// lockedArgs are locked.lua's ARGV for the batch ts under the lock token:
// the batch's one key TTL and restart guard (the largest its rules ask
// for), its contributors' rules, and its tickets' ids in batch order.
func (l *Limiter) lockedArgs(token string, lease time.Duration, ts []*ticket) []any {
	var ttl time.Duration
	var guard int64
	for _, t := range ts {
		ttl, guard = max(ttl, l.keyTTL(t.rule)), max(guard, l.opts.restartGuard(t.rule))
	}
	from := contributors(ts)
	n := []float64{msn(lease), msn(ttl), float64(guard), float64(len(from)), msn(l.opts.ruleMemory()), bit(l.adaptive)}
	for _, c := range from {
		n = append(n, float64(c.Limit), msn(c.Delay))
	}
	args := make([]any, 0, 2+len(from)+len(ts))
	args = append(args, token, luanums.Pack(n...))
	for _, c := range from {
		args = append(args, c.From)
	}
	for _, t := range ts {
		args = append(args, t.id)
	}
	return args
}

// lockedOutcomes are the batch's outcomes from locked.lua's reply v when it
// took entries: each ticket in batch order is granted while its rank is
// below its effective cap and the crawl delay has passed, else queued, or
// busy if it may not queue (TryAcquire). Busy tickets' entries are taken
// out again.
func (l *Limiter) lockedOutcomes(k keys, ts []*ticket, v []int64, sent time.Time) []outcome {
	outs := make([]outcome, len(ts))
	// Ranks count the entries kept ahead: a TryAcquire entry that is not
	// granted is taken out, so it holds no place.
	rank, nextAt, now := int(v[1]), v[2], v[5]
	front, back := time.Duration(v[3])*time.Millisecond, time.Duration(v[4])*time.Millisecond
	var out []*ticket
	for i, t := range ts {
		// A ticket with a contributor is held to the site's ceiling, which
		// its own rule, recorded in this script, is part of.
		// Every ticket is held to the site's health (its effective cap
		// and extra delay).
		rule := t.rule
		if rule.From != "" && v[6] > 0 {
			rule.Limit, rule.Delay = int(v[6]), time.Duration(v[7])*time.Millisecond
		}
		eff := rule.tightened(v[8], v[9])
		o := outcome{state: stQueued, rank: rank, sent: sent, rule: rule, eff: eff}
		switch {
		case rank < eff.Limit && now >= nextAt:
			o.state = stGranted
		case !t.queue:
			o.state = stBusy
			out = append(out, t)
		}
		switch {
		case o.state == stGranted:
		case rank < eff.Limit:
			o.wait = front // in front, waiting out the crawl delay
		default:
			o.wait = back
		}
		if o.state != stBusy {
			rank++
		}
		outs[i] = o
	}
	if len(out) > 0 {
		l.drop(k, out)
	}
	return outs
}

// contributors are the rules of a batch's tickets that have one (Rule.From),
// one per contributor in batch order, the strictest when a contributor's
// tickets ask differently.
func contributors(ts []*ticket) []Rule {
	var from []Rule
	for _, t := range ts {
		if t.rule.From == "" {
			continue
		}
		i := slices.IndexFunc(from, func(r Rule) bool { return r.From == t.rule.From })
		if i < 0 {
			from = append(from, t.rule)
			continue
		}
		from[i].Limit, from[i].Delay = min(from[i].Limit, t.rule.Limit), max(from[i].Delay, t.rule.Delay)
	}
	return from
}

// unlock releases the site lock if it is still ours, best effort: if this
// fails the lock expires after LockTTL.
func (l *Limiter) unlock(k keys, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ownedkey.Delete(ctx, l.rdb, k.lock, token)
}

// drop takes the tickets' entries out, best effort (if this fails they
// expire after one lease), as a waiter gives up (release.lua): a release
// made since locked.lua wrote them may have told one of them it had moved
// into the first limit places, and the entry taken out then tells those it
// lets in; plain ZREMs told nobody, and a waiter behind it sat until its
// poll with a slot free.
// All in one round trip.
func (l *Limiter) drop(k keys, ts []*ticket) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pipe := l.rdb.Pipeline()
	replies := make([]func() (string, error), len(ts))
	for i, t := range ts {
		replies[i] = l.releaseOn(ctx, pipe, k, l.leaveArgs(t.id, t.rule, false, Outcome{}), nil)
	}
	pipe.Exec(ctx) // each reply tells its outcome
	for i, t := range ts {
		v, err := replies[i]()
		l.left(k, t.rule, v, err, false) // wakes this process's waiters it lets in
	}
}
