package limiter

import (
	"context"
	"slices"
	"sync"
	"time"
)

// maxBatch bounds how many callers one hold of the site lock enters: it
// bounds the pipeline and how long the lock is held.
const maxBatch = 256

// stuckLock is how long a site lock can stay taken before its holder counts
// as stalled: a live one holds it for a round trip (two when the node
// lacks the script).
const stuckLock = 20 * time.Millisecond

// gates queue a process's ModeLocked callers per site, so that only one
// goroutine per process and site asks Redis for the site lock at a time.
//
// Fairness rule: callers in one process take their places in the order they
// called (a FIFO queue), and one hold of the site lock enters everyone
// queued when it was won, in that order, up to maxBatch. Across processes,
// places go in the order the processes win the site lock: each process's
// one contender retries at a steady jittered interval (not a growing one,
// which would let a newcomer overtake a contender that has waited longer),
// slower only once the same lock (the same token) has been held past
// stuckLock, so a process stalled or dead holds it. Losing a busy lock that
// changes hands never slows a contender down. That is the best the lock
// offers: which contender wins when it comes free is up to Redis, not who
// waited longest, so across processes ModeLocked is not first come, first
// served.
// So a burst of n callers in a process costs Redis about n/maxBatch lock
// rounds, not n callers spinning on the lock.
type gates struct {
	mu sync.Mutex
	m  map[string]*gate // by site; present only while a leader or a queue is
}

// busy reports whether a caller of this process is entering site's line
// (queued in its gate, or leading a batch).
func (g *gates) busy(site string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[site] != nil
}

type gate struct {
	queue   []*ticket
	leading bool // a goroutine is entering a batch for this site
}

// ticket is one caller's request for a place, waiting in a gate.
type ticket struct {
	id    string
	rule  Rule
	queue bool
	out   chan ticketResult // buffered: the outcome, or the lead
	gone  bool              // gates.mu: the caller left (ctx done) after its ticket was taken
}

type ticketResult struct {
	o    outcome
	err  error
	lead bool // no outcome yet: the receiver is to enter the next batch
}

// enterLocked gives id a place in site's semaphore in ModeLocked, through
// the site's gate: the caller either waits for a batch entered by another
// goroutine of this process, or enters one itself (lockBatch).
func (l *Limiter) enterLocked(ctx context.Context, k keys, id string, rule Rule, queue bool) (outcome, error) {
	t := &ticket{id: id, rule: rule, queue: queue, out: make(chan ticketResult, 1)}
	g := &l.gates
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*gate{}
	}
	s := g.m[k.site]
	if s == nil {
		s = &gate{}
		g.m[k.site] = s
	}
	s.queue = append(s.queue, t)
	lead := !s.leading
	s.leading = true
	g.mu.Unlock()
	for {
		if lead {
			r, done := l.lead(ctx, k, t)
			if done && r.err == nil && ctx.Err() != nil {
				// The batch went ahead for the others after our caller left.
				l.undo(k, t, r.o)
				done = false
			}
			if !done {
				return outcome{}, ctx.Err()
			}
			return r.o, r.err
		}
		select {
		case r := <-t.out:
			if r.lead {
				lead = true
				continue
			}
			return r.o, r.err
		case <-ctx.Done():
			l.abandon(k, t)
			return outcome{}, ctx.Err()
		}
	}
}

// lockWatch tells a site lock that changes hands from one that stays taken.
type lockWatch struct {
	holder string    // the token of the lock that beat us last
	since  time.Time // when we first saw that token
}

// stuck reports whether the lock that beat us at now, held under token h,
// is the same lock we have seen taken for longer than stuckLock. A new
// token (a busy lock changing hands) starts the count again; an unknown
// one ("") never counts as stuck.
func (w *lockWatch) stuck(h string, now time.Time) bool {
	if h != w.holder || h == "" {
		w.holder, w.since = h, now
	}
	return h != "" && now.Sub(w.since) > stuckLock
}

