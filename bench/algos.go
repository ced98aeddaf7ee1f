// Package bench measures the limiter and the crawler against their physical
// limits and against peers, side by side in one run, and writes a report a
// person can read (BENCHMARKS.md and SVG charts). crawler bench wires it.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/polite-crawler/polite/internal/riabook"
	"github.com/polite-crawler/polite/limiter"
	"github.com/redis/go-redis/v9"
)

// Algorithm names what is measured.
const (
	AlgLocked     = "polite locked"
	AlgAtomic     = "polite atomic"
	AlgBookLocked = "book, lock-guarded (6.3.5)"
	AlgBookFair   = "book, unlocked fair (6.3.2)"
	// AlgTokenList is the hot site's physical anchor: the fastest hand-off
	// Redis can do, not a semaphore anyone should use (no leases, so a
	// crashed holder's token is gone for good).
	AlgTokenList = "token list (BLPOP/RPUSH)"
)

// algorithms lists them in report order.
var algorithms = []string{AlgLocked, AlgAtomic, AlgBookLocked, AlgBookFair}

// holder takes and gives back permits of one algorithm, blocking.
type holder interface {
	acquire(ctx context.Context, site string) (release func(), err error)
	close()
}

func newHolder(rdb *redis.Client, alg, prefix string, limit int) (holder, error) {
	switch alg {
	case AlgLocked, AlgAtomic:
		mode := limiter.ModeLocked
		if alg == AlgAtomic {
			mode = limiter.ModeAtomic
		}
		return &politeHolder{l: limiter.New(rdb, &limiter.Options{Mode: mode, Prefix: prefix}), limit: limit}, nil
	case AlgBookLocked, AlgBookFair:
		return &bookHolder{rdb: rdb, prefix: prefix, limit: limit, locked: alg == AlgBookLocked}, nil
	case AlgTokenList:
		return &tokenHolder{rdb: rdb, prefix: prefix}, nil
	}
	return nil, fmt.Errorf("bench: unknown algorithm %q", alg)
}

type politeHolder struct {
	l     *limiter.Limiter
	limit int
}

func (h *politeHolder) acquire(ctx context.Context, site string) (func(), error) {
	p, err := h.l.Acquire(ctx, site, h.limit)
	if err != nil {
		return nil, err
	}
	return func() { p.Release(context.WithoutCancel(ctx)) }, nil
}

func (h *politeHolder) close() { h.l.Close() }

// bookHolder polls the book's semaphore every millisecond, as its callers
// must: the book's functions never wait.
type bookHolder struct {
	rdb    *redis.Client
	prefix string
	limit  int
	locked bool
}

func (h *bookHolder) acquire(ctx context.Context, site string) (func(), error) {
	s := riabook.New(h.rdb, h.prefix+":"+site, h.limit, 10*time.Second)
	try := s.AcquireFair
	if h.locked {
		try = s.AcquireWithLock
	}
	id, err := riabook.Poll(ctx, time.Millisecond, try)
	if err != nil {
		return nil, err
	}
	return func() { s.ReleaseFair(context.WithoutCancel(ctx), id) }, nil
}

func (h *bookHolder) close() {}

// tokenKey is the Redis list that holds a site's tokens for AlgTokenList.
func tokenKey(prefix, site string) string { return prefix + ":{" + site + "}:tokens" }

// fillTokens makes a site's token list for AlgTokenList: it replaces
// whatever the key held with exactly limit tokens, which expire after ttl
// (longer than the run: BLPOP and RPUSH do not renew it).
func fillTokens(ctx context.Context, rdb redis.Cmdable, prefix, site string, limit int, ttl time.Duration) error {
	key := tokenKey(prefix, site)
	tokens := make([]any, limit)
	for i := range tokens {
		tokens[i] = "t" + strconv.Itoa(i)
	}
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.RPush(ctx, key, tokens...)
		p.PExpire(ctx, key, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("bench: token list %s: %w", key, err)
	}
	return nil
}

// tokenHolder takes a token with BLPOP (the server queues blocked callers
// first come, first served) and gives it back with RPUSH.
type tokenHolder struct {
	rdb    *redis.Client
	prefix string
}

// maxBlock bounds one BLPOP, below the client's read timeout (3 s), so a
// waiter sees its context end within maxBlock even without a deadline.
const maxBlock = time.Second

// acquire blocks until it pops a token or ctx is done; on failure it
// returns ctx.Err() (or Redis's error) and holds no token. Each BLPOP
// blocks at most until ctx's deadline, so a waiter never outlives it.
func (h *tokenHolder) acquire(ctx context.Context, site string) (func(), error) {
	key := tokenKey(h.prefix, site)
	for {
		block := maxBlock
		if dl, ok := ctx.Deadline(); ok {
			block = min(block, time.Until(dl))
		}
		if block < time.Millisecond || ctx.Err() != nil {
			return nil, cmp.Or(ctx.Err(), context.DeadlineExceeded)
		}
		kv, err := h.rdb.Do(ctx, "BLPOP", key, strconv.FormatFloat(block.Seconds(), 'f', 3, 64)).StringSlice()
		if errors.Is(err, redis.Nil) {
			continue // timed out: look at ctx again
		}
		if err == nil && len(kv) != 2 {
			err = fmt.Errorf("reply %q", kv)
		}
		if err != nil {
			return nil, fmt.Errorf("bench: BLPOP %s: %w", key, err)
		}
		token := kv[1]
		give := func() { h.rdb.RPush(context.WithoutCancel(ctx), key, token) }
		if ctx.Err() != nil { // popped as the run ended: not a grant
			give()
			return nil, ctx.Err()
		}
		return give, nil
	}
}

func (h *tokenHolder) close() {}
