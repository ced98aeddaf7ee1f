package frontier

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// take takes n items, failing the test if any is not handed out.
func take(t *testing.T, f *Frontier, n int) []Item {
	t.Helper()
	var its []Item
	for range n {
		it, err := nextSoon(ctxT(t), f, 50*time.Millisecond)
		if err != nil {
			t.Fatalf("item %d of %d: %v", len(its)+1, n, err)
		}
		its = append(its, it)
	}
	return its
}

// notReady fails the test unless Next finds nothing ready.
func notReady(t *testing.T, f *Frontier, why string) *EmptyError {
	t.Helper()
	it, err := f.Next(ctxT(t))
	var empty *EmptyError
	if !errors.As(err, &empty) {
		t.Fatalf("%s: Next = %+v, %v; want nothing ready", why, it, err)
	}
	return empty
}

func urls(site string, n int) []string {
	var us []string
	for i := range n {
		us = append(us, fmt.Sprintf("http://%s/%d", site, i))
	}
	return us
}

// A site at its cap is not handed out until one of its items settles, and
// is the moment one does; it is still listed, and counted as queued.
func TestCapParksSite(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 2})
	f.Add(ctx, 0, urls("a.example", 5)...)
	held := take(t, f, 2)
	e := notReady(t, f, "2 in flight, cap 2")
	if e.Queued != 3 || e.InFlight != 2 {
		t.Fatalf("empty answer %+v; want 3 queued, 2 in flight", e)
	}
	sites, err := f.Sites(ctx)
	if err != nil || len(sites) != 1 || !sites[0].Full || sites[0].Queued != 3 {
		t.Fatalf("Sites() = %+v, %v; want a.example full with 3 queued", sites, err)
	}
	if st, _ := f.Stats(ctx); st.Queued != 3 || st.InFlight != 2 {
		t.Fatalf("stats %+v", st)
	}
	r := f.Settle(ctx, Settlement{Item: held[0], Outcome: Fetched, Next: true})
	if r.Settled != nil || r.NextErr != nil || r.Next.Site != "a.example" {
		t.Fatalf("settling one: %+v; want the site's next item in the same call", r)
	}
	notReady(t, f, "at its cap again")
	for _, o := range []Outcome{Skipped, Released, Deferred, Retry} { // each frees a slot
		if r := f.Settle(ctx, Settlement{Item: held[1], Outcome: o}); r.Settled != nil {
			t.Fatalf("outcome %d: %v", o, r.Settled)
		}
		held[1] = take(t, f, 1)[0]
		notReady(t, f, fmt.Sprintf("at its cap after outcome %d", o))
	}
}

// With a Delay, the site's next item comes that long after one settles.
func TestDelayAfterSettle(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	f.Add(ctx, 0, urls("slow.example", 3)...)
	it := take(t, f, 1)[0]
	rule := SiteRule{Cap: 1, Delay: 400 * time.Millisecond}
	r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Rule: rule, Next: true})
	var empty *EmptyError
	if !errors.As(r.NextErr, &empty) || empty.Wait < 300*time.Millisecond || empty.Wait > 400*time.Millisecond {
		t.Fatalf("right after a settlement with a 400ms delay: %+v; want ~400ms to wait", r)
	}
	start := time.Now()
	it, err := nextSoon(ctx, f, time.Second)
	if err != nil || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("next after %s: %+v %v", time.Since(start), it, err)
	}
	// Its queue empties; a link arriving right after a settlement waits the delay too.
	f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Rule: rule})
	last, err := nextSoon(ctx, f, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f.Settle(ctx, Settlement{Item: last, Outcome: Fetched, Rule: rule, Links: []string{"http://slow.example/new"}})
	if e := notReady(t, f, "a link queued right after"); e.Wait < 300*time.Millisecond {
		t.Fatalf("wait %s; want the delay", e.Wait)
	}
}

