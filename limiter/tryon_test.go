package limiter

import (
	"errors"
	"testing"
)

// A release and a try for the same site's next permit on one pipeline: one
// round trip in ModeAtomic, and the release's slot goes to the try; on a
// full site the try is refused at once and leaves nothing in the line; a
// waiter already in the line keeps its turn.
func TestTryAcquireRuleOn(t *testing.T) {
	ctx := ctxT(t)
	rt := &roundTrips{}
	rdb := newClient(t)
	rdb.AddHook(rt)
	prefix := testPrefix(t)
	l := newLimiter(t, rdb, Options{Mode: ModeAtomic, Prefix: prefix})
	other := newLimiter(t, newClient(t), Options{Mode: ModeAtomic, Prefix: prefix})
	if !l.Pipelines() {
		t.Fatal("ModeAtomic does not pipeline its try")
	}
	loadScripts(t, ctx, l)
	rule := Rule{Limit: 2}
	a, err := l.AcquireRule(ctx, "on.example", rule)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.AcquireRule(ctx, "on.example", rule)
	if err != nil {
		t.Fatal(err)
	}

	// Full: refused, nothing left behind.
	if p, err := l.TryAcquireRuleOn(ctx, rdb.Pipeline(), "on.example", rule)(); err == nil || p != nil {
		t.Fatal("after, the pipeline never run, gave a permit")
	}
	pipe := rdb.Pipeline()
	after := l.TryAcquireRuleOn(ctx, pipe, "on.example", rule)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var busy *BusyError
	if p, err := after(); !errors.As(err, &busy) || !busy.Full || p != nil {
		t.Fatalf("try on a full site: %v, %v; want a full BusyError", p, err)
	}
	if h, o := members(t, rdb, l, "on.example"); len(h) != 2 || len(o) != 2 {
		t.Fatalf("the refused try left entries: holders %v owners %v", h, o)
	}

	// A's release and the try in one round trip: the try gets A's slot.
	rt.reset()
	pipe = rdb.Pipeline()
	released := a.ReleaseOn(ctx, pipe)
	after = l.TryAcquireRuleOn(ctx, pipe, "on.example", rule)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := released(); err != nil {
		t.Fatal(err)
	}
	c, err := after()
	if err != nil {
		t.Fatalf("try after the release: %v", err)
	}
	if single, pipes, inPipes, names := rt.counts(); single != 0 || pipes != 1 || inPipes != 2 {
		t.Fatalf("release and try cost %d single commands %v and %d pipelines of %d commands, want one pipeline of 2", single, names, pipes, inPipes)
	}
	if c.Rule() != rule || c.Err() != nil || !c.TookLastSlot() {
		t.Fatalf("permit: rule %v err %v last slot %v", c.Rule(), c.Err(), c.TookLastSlot())
	}
	if h, _ := members(t, rdb, l, "on.example"); len(h) != 2 {
		t.Fatalf("holders %v, want b and c", h)
	}

	// A waiter in line (another process) keeps its turn: B's slot is its.
	got := waiter(ctx, other, "on.example", rule.Limit)
	waitFor(t, "waiter to queue", func() bool { _, o := members(t, rdb, l, "on.example"); return len(o) == 3 })
	pipe = rdb.Pipeline()
	released = b.ReleaseOn(ctx, pipe)
	after = l.TryAcquireRuleOn(ctx, pipe, "on.example", rule)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := released(); err != nil {
		t.Fatal(err)
	}
	if p, err := after(); !errors.As(err, &busy) || p != nil {
		t.Fatalf("try with a waiter in line: %v, %v; want refused", p, err)
	}
	wantGranted(t, got)
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wantNoEntries(t, rdb, l, "on.example", "")
}

// ModeLocked cannot fold its acquire into a pipeline: TryAcquireRuleOn
// queues nothing and after takes the permit in its own round trips; bad
// arguments are TryAcquireRule's errors.
func TestTryAcquireRuleOnLocked(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{Mode: ModeLocked})
	if l.Pipelines() {
		t.Fatal("ModeLocked says it pipelines its try")
	}
	pipe := rdb.Pipeline()
	after := l.TryAcquireRuleOn(ctx, pipe, "locked.example", Rule{Limit: 1})
	if pipe.Len() != 0 {
		t.Fatalf("%d commands queued", pipe.Len())
	}
	p, err := after()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	if q, err := l.TryAcquireRuleOn(ctx, pipe, "locked.example", Rule{Limit: 1})(); !errors.Is(err, ErrBusy) || q != nil {
		t.Fatalf("second try: %v, %v; want busy", q, err)
	}
	if _, err := l.TryAcquireRuleOn(ctx, pipe, "locked.example", Rule{Limit: 0})(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("limit 0: %v, want ErrInvalid", err)
	}
}

// A node without the acquire script (restarted, FUNCTION FLUSH): after runs
// it alone, and the permit is granted all the same.
func TestTryAcquireRuleOnNoScript(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	l := newLimiter(t, rdb, Options{Mode: ModeAtomic})
	loadScripts(t, ctx, l)
	forgetScripts(t, ctx, rdb)
	pipe := rdb.Pipeline()
	after := l.TryAcquireRuleOn(ctx, pipe, "noscript.example", Rule{Limit: 1})
	pipe.Exec(ctx) // Function not found: after's to deal with
	p, err := after()
	if err != nil || p.Err() != nil {
		t.Fatalf("after the function was lost: %v, %v", err, p.Err())
	}
	if h, _ := members(t, rdb, l, "noscript.example"); len(h) != 1 || h[0] != p.ID() {
		t.Fatalf("holders %v, want %s", h, p.ID())
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
