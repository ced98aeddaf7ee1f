package limiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// lockBatch is the Redis in Action 6.3 acquire, guarded by the site lock,
// for the callers of one batch (see gates), in two pipelined round trips:
//
//  1. SET lock token NX PX; the server time of the site's node and its
//     restart guard (time.lua); GET counter.
//  2. Drop expired entries (ZREMRANGEBYSCORE holders, ZINTERSTORE owners =
//     owners ∩ holders WEIGHTS 1 0); ZCARD owners; read the crawl-delay mark;
//     take counters counter+1 … counter+n (SET counter); ZADD holders now;
//     ZADD owners with those counters, in batch order; release the lock by
//     compare-and-delete.
//
// The book INCRs the counter and reads the rank with ZRANK after adding. Here
// the counter is read in step 1: once our SET NX succeeds nothing else can
// change it (ModeLocked needs the lock, ModeAtomic backs off while it is
// held), so counter+1 is above every score in owners and the i-th entry's
// rank is the count of owners before we add ours, plus the entries ahead of
// it in the batch. That saves a round trip.
//
// The compare-and-delete proves the lock was ours from step 1 to the end of
// step 2 (a random token cannot vanish and come back), so no other entry took
// a counter in between. If it was not (we stalled past LockTTL), our places
// may be out of order: we take them out and report contention. Contention
// returns nil outcomes and no error; the caller retries. TryAcquire entries
// that find the site full are taken out again: a third round trip, only on
// that path.
//
// The batch shares one restart guard and one key TTL, the largest its
// rules ask for.
func (l *Limiter) lockBatch(ctx context.Context, k keys, ts []*ticket) ([]outcome, error) {
	lease := l.opts.lease()
	var ttl time.Duration
	var guard int64
	for _, t := range ts {
		ttl, guard = max(ttl, l.keyTTL(t.rule)), max(guard, l.opts.restartGuard(t.rule))
	}
	token := uuid.NewString()
	sent := l.opts.now()()

	pipe := l.rdb.Pipeline()
	locked := pipe.SetNX(ctx, k.lock, token, l.opts.lockTTL())
	tm := pipe.Eval(ctx, timeYoungLua, []string{k.lock, k.counter}, guard)
	counterCmd := pipe.Get(ctx, k.counter)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("limiter: acquire %s: lock: %w", k.site, err)
	}
	if !locked.Val() {
		return nil, nil
	}
	outs := make([]outcome, len(ts))
	now, young, err := serverMillis(tm.Val())
	if err != nil {
		l.unlock(k, token)
		return nil, fmt.Errorf("limiter: acquire %s: %w", k.site, err)
	}
	if young > 0 {
		l.unlock(k, token)
		for i := range outs {
			outs[i] = outcome{state: stYoung, rank: -1, wait: time.Duration(young) * time.Millisecond, sent: sent}
		}
		return outs, nil
	}
	counter := int64OrZero(counterCmd)
	holders, owners := make([]redis.Z, len(ts)), make([]redis.Z, len(ts))
	for i, t := range ts {
		holders[i] = redis.Z{Score: float64(now), Member: t.id}
		owners[i] = redis.Z{Score: float64(counter + 1 + int64(i)), Member: t.id}
	}

	pipe = l.rdb.Pipeline()
	pipe.ZRemRangeByScore(ctx, k.holders, "-inf", strconv.FormatInt(now-ms(lease), 10))
	pipe.ZInterStore(ctx, k.owners, &redis.ZStore{Keys: []string{k.owners, k.holders}, Weights: []float64{1, 0}})
	card := pipe.ZCard(ctx, k.owners)
	nextCmd := pipe.Get(ctx, k.next)
	oldest := pipe.ZRangeWithScores(ctx, k.holders, 0, 0)
	pipe.Set(ctx, k.counter, counter+int64(len(ts)), ttl)
	pipe.ZAdd(ctx, k.holders, holders...)
	pipe.ZAdd(ctx, k.owners, owners...)
	pipe.PExpire(ctx, k.holders, ttl)
	pipe.PExpire(ctx, k.owners, ttl)
	unlocked := pipe.Eval(ctx, unlockLua, []string{k.lock}, token)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		l.drop(k, ts)
		l.unlock(k, token)
		return nil, fmt.Errorf("limiter: acquire %s: %w", k.site, err)
	}
	if n, _ := unlocked.Int64(); n != 1 {
		l.drop(k, ts)
		return nil, nil
	}
	// Ranks count the entries kept ahead: a TryAcquire entry that is not
	// granted is taken out, so it holds no place.
	rank, nextAt := int(card.Val()), int64OrZero(nextCmd)
	var out []*ticket
	for i, t := range ts {
		o := outcome{state: stQueued, rank: rank, sent: sent}
		switch {
		case rank < t.rule.Limit && now >= nextAt:
			o.state = stGranted
		case !t.queue:
			o.state = stBusy
			out = append(out, t)
		}
		if o.state != stGranted {
			o.wait = waitHint(now, lease, rank, t.rule.Limit, nextAt, oldest.Val())
		}
		if o.state != stBusy {
			rank++
		}
		outs[i] = o
	}
	if len(out) > 0 {
		l.drop(k, out)
	}
	return outs, nil
}

// waitHint is the hint acquire.lua gives (wait_hint in common.lua).
func waitHint(now int64, lease time.Duration, rank, limit int, nextAt int64, oldest []redis.Z) time.Duration {
	switch {
	case rank < limit:
		return time.Duration(max(1, nextAt-now)) * time.Millisecond
	case len(oldest) > 0:
		return time.Duration(max(1, int64(oldest[0].Score)+ms(lease)-now+1)) * time.Millisecond
	}
	return lease
}

// int64OrZero reads an integer reply; a missing key (redis.Nil) is 0.
func int64OrZero(c *redis.StringCmd) int64 {
	n, err := c.Int64()
	if err != nil {
		return 0
	}
	return n
}

// unlock releases the site lock if it is still ours, best effort: if this
// fails the lock expires after LockTTL.
func (l *Limiter) unlock(k keys, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.rdb.Eval(ctx, unlockLua, []string{k.lock}, token)
}

// drop removes the tickets' entries from both sets, best effort: if this
// fails they expire after one lease.
func (l *Limiter) drop(k keys, ts []*ticket) {
	ids := make([]any, len(ts))
	for i, t := range ts {
		ids[i] = t.id
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pipe := l.rdb.Pipeline()
	pipe.ZRem(ctx, k.owners, ids...)
	pipe.ZRem(ctx, k.holders, ids...)
	pipe.Exec(ctx)
}

// serverMillis converts time.lua's reply (seconds, microseconds, restart
// guard wait in ms) to the server time in milliseconds and the wait.
func serverMillis(v any) (now, young int64, err error) {
	parts, ok := v.([]any)
	if !ok || len(parts) != 3 {
		return 0, 0, fmt.Errorf("unexpected TIME reply %v", v)
	}
	var n [3]int64
	for i, p := range parts {
		var err error
		switch x := p.(type) {
		case string:
			n[i], err = strconv.ParseInt(x, 10, 64)
		case int64:
			n[i] = x
		default:
			err = fmt.Errorf("unexpected TIME field %T", p)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return n[0]*1000 + n[1]/1000, n[2], nil
}