// A settlement's cap replaces the default; one below the items in flight
// keeps the site out until enough settle.
func TestCapFromSettlement(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{}) // default cap 3
	f.Add(ctx, 0, urls("c.example", 12)...)
	held := take(t, f, 3)
	notReady(t, f, "default cap 3")
	f.Settle(ctx, Settlement{Item: held[0], Outcome: Fetched, Rule: SiteRule{Cap: 1}})
	notReady(t, f, "cap lowered to 1, 2 in flight")
	f.Done(ctx, held[1])
	notReady(t, f, "cap 1, 1 in flight")
	f.Done(ctx, held[2])
	one := take(t, f, 1)[0]
	notReady(t, f, "cap 1, 1 in flight again")
	f.Settle(ctx, Settlement{Item: one, Outcome: Fetched, Rule: SiteRule{Cap: 4}})
	take(t, f, 4)
	notReady(t, f, "cap raised to 4")
}

// An item handed out again after its visibility timeout counts once in
// its site's items in flight: the dead worker's slot is freed.
func TestVisibilityFreesSlot(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 1, Visibility: 200 * time.Millisecond})
	f.Add(ctx, 0, urls("v.example", 2)...)
	dead := take(t, f, 1)[0]
	e := notReady(t, f, "cap 1 held by a dead worker")
	time.Sleep(e.Wait + 20*time.Millisecond)
	again := take(t, f, 1)[0]
	if again.URL != dead.URL {
		t.Fatalf("handed out again: %s, want %s", again.URL, dead.URL)
	}
	notReady(t, f, "cap 1 held by the new worker")
	if err := f.Done(ctx, again); err != nil {
		t.Fatal(err)
	}
	if it := take(t, f, 1)[0]; it.URL == dead.URL {
		t.Fatal("the same URL twice")
	}
}

// An item says whether its shard still had a site ready when it was handed
// out (Item.More), so that a worker can rouse an idle one rather than leave
// a free slot for its next poll.
func TestItemSaysMoreReady(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 1, Shards: 1})
	f.Add(ctx, 0, append(urls("a.example", 2), urls("b.example", 2)...)...)
	first := take(t, f, 1)[0]
	if !first.More {
		t.Fatalf("first item %+v: the other site was ready, want More", first)
	}
	second := take(t, f, 1)[0]
	if second.More {
		t.Fatalf("second item %+v: both sites at their cap of 1, want no More", second)
	}
	r := f.Settle(ctx, Settlement{Item: first, Outcome: Fetched, Next: true})
	if r.NextErr != nil || r.Next.More {
		t.Fatalf("after a settlement: %+v, %v; want the freed site's item and no More (the other at its cap)", r.Next, r.NextErr)
	}
}

// A site at its cap comes back after Park even if none of its items
// settles (their worker died): the semaphore, whose permits run out after
// their lease, decides then, not the visibility timeout (a minute here).
func TestParkIsBounded(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 2, Park: 300 * time.Millisecond, Visibility: time.Minute})
	f.Add(ctx, 0, urls("a.example", 5)...)
	take(t, f, 2) // and never settled: a dead worker's
	notReady(t, f, "2 in flight, cap 2")
	start := time.Now()
	it, err := nextSoon(ctx, f, 10*time.Second)
	if err != nil {
		t.Fatalf("after the park bound: %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("a site at its cap handed out again after %s, before its park bound of 300ms", d)
	}
	if it.Site != "a.example" {
		t.Fatalf("got %+v", it)
	}
	notReady(t, f, "parked again: 3 in flight, cap 2")
}

