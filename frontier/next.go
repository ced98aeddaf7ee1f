package frontier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Next takes the next URL of a ready site. It tries one shard (each call
// the next in turn); when that has nothing ready it reads all shards at
// once and takes from one that has. When none has, it returns ErrDone if
// the crawl is over, or else an *EmptyError saying how long until something
// may be (a deferred site comes back, or an item in flight could be handed
// out again). It costs one round trip when the shard tried has a ready
// site, and at most three otherwise (one or two more, about once a
// minute, when the process refreshes the crawl's keys while it finds
// nothing ready: keepIdle). After a Next that found nothing, the next one
// reads all shards first, or on a crawl of one shard takes from it without
// asking for any refresh: an idle worker's poll is one round trip (two
// about once a minute), which makes no key, so that a crawl deleted under
// an idle process stays deleted. An idle process keeps (keepIdle) only a
// crawl with URLs queued, in flight or past its page limit: one that is
// done expires its TTL after its last refresh.
func (f *Frontier) Next(ctx context.Context) (Item, error) {
	lay, err := f.layout(ctx)
	if err != nil {
		return Item{}, err
	}
	switch {
	case f.idle.Load() && len(lay.shards) == 1:
		return f.nextFrom(ctx, lay, lay.shards[0], true)
	case f.idle.Load():
		return f.elsewhere(ctx, lay, nil, nil)
	}
	return f.nextFrom(ctx, lay, lay.shards[int(f.cursor.Add(1)%uint32(len(lay.shards)))], false)
}

// NextNear is Next trying first the shard of site: a hand-out of an item
// of site said another site of its shard was ready (Item.More), so a
// worker roused by it takes that in one round trip, with no look at every
// shard first.
func (f *Frontier) NextNear(ctx context.Context, site string) (Item, error) {
	lay, err := f.layout(ctx)
	if err != nil {
		return Item{}, err
	}
	return f.nextFrom(ctx, lay, lay.of(site), false)
}

// nextFrom takes from shard sh, or, when it has nothing ready, from
// elsewhere. A quiet take (an idle process's, on a one-shard crawl: see
// Next) refreshes nothing, as a probe writes nothing; one that takes an
// item ends the process's idleness.
func (f *Frontier) nextFrom(ctx context.Context, lay *layout, sh *shard, quiet bool) (Item, error) {
	a, err := f.takeOn(ctx, sh, quiet)
	if err != nil {
		return Item{}, fmt.Errorf("frontier: next: %w", err)
	}
	if a.took == 1 {
		if quiet {
			f.idle.Store(false)
		}
		return a.it, nil
	}
	return f.elsewhere(ctx, lay, sh, a.empty)
}

// nextCall is next.lua's call on sh: a take, quiet or not (makeCall).
func (f *Frontier) nextCall(sh *shard, quiet bool) *call {
	return f.makeCall(nextScript, sh, nil, quiet, f.takeID(sh))
}

// takeOn takes the next item of shard sh (next.lua), in a round trip of the
// process's combined ones; a take that gets no answer is sent once more
// (again), so that an item it took is not left with nobody.
func (f *Frontier) takeOn(ctx context.Context, sh *shard, quiet bool) (answer, error) {
	c := f.nextCall(sh, quiet)
	f.pipelined(ctx, nil, c)
	a, err := f.answer(c)
	if unanswered(c.cmd.Err()) {
		a, err = f.again(ctx, c)
	}
	return a, err
}

// elsewhere is Next once shard tried (nil: none) has had nothing ready
// (empty is its answer): it probes every shard and takes from one that has
// a ready site or an item to hand out again.
func (f *Frontier) elsewhere(ctx context.Context, lay *layout, tried *shard, empty *EmptyError) (Item, error) {
	it, err := f.probeNext(ctx, lay, tried, empty)
	f.idle.Store(err != nil)
	if err != nil {
		f.keepIdle(ctx, lay, err)
	}
	return it, err
}

// keepIdle refreshes, when due, the TTLs of a crawl in which this process
// found nothing to take (err): no script call of its keeps them then, and
// a crawl whose every site waits out a long hold-off makes none anywhere,
// nor does one that waits for a run with a higher page limit. It refreshes
// the crawl's keys (keepCrawl) and each shard's at the process's interval,
// as calls on them would. Only a crawl with URLs queued, in flight or past
// its page limit: not one done, nor one deleted, whose keys that would
// make again.
func (f *Frontier) keepIdle(ctx context.Context, lay *layout, err error) {
	now, every := time.Now().UnixMilli(), f.refreshEvery().Milliseconds()
	due := func(sh *shard) bool { return now-sh.kept.Load() >= every }
	if !f.keepDue(now, f.keptAt.Load()) && !slices.ContainsFunc(lay.shards, due) {
		return
	}
	e, ok := err.(*EmptyError)
	switch {
	case ok && (e.Queued > 0 || e.InFlight > 0):
	case errors.Is(err, ErrDone) && f.overWaiting(ctx, lay):
	default:
		return
	}
	f.pipelined(ctx, nil, f.refreshes(lay, now, every)...)
}

// overWaiting reports whether URLs past the page limit wait in the crawl:
// as the last probe found (several shards), or as the only shard's counts
// say (one: its take was the look, and did not tell), read at most once an
// interval, so that a done crawl's idle poll stays one round trip.
func (f *Frontier) overWaiting(ctx context.Context, lay *layout) bool {
	if len(lay.shards) > 1 {
		return f.overLeft.Load()
	}
	now, last := time.Now().UnixMilli(), f.overAt.Load()
	if now-last < f.refreshEvery().Milliseconds() || !f.overAt.CompareAndSwap(last, now) {
		return f.overLeft.Load()
	}
	n, err := f.rdb.HGet(ctx, lay.shards[0].keys[2], "over").Int64()
	f.overLeft.Store(err == nil && n > 0)
	return f.overLeft.Load()
}

func (f *Frontier) probeNext(ctx context.Context, lay *layout, tried *shard, empty *EmptyError) (Item, error) {
	if len(lay.shards) == 1 && tried != nil {
		// The take on the only shard was the look.
		if empty.Queued <= 0 && empty.InFlight == 0 {
			return Item{}, ErrDone
		}
		return Item{}, empty
	}
	p, err := f.probe(ctx, lay)
	if err != nil {
		return Item{}, err
	}
	// The ready shard whose first site has waited longest: round robin
	// across shards as within one; the one just tried only if alone.
	var pick *shard
	for _, sh := range lay.shards {
		if p.readyIn[sh.n] != 0 {
			continue
		}
		if pick == nil || pick == tried || sh != tried && p.first[sh.n] < p.first[pick.n] {
			pick = sh
		}
	}
	if pick != nil {
		a, err := f.takeOn(ctx, pick, false)
		if err != nil {
			return Item{}, fmt.Errorf("frontier: next: %w", err)
		}
		if a.took == 1 {
			return a.it, nil
		}
		return Item{}, &EmptyError{Queued: p.queued, InFlight: p.inflight, Wait: time.Millisecond} // taken meanwhile
	}
	if p.queued <= 0 && p.inflight == 0 {
		// Seen empty everywhere, but the shards were read one after
		// another: a settlement may have queued links on a shard read
		// before it and left its own read after. A second look that finds
		// the same admissions and still nothing settles it. On a Cluster a
		// settlement's links to other shards travel to their nodes beside
		// it, not before it, so the second look waits doneSettle first:
		// far longer than one pipeline's spread across nodes.
		t := time.NewTimer(doneSettle)
		select {
		case <-ctx.Done():
			t.Stop()
			return Item{}, ctx.Err()
		case <-t.C:
		}
		again, err := f.probe(ctx, lay)
		if err != nil {
			return Item{}, err
		}
		if again.queued <= 0 && again.inflight == 0 && again.admitted == p.admitted {
			return Item{}, ErrDone
		}
		return Item{}, &EmptyError{Queued: again.queued, InFlight: again.inflight, Wait: time.Millisecond}
	}
	return Item{}, &EmptyError{Queued: p.queued, InFlight: p.inflight, Wait: p.wait}
}

// doneSettle is how long Next waits between the two looks that must both
// find the crawl empty before it says ErrDone (see elsewhere).
const doneSettle = 25 * time.Millisecond

// probed is all shards' state, read at once.
type probed struct {
	queued, inflight, admitted int64
	readyIn                    []time.Duration // by shard: until a site or an item may be handed out (-1: nothing)
	first                      []float64       // by shard: the score (server ms) of readyIn
	ready                      int             // shards with readyIn 0
	wait                       time.Duration   // the soonest readyIn above 0 (1s if none)
}

// parked is common.lua's PARKED score: a site at its cap scores it plus
// the server ms when it comes back. Sentinels score
// +inf; visibility deadlines are all below inflightMax.
const (
	parked      = 1e15
	inflightMax = "1e15"
)

// probe reads every shard's first ready score, first visibility deadline,
// counts of queued and admitted, and items in flight, in one read-only
// round trip.
func (f *Frontier) probe(ctx context.Context, lay *layout) (probed, error) {
	pipe := f.rdb.Pipeline()
	now := pipe.Time(ctx)
	type reads struct {
		ready, deadline *redis.ZSliceCmd
		counts          *redis.SliceCmd
		inflight        *redis.IntCmd
	}
	rs := make([]reads, len(lay.shards))
	for i, sh := range lay.shards {
		rs[i] = reads{
			ready:    pipe.ZRangeWithScores(ctx, sh.keys[0], 0, 0),
			deadline: pipe.ZRangeWithScores(ctx, sh.keys[1], 0, 0),
			counts:   pipe.HMGet(ctx, sh.keys[2], "admitted", "done", "failed", "scope", "over"),
			inflight: pipe.ZCount(ctx, sh.keys[1], "-inf", inflightMax),
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return probed{}, fmt.Errorf("frontier: next: probe: %w", err)
	}
	nowMs := float64(now.Val().UnixMilli())
	p := probed{readyIn: make([]time.Duration, len(lay.shards)), first: make([]float64, len(lay.shards)), wait: -1}
	var over int64
	for i, r := range rs {
		soon := -1.0
		if z := r.ready.Val(); len(z) > 0 && z[0].Score < parked {
			soon = z[0].Score
		} else if len(z) > 0 && z[0].Score < 2*parked {
			soon = z[0].Score - parked // parked at its cap: when it comes back
		}
		if z := r.deadline.Val(); len(z) > 0 && z[0].Score < parked && (soon < 0 || z[0].Score < soon) {
			soon = z[0].Score
		}
		p.first[i] = soon
		c := r.counts.Val()
		p.queued += num(c[0]) - num(c[1]) - num(c[2]) - r.inflight.Val()
		p.admitted += num(c[0])
		f.noteScopeLen(num(c[3]))
		over += num(c[4])
		p.inflight += r.inflight.Val()
		switch {
		case soon < 0:
			p.readyIn[i] = -1
		case soon <= nowMs+0.5: // common.lua's SOON
			p.ready++
		default:
			p.readyIn[i] = time.Duration(soon-nowMs) * time.Millisecond
			if p.wait < 0 || p.readyIn[i] < p.wait {
				p.wait = p.readyIn[i]
			}
		}
	}
	if p.wait < 0 {
		p.wait = time.Second
	}
	f.overLeft.Store(over > 0)
	return p, nil
}

// num reads a counter of an HMGET reply (nil: 0).
func num(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
