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

// enterLocked is the Redis in Action 6.3 acquire, guarded by the site lock,
// in two pipelined round trips:
//
//  1. SET lock token NX PX; the server time of the site's node and its
//     restart guard (time.lua); GET counter.
//  2. Drop expired entries (ZREMRANGEBYSCORE holders, ZINTERSTORE owners =
//     owners ∩ holders WEIGHTS 1 0); ZCARD owners; read the crawl-delay mark;
//     take counter+1 (SET counter); ZADD holders now; ZADD owners counter+1;
//     release the lock by compare-and-delete.
//
// The book INCRs the counter and reads the rank with ZRANK after adding. Here
// the counter is read in step 1: once our SET NX succeeds nothing else can
// change it (ModeLocked needs the lock, ModeAtomic backs off while it is
// held), so counter+1 is above every score in owners and our rank is the
// count of owners before we add ourselves. That saves a round trip.
//
// The compare-and-delete proves the lock was ours from step 1 to the end of
// step 2 (a random token cannot vanish and come back), so no other entry took
// a counter in between. If it was not (we stalled past LockTTL), our place may
// be out of order: we take it out and report contention, and the caller
// retries. TryAcquire on a full site also takes its entry out again: a third
// round trip, only on that path.
func (l *Limiter) enterLocked(ctx context.Context, k keys, id string, rule Rule, queue bool) (outcome, error) {
	lease, ttl := l.opts.lease(), l.keyTTL(rule)
	token := uuid.NewString()
	sent := l.opts.now()()

	pipe := l.rdb.Pipeline()
	locked := pipe.SetNX(ctx, k.lock, token, l.opts.lockTTL())
	tm := pipe.Eval(ctx, timeYoungLua, []string{k.lock, k.counter}, l.opts.restartGuard(rule))
	counterCmd := pipe.Get(ctx, k.counter)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return outcome{}, fmt.Errorf("limiter: acquire %s: lock: %w", k.site, err)
	}
	if !locked.Val() {
		return outcome{state: stContended, wait: time.Millisecond, sent: sent}, nil
	}
	now, young, err := serverMillis(tm.Val())
	if err != nil {
		l.unlock(k, token)
		return outcome{}, fmt.Errorf("limiter: acquire %s: %w", k.site, err)
	}
	if young > 0 {
		l.unlock(k, token)
		return outcome{state: stYoung, rank: -1, wait: time.Duration(young) * time.Millisecond, sent: sent}, nil
	}
	counter := int64OrZero(counterCmd) + 1

	pipe = l.rdb.Pipeline()
	pipe.ZRemRangeByScore(ctx, k.holders, "-inf", strconv.FormatInt(now-ms(lease), 10))
	pipe.ZInterStore(ctx, k.owners, &redis.ZStore{Keys: []string{k.owners, k.holders}, Weights: []float64{1, 0}})
	card := pipe.ZCard(ctx, k.owners)
	nextCmd := pipe.Get(ctx, k.next)
	oldest := pipe.ZRangeWithScores(ctx, k.holders, 0, 0)
	pipe.Set(ctx, k.counter, counter, ttl)
	pipe.ZAdd(ctx, k.holders, redis.Z{Score: float64(now), Member: id})
	pipe.ZAdd(ctx, k.owners, redis.Z{Score: float64(counter), Member: id})
	pipe.PExpire(ctx, k.holders, ttl)
	pipe.PExpire(ctx, k.owners, ttl)
	unlocked := pipe.Eval(ctx, unlockLua, []string{k.lock}, token)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		l.drop(k, id)
		l.unlock(k, token)
		return outcome{}, fmt.Errorf("limiter: acquire %s: %w", k.site, err)
	}
	if n, _ := unlocked.Int64(); n != 1 {
		l.drop(k, id)
		return outcome{state: stContended, wait: time.Millisecond, sent: sent}, nil
	}
	rank, nextAt := int(card.Val()), int64OrZero(nextCmd)
	o := outcome{state: stQueued, rank: rank, sent: sent}
	if rank < rule.Limit && now >= nextAt {
		o.state = stGranted
		return o, nil
	}
	if !queue {
		l.drop(k, id)
		o.state = stBusy
	}
	// The same hint acquire.lua gives (wait_hint in common.lua).
	if rank < rule.Limit {
		o.wait = time.Duration(max(1, nextAt-now)) * time.Millisecond
	} else if z := oldest.Val(); len(z) > 0 {
		o.wait = time.Duration(max(1, int64(z[0].Score)+ms(lease)-now+1)) * time.Millisecond
	} else {
		o.wait = lease
	}
	return o, nil
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

// drop removes id from both sets, best effort: if this fails the entry
// expires after one lease.
func (l *Limiter) drop(k keys, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pipe := l.rdb.Pipeline()
	pipe.ZRem(ctx, k.owners, id)
	pipe.ZRem(ctx, k.holders, id)
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