// A site parked at its cap by the take of its last queued URL (take does
// not ask whether the queue ran out) is not listed by Sites, is not handed
// out once its park bound passes but leaves the ready set, and a delay its
// settlement then reports still holds its next URL back (settle's after).
func TestParkedWithNothingQueued(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 2, Shards: 1, Park: 300 * time.Millisecond, Visibility: time.Minute})
	f.Add(ctx, 0, urls("a.example", 2)...)
	held := take(t, f, 2)
	sh := f.lay.Load().shards[0]
	if s, err := f.rdb.ZScore(ctx, sh.keys[0], "a.example").Result(); err != nil || s < 1e15 {
		t.Fatalf("a.example at its cap, nothing queued: place %v, %v; want parked", s, err)
	}
	if sites, err := f.Sites(ctx); err != nil || len(sites) != 0 {
		t.Fatalf("Sites: %+v, %v; want none (nothing queued)", sites, err)
	}
	time.Sleep(400 * time.Millisecond) // past the park bound
	var empty *EmptyError
	if it, err := f.Next(ctx); !errors.As(err, &empty) {
		t.Fatalf("Next past the park bound: %+v, %v; want nothing to take (2 in flight)", it, err)
	}
	if err := f.rdb.ZScore(ctx, sh.keys[0], "a.example").Err(); err != redis.Nil {
		t.Fatalf("a.example with nothing queued back in the ready set: %v", err)
	}
	r := f.Settle(ctx, Settlement{Item: held[0], Outcome: Fetched, Next: true, Prefer: "a.example",
		Rule: SiteRule{Cap: 1, Delay: time.Minute}, Links: []string{"http://a.example/new"}})
	if r.Settled != nil || r.Next.Site == "a.example" {
		t.Fatalf("settle: %v; next %q: want a.example's link kept back by its delay", r.Settled, r.Next.URL)
	}
	flyMatches(t, ctx, f, "the settlement")
}

// NextNear takes from the shard of the site it is given, in one round
// trip, even when the worker's last look found every shard empty (which
// makes Next look at every shard first).
func TestNextNearTakesFromTheSitesShard(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 8})
	rt := &roundTrips{}
	f.rdb.(redis.UniversalClient).AddHook(rt)
	if _, err := f.Next(ctx); !errors.Is(err, ErrDone) { // empty: the next Next would look at every shard
		t.Fatalf("Next on an empty crawl: %v, want ErrDone", err)
	}
	// Two sites of one shard: find a second name in the first's shard.
	a := "a.example"
	var b string
	for i := 0; b == ""; i++ {
		if s := fmt.Sprintf("b%d.example", i); shardOf(t, f, s) == shardOf(t, f, a) {
			b = s
		}
	}
	if _, err := f.Add(ctx, 0, "http://"+a+"/", "http://"+b+"/"); err != nil {
		t.Fatal(err)
	}
	before := rt.n.Load()
	it, err := f.NextNear(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if trips := rt.n.Load() - before; trips != 1 {
		t.Errorf("NextNear took %d round trips, want 1", trips)
	}
	if it.Site != a && it.Site != b {
		t.Errorf("NextNear(%q) gave an item of %q, not of its shard", a, it.Site)
	}
}

// A settlement that prefers its site takes the next item from it while it
// is ready, instead of the next site in the shard's round robin; one that
// prefers a site with nothing ready gets the round robin's.
func TestSettlePrefersSite(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 3, Shards: 1})
	for _, s := range []string{"a.example", "b.example", "c.example"} {
		f.Add(ctx, 0, urls(s, 10)...)
	}
	it := take(t, f, 1)[0]
	settle := func(it Item, prefer string) Item {
		t.Helper()
		r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true, Prefer: prefer})
		if r.Settled != nil || r.NextErr != nil {
			t.Fatalf("settle %s: %v, next: %v", it.URL, r.Settled, r.NextErr)
		}
		return r.Next
	}
	stay := it.Site
	for i := range 5 {
		it = settle(it, stay)
		if it.Site != stay {
			t.Fatalf("preferred settlement %d took %s, want %s", i, it.Site, stay)
		}
	}
	seen := map[string]bool{}
	for range 3 {
		it = settle(it, "")
		seen[it.Site] = true
	}
	if len(seen) != 3 {
		t.Fatalf("round robin without a preference took from %v, want all 3 sites", seen)
	}
	it = settle(it, "none.example")
	if it.URL == "" {
		t.Fatal("a preference for a site with nothing queued took nothing")
	}
	// A preferred site at its cap (parked) is not taken.
	var full []Item
	for len(full) < 3 {
		if it.Site == "a.example" {
			full = append(full, it)
		} else {
			f.Settle(ctx, Settlement{Item: it, Outcome: Fetched})
		}
		it = take(t, f, 1)[0]
	}
	for range 3 {
		if it.Site == "a.example" {
			t.Fatalf("a.example handed out past its cap of 3: %s", it.URL)
		}
		it = settle(it, "a.example")
	}
}

