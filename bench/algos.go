// Package bench measures the limiter and the crawler against their physical
// limits and against peers, side by side in one run, and writes a report a
// person can read (BENCHMARKS.md and SVG charts). crawler bench wires it.
package bench

import (
	"context"
	"fmt"
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
)

// Algorithms lists them in report order.
var Algorithms = []string{AlgLocked, AlgAtomic, AlgBookLocked, AlgBookFair}

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
