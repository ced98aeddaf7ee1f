package limiter

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// keepOn runs p.KeepOn(next) on a pipeline of its own and returns what
// released and kept give.
func keepOn(t *testing.T, rdb redis.UniversalClient, p *Permit, next Rule) (error, *Permit, error) {
	t.Helper()
	ctx := ctxT(t)
	pipe := rdb.Pipeline()
	released, kept := p.KeepOn(ctx, pipe, next)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := kept()
	return released(), q, err
}

// A release that keeps its slot: one script call in one round trip; the
// same entry holds the slot, its lease renewed, under the rule asked for;
// the kept permit releases like any other.
func TestKeepOn(t *testing.T) {
	ctx := ctxT(t)
	rt := &roundTrips{}
	rdb := newClient(t)
	rdb.AddHook(rt)
	l := newLimiter(t, rdb, Options{Mode: ModeAtomic, Lease: 2 * time.Second})
	loadScripts(t, ctx, l)
	a, err := l.AcquireRule(ctx, "keep.example", Rule{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.AcquireRule(ctx, "keep.example", Rule{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	before := a.Deadline()
	time.Sleep(20 * time.Millisecond) // so that the renewed lease ends later
	rt.reset()
	released, k, err := keepOn(t, rdb, a, Rule{Limit: 3})
	if released != nil || err != nil {
		t.Fatalf("keep: released %v, kept %v", released, err)
	}
	if single, pipes, inPipes, names := rt.counts(); single != 0 || pipes != 1 || inPipes != 1 {
		t.Fatalf("keep cost %d single commands %v and %d pipelines of %d commands, want one pipeline of 1", single, names, pipes, inPipes)
	}
	if k.ID() != a.ID() || k.Err() != nil || k.Rule() != (Rule{Limit: 3}) || k.TookLastSlot() {
		t.Fatalf("kept: id %s (was %s), err %v, rule %v, last slot %v", k.ID(), a.ID(), k.Err(), k.Rule(), k.TookLastSlot())
	}
	if !k.Deadline().After(before) {
		t.Fatalf("kept deadline %v, not after the old %v", k.Deadline(), before)
	}
	kk := keysFor(l.opts.prefix(), "keep.example")
	if at, was := rdb.ZScore(ctx, kk.holders, a.ID()).Val(), rdb.ZScore(ctx, kk.holders, b.ID()).Val(); at <= was {
		t.Fatalf("the kept entry's lease was not renewed in Redis: %v, b's %v", at, was)
	}
	if last := rdb.ZRange(ctx, kk.owners, -1, -1).Val(); len(last) != 1 || last[0] != a.ID() {
		t.Fatalf("the kept entry is not at the back of the line: owners end with %v", last)
	}
	if h, o := members(t, rdb, l, "keep.example"); len(h) != 2 || len(o) != 2 {
		t.Fatalf("holders %v owners %v, want a and b", h, o)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("the old permit's Release after a keep: %v", err)
	}
	if h, _ := members(t, rdb, l, "keep.example"); len(h) != 2 {
		t.Fatalf("the old permit's Release freed the kept slot: holders %v", h)
	}
	// B keeps the last of a tighter rule's two slots: it took the last slot.
	_, kb, err := keepOn(t, rdb, b, Rule{Limit: 2})
	if err != nil || !kb.TookLastSlot() {
		t.Fatalf("keep of the last slot: %v, last slot %v", err, kb.TookLastSlot())
	}
	for _, p := range []*Permit{k, kb} {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantNoEntries(t, rdb, l, "keep.example", "")
}

// A slot is not kept, but released, whenever a newcomer could not have had
// it: a waiter in line gets it, a tighter rule leaves no room, a hold-off
// runs, or the entry is gone.
func TestKeepOnRefused(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	prefix := testPrefix(t)
	l := newLimiter(t, rdb, Options{Mode: ModeAtomic, Prefix: prefix})
	other := newLimiter(t, newClient(t), Options{Mode: ModeAtomic, Prefix: prefix})
	const site = "refuse.example"
	var busy *BusyError

	// A waiter in line (another process) gets the slot.
	a, err := l.AcquireRule(ctx, site, Rule{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := waiter(ctx, other, site, 1)
	waitFor(t, "waiter to queue", func() bool { _, o := members(t, rdb, l, site); return len(o) == 2 })
	released, k, err := keepOn(t, rdb, a, Rule{Limit: 1})
	if released != nil || !errors.As(err, &busy) || k != nil {
		t.Fatalf("keep with a waiter in line: released %v, kept %v, %v; want released and refused", released, k.ID(), err)
	}
	wantGranted(t, got)

	// A waiter held to a lower limit (a robots.txt fetch's 1) waits behind
	// a holder of a higher one: a keep puts the holder behind it, as a
	// release and a new try would, and so lets it in.
	a, err = l.AcquireRule(ctx, site, Rule{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	polling := newLimiter(t, newClient(t), Options{Mode: ModeAtomic, Prefix: prefix, Poll: 20 * time.Millisecond})
	got = waiter(ctx, polling, site, 1)
	waitFor(t, "waiter to queue", func() bool { _, o := members(t, rdb, l, site); return len(o) == 2 })
	_, k, err = keepOn(t, rdb, a, Rule{Limit: 2})
	if err != nil {
		t.Fatalf("keep under limit 2 of 2: %v", err)
	}
	wantGranted(t, got)
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A crawl delay this release starts: no start before its end.
	a, err = l.AcquireRule(ctx, site, Rule{Limit: 2, Delay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, k, err := keepOn(t, rdb, a, Rule{Limit: 2}); !errors.As(err, &busy) || k != nil {
		t.Fatalf("keep as the release starts a crawl delay: %s, %v; want refused", k.ID(), err)
	}
	time.Sleep(60 * time.Millisecond)

	// ModeLocked's site lock held (another process's acquire under way).
	a, err = l.AcquireRule(ctx, site, Rule{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	kk := keysFor(l.opts.prefix(), site)
	if err := rdb.Set(ctx, kk.lock, "someone", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, k, err := keepOn(t, rdb, a, Rule{Limit: 2}); !errors.As(err, &busy) || k != nil {
		t.Fatalf("keep under another's site lock: %s, %v; want refused", k.ID(), err)
	}
	if err := rdb.Del(ctx, kk.lock).Err(); err != nil {
		t.Fatal(err)
	}

	// A tighter rule: another holder already fills it.
	a, err = l.AcquireRule(ctx, site, Rule{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.AcquireRule(ctx, site, Rule{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, k, err := keepOn(t, rdb, a, Rule{Limit: 1}); !errors.As(err, &busy) || k != nil {
		t.Fatalf("keep beyond a tighter rule: %v, %v; want refused", k.ID(), err)
	}
	if h, _ := members(t, rdb, l, site); len(h) != 1 || h[0] != b.ID() {
		t.Fatalf("holders %v, want only b", h)
	}

	// A hold-off (a Backoff) runs: no new start, so no keep either.
	if err := l.Backoff(ctx, site, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, k, err := keepOn(t, rdb, b, Rule{Limit: 2}); !errors.As(err, &busy) || k != nil {
		t.Fatalf("keep in a hold-off: %v, %v; want refused", k.ID(), err)
	}
	wantNoEntries(t, rdb, l, site, "")

	// The entry is gone (its keys lost): the permit is lost, nothing kept.
	c, err := l.AcquireRule(ctx, "gone.example", Rule{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	kk = keysFor(l.opts.prefix(), "gone.example")
	if err := rdb.Del(ctx, kk.holders, kk.owners).Err(); err != nil {
		t.Fatal(err)
	}
	released, k, err = keepOn(t, rdb, c, Rule{Limit: 1})
	if !errors.Is(released, ErrPermitLost) || !errors.As(err, &busy) || k != nil {
		t.Fatalf("keep of a lost entry: released %v, kept %v, %v; want ErrPermitLost and refused", released, k.ID(), err)
	}
	wantNoEntries(t, rdb, l, "gone.example", "the refused keep left entries")
}

// With a contributor (Rule.From), a keep records its rule and is ceiled by
// the site's other contributors, as an acquire is.
func TestKeepOnCeiling(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{Mode: ModeAtomic})
	const site = "ceiled.example"
	strict, err := l.AcquireRule(ctx, site, Rule{Limit: 1, From: "strict.ceiled.example"})
	if err != nil {
		t.Fatal(err)
	}
	if err := strict.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mine := Rule{Limit: 3, From: "www.ceiled.example"}
	a, err := l.AcquireRule(ctx, site, mine)
	if err != nil {
		t.Fatal(err)
	}
	_, k, err := keepOn(t, rdb, a, mine)
	if err != nil {
		t.Fatal(err)
	}
	if r := k.Rule(); r.Limit != 1 || r.From != mine.From {
		t.Fatalf("kept under %+v, want the site's ceiling, limit 1, from %s", r, mine.From)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// ModeLocked keeps too, unless a caller of this process is entering the
// site's line (its gate is busy): then KeepOn queues the release alone and
// kept is refused, so that caller goes first. A nil permit keeps nothing.
func TestKeepOnLocked(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{Mode: ModeLocked})
	const site = "locked-keep.example"
	a, err := l.AcquireRule(ctx, site, Rule{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, k, err := keepOn(t, rdb, a, Rule{Limit: 1})
	if err != nil || k.ID() != a.ID() {
		t.Fatalf("locked keep with the gate idle: %s, %v; want %s kept", k.ID(), err, a.ID())
	}

	// A caller of this process entering the site's line.
	l.gates.mu.Lock()
	l.gates.m = map[string]*gate{site: {leading: true}}
	l.gates.mu.Unlock()
	pipe := rdb.Pipeline()
	released, kept := k.KeepOn(ctx, pipe, Rule{Limit: 1})
	if pipe.Len() != 1 {
		t.Fatalf("%d commands queued, want the release", pipe.Len())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var busy *BusyError
	if q, err := kept(); released() != nil || !errors.As(err, &busy) || q != nil {
		t.Fatalf("keep past a busy gate: %s, %v; want released and refused", q.ID(), err)
	}
	wantNoEntries(t, rdb, l, site, "")
	l.gates.mu.Lock()
	delete(l.gates.m, site)
	l.gates.mu.Unlock()

	var nilPermit *Permit
	released, kept = nilPermit.KeepOn(ctx, rdb.Pipeline(), Rule{Limit: 1})
	if _, err := kept(); released() != nil || !errors.Is(err, ErrPermitLost) {
		t.Fatalf("nil permit: %v", err)
	}
}

// A node without the release script (restarted, FUNCTION FLUSH): released
// and kept share the script's one run alone, and the slot is kept.
func TestKeepOnNoScript(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{Mode: ModeAtomic})
	a, err := l.AcquireRule(ctx, "noscript-keep.example", Rule{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	loadScripts(t, ctx, l)
	forgetScripts(t, ctx, rdb)
	pipe := rdb.Pipeline()
	released, kept := a.KeepOn(ctx, pipe, Rule{Limit: 1})
	pipe.Exec(ctx) // no function: released's and kept's to deal with
	k, err := kept()
	if err != nil || released() != nil || k.ID() != a.ID() {
		t.Fatalf("after the function was lost: kept %s, %v, released %v", k.ID(), err, released())
	}
	if h, _ := members(t, rdb, l, "noscript-keep.example"); len(h) != 1 || h[0] != a.ID() {
		t.Fatalf("holders %v, want %s", h, a.ID())
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