// A site at its cap hands its next item on to the worker that settles one
// of its items and asks to stay: the item comes from that site, its items
// in flight stay at the cap, it stays out of the ready set (parked), More
// tells whether another site is ready, and the shard's ready set is
// scanned once (the pick that tells More), not read back and tidied. The
// hand-on that empties its queue leaves it parked (take does not ask for
// the queue's length at the cap); when one of its items settles without a
// hand-on, it leaves the ready set.
func TestSettleHandsOnAtCap(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 2, Shards: 1})
	f.Add(ctx, 0, urls("a.example", 4)...)
	held := take(t, f, 2)
	if held[0].Site != "a.example" || held[1].Site != "a.example" {
		t.Fatalf("took %s and %s, want a.example's first two", held[0].URL, held[1].URL)
	}
	sh := f.lay.Load().shards[0]
	ready, fly := sh.keys[0], sh.keys[3]
	parked := func() bool {
		t.Helper()
		s, err := f.rdb.ZScore(ctx, ready, "a.example").Result()
		if err != nil {
			t.Fatalf("a.example's place in the ready set: %v", err)
		}
		return s >= 1e15
	}
	if !parked() {
		t.Fatal("a.example at its cap is not parked")
	}
	scans := func(l load) int64 { return l.calls["zrangebyscore"] + l.calls["zrevrangebyscore"] }
	seen := map[string]bool{held[0].URL: true, held[1].URL: true}
	for i := range 2 {
		if i == 1 {
			f.Add(ctx, 0, urls("b.example", 2)...)
		}
		before, err := readLoad(ctx, f.rdb)
		if err != nil {
			t.Fatal(err)
		}
		r := f.Settle(ctx, Settlement{Item: held[i], Outcome: Fetched, Next: true, Prefer: "a.example"})
		if r.Settled != nil || r.NextErr != nil {
			t.Fatalf("settle %s: %v, next: %v", held[i].URL, r.Settled, r.NextErr)
		}
		after, err := readLoad(ctx, f.rdb)
		if err != nil {
			t.Fatal(err)
		}
		if n := scans(after) - scans(before); n != 1 {
			t.Errorf("hand-on %d scanned the ready or in-flight set %d times, want once", i, n)
		}
		it := r.Next
		if it.Site != "a.example" || seen[it.URL] {
			t.Fatalf("hand-on %d took %q, want a new a.example URL", i, it.URL)
		}
		seen[it.URL] = true
		if it.More != (i == 1) {
			t.Fatalf("hand-on %d: More %v, want %v (b.example ready)", i, it.More, i == 1)
		}
		if n, err := f.rdb.HGet(ctx, fly, "a.example").Int(); err != nil || n != 2 {
			t.Fatalf("a.example in flight after hand-on %d: %d, %v; want 2", i, n, err)
		}
		if i == 0 && !parked() {
			t.Fatal("a.example at its cap is not parked after a hand-on")
		}
		held[i] = it
	}
	// a.example's queue is empty now: parked still, so not taken from.
	if !parked() {
		t.Fatal("a.example at its cap with nothing queued is not parked")
	}
	if it := take(t, f, 1)[0]; it.Site != "b.example" {
		t.Fatalf("took %s, want b.example", it.URL)
	}
	// Its item settles without a hand-on: out of the ready set, nothing queued.
	if r := f.Settle(ctx, Settlement{Item: held[0], Outcome: Fetched}); r.Settled != nil {
		t.Fatal(r.Settled)
	}
	if err := f.rdb.ZScore(ctx, ready, "a.example").Err(); err != redis.Nil {
		t.Fatalf("a.example with nothing queued still in the ready set: %v", err)
	}
	flyMatches(t, ctx, f, "the last settlements")
}
