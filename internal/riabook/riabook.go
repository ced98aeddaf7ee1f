// Package riabook is a faithful Go port of the counting semaphores of Redis
// in Action, section 6.3, kept only as a comparator for crawler bench: the
// fair semaphore (6.3.2), and the same guarded by the lock of 6.2
// (acquire_semaphore_with_lock, 6.3.5). Like the book it uses the worker's
// own clock and polls; do not use it for anything else.
package riabook

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Semaphore names one semaphore's keys as the book does.
type Semaphore struct {
	rdb     *redis.Client
	name    string // the holders ZSET ("semname")
	limit   int
	timeout time.Duration
}

// New returns the book's semaphore semname with limit and timeout.
func New(rdb *redis.Client, semname string, limit int, timeout time.Duration) *Semaphore {
	return &Semaphore{rdb: rdb, name: semname, limit: limit, timeout: timeout}
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// AcquireFair is acquire_fair_semaphore: two pipelined round trips (three
// when it fails). It is not safe under contention: between INCR and ZADD
// another client can take a lower counter and both see a rank under limit.
func (s *Semaphore) AcquireFair(ctx context.Context) (string, error) {
	id := uuid.NewString()
	czset, ctr := s.name+":owner", s.name+":counter"
	t := now()
	pipe := s.rdb.TxPipeline()
	pipe.ZRemRangeByScore(ctx, s.name, "-inf", strconv.FormatFloat(t-s.timeout.Seconds(), 'f', -1, 64))
	pipe.ZInterStore(ctx, czset, &redis.ZStore{Keys: []string{czset, s.name}, Weights: []float64{1, 0}})
	incr := pipe.Incr(ctx, ctr)
	if _, err := pipe.Exec(ctx); err != nil {
		return "", err
	}
	counter := incr.Val()
	pipe = s.rdb.TxPipeline()
	pipe.ZAdd(ctx, s.name, redis.Z{Score: t, Member: id})
	pipe.ZAdd(ctx, czset, redis.Z{Score: float64(counter), Member: id})
	rank := pipe.ZRank(ctx, czset, id)
	if _, err := pipe.Exec(ctx); err != nil {
		return "", err
	}
	if rank.Val() < int64(s.limit) {
		return id, nil
	}
	pipe = s.rdb.TxPipeline()
	pipe.ZRem(ctx, s.name, id)
	pipe.ZRem(ctx, czset, id)
	_, err := pipe.Exec(ctx)
	return "", err
}

// ReleaseFair is release_fair_semaphore: one round trip.
func (s *Semaphore) ReleaseFair(ctx context.Context, id string) error {
	pipe := s.rdb.TxPipeline()
	pipe.ZRem(ctx, s.name, id)
	pipe.ZRem(ctx, s.name+":owner", id)
	_, err := pipe.Exec(ctx)
	return err
}

// AcquireWithLock is acquire_semaphore_with_lock: the lock (SETNX then
// EXPIRE: 2 round trips, with the book's 10 ms acquire timeout), the fair
// acquire (2), release_lock (WATCH, GET, MULTI DEL EXEC: 3): seven round
// trips. The book's prose has it reuse the lock with timeouts of 6.2.5
// (acquire_lock_with_timeout); its listing calls acquire_lock, whose 6.2.3
// form sets no expiry, which would leave a crashed worker's lock forever.
// We follow the prose. "" with no error means the lock or the semaphore
// was busy.
func (s *Semaphore) AcquireWithLock(ctx context.Context) (string, error) {
	lockID, err := s.acquireLock(ctx, 10*time.Millisecond, 10*time.Second)
	if err != nil || lockID == "" {
		return "", err
	}
	defer s.releaseLock(ctx, lockID)
	return s.AcquireFair(ctx)
}

func (s *Semaphore) acquireLock(ctx context.Context, acquireTimeout, lockTimeout time.Duration) (string, error) {
	id := uuid.NewString()
	lock := "lock:" + s.name
	end := time.Now().Add(acquireTimeout)
	for time.Now().Before(end) {
		ok, err := s.rdb.SetNX(ctx, lock, id, 0).Result()
		if err != nil {
			return "", err
		}
		if ok {
			return id, s.rdb.Expire(ctx, lock, lockTimeout).Err()
		}
		if ttl, err := s.rdb.TTL(ctx, lock).Result(); err == nil && ttl < 0 {
			s.rdb.Expire(ctx, lock, lockTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	return "", nil
}

// releaseLock is release_lock: WATCH, GET, then MULTI DEL EXEC, on one
// connection, three round trips as redis-py makes them (go-redis's Watch
// helper would add an UNWATCH). A lost race (WatchError) is retried, as
// the book does.
func (s *Semaphore) releaseLock(ctx context.Context, id string) error {
	lock := "lock:" + s.name
	conn := s.rdb.Conn()
	defer conn.Close()
	for {
		if err := conn.Do(ctx, "WATCH", lock).Err(); err != nil {
			return err
		}
		v, err := conn.Get(ctx, lock).Result()
		if err != nil || v != id {
			conn.Do(ctx, "UNWATCH")
			if errors.Is(err, redis.Nil) {
				return nil
			}
			return err
		}
		_, err = conn.TxPipelined(ctx, func(p redis.Pipeliner) error { return p.Del(ctx, lock).Err() })
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
}

// Poll acquires by retrying every interval until ctx ends, as a caller of the
// book's functions must (they never block).
func Poll(ctx context.Context, interval time.Duration, try func(context.Context) (string, error)) (string, error) {
	for {
		id, err := try(ctx)
		if err != nil || id != "" {
			return id, err
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}