// lead enters batches for k's queue, starting with the one that holds own,
// until own has its outcome (done) or ctx ends while the site lock is taken
// by another process (not done: own has left the queue and another caller
// leads). Either way it hands the lead to the next queued caller.
func (l *Limiter) lead(ctx context.Context, k keys, own *ticket) (r ticketResult, done bool) {
	g := &l.gates
	var batch []*ticket
	var watch lockWatch
	for {
		g.mu.Lock()
		s := g.m[k.site]
		batch = slices.DeleteFunc(batch, func(t *ticket) bool { return t.gone })
		n := min(len(s.queue), maxBatch-len(batch))
		batch = append(batch, s.queue[:n]...)
		s.queue = slices.Delete(s.queue, 0, n)
		g.mu.Unlock()

		outs, h, err := l.lockBatch(context.WithoutCancel(ctx), k, batch)
		if err != nil || outs != nil {
			return l.deliver(k, own, batch, outs, err), true
		}
		// Contended: another process holds the site lock, while its script
		// runs when it is alive. Wait a steady jittered interval; the batch
		// grows meanwhile. Only the same lock (the same token) held past
		// stuckLock was left by a process that stalled or died and lasts
		// until its TTL: then look less often. A busy lock that changes
		// hands keeps us at the fast pace, the pace newcomers poll at, so
		// a process that has waited longer is not overtaken for having
		// waited.
		pause := jitter(200*time.Microsecond, time.Millisecond)
		if watch.stuck(h, time.Now()) {
			pause = jitter(5*time.Millisecond, 10*time.Millisecond)
		}
		wait := time.NewTimer(pause)
		select {
		case <-wait.C:
			continue
		case <-l.hub.done:
			wait.Stop()
			return l.deliver(k, own, batch, nil, ErrClosed), true
		case <-ctx.Done():
			wait.Stop()
		}
		// Our caller left: the others go back to the front of the line, in
		// order, and the first of them leads.
		g.mu.Lock()
		rest := slices.DeleteFunc(batch, func(t *ticket) bool { return t == own || t.gone })
		s.queue = append(rest, s.queue...)
		l.handOffLocked(k)
		g.mu.Unlock()
		return ticketResult{}, false
	}
}

// deliver hands each ticket of batch its outcome (or err), hands the lead to
// the next queued caller, and returns own's. A caller that left meanwhile
// gets none: the entry written for it is taken out again, after the hand-off,
// so the next batch does not wait for it.
func (l *Limiter) deliver(k keys, own *ticket, batch []*ticket, outs []outcome, err error) ticketResult {
	var mine ticketResult
	var undo []int
	g := &l.gates
	g.mu.Lock()
	for i, t := range batch {
		r := ticketResult{err: err}
		if err == nil {
			r.o = outs[i]
		}
		switch {
		case t == own:
			mine = r
		case t.gone:
			undo = append(undo, i)
		default:
			t.out <- r
		}
	}
	l.handOffLocked(k)
	g.mu.Unlock()
	if err == nil {
		for _, i := range undo {
			l.undo(k, batch[i], outs[i])
		}
	}
	return mine
}

// handOffLocked gives the lead to the first queued caller, or closes the
// gate. gates.mu is held.
func (l *Limiter) handOffLocked(k keys) {
	s := l.gates.m[k.site]
	if len(s.queue) == 0 {
		delete(l.gates.m, k.site)
		return
	}
	s.queue[0].out <- ticketResult{lead: true}
}

// abandon takes t out of its gate when its caller leaves. If t was already
// in a batch, the leader undoes its entry; if its outcome had already come,
// it is undone here; if the lead had come, it passes on.
func (l *Limiter) abandon(k keys, t *ticket) {
	g := &l.gates
	g.mu.Lock()
	s := g.m[k.site]
	if s != nil {
		if i := slices.Index(s.queue, t); i >= 0 {
			s.queue = slices.Delete(s.queue, i, i+1)
		}
	}
	t.gone = true
	var r ticketResult
	got := false
	select {
	case r = <-t.out:
		got = true
	default:
	}
	if got && r.lead {
		// We were the head of the queue, given the lead: pass it on.
		l.handOffLocked(k)
		got = false
	}
	g.mu.Unlock()
	if got && r.err == nil {
		l.undo(k, t, r.o)
	}
}

// undo removes the entry written for a caller that left before it was told
// (best effort; a place that cannot be removed expires after one lease). A
// granted permit was never used, so its removal starts no crawl delay.
func (l *Limiter) undo(k keys, t *ticket, o outcome) {
	if o.state == stGranted || o.state == stQueued {
		l.giveUp(k, t.id, t.rule)
	}
}
