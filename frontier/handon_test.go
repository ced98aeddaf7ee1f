package frontier

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// flyMatches fails t unless the shard's count in flight of every site is
// the number of its items in flight.
func flyMatches(t *testing.T, ctx context.Context, f *Frontier, when string) {
	t.Helper()
	sh := f.lay.Load().shards[0]
	members, err := f.rdb.ZRange(ctx, sh.keys[1], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, m := range members {
		if parts := strings.SplitN(m, "\n", 3); len(parts) == 3 {
			n, _ := strconv.Atoi(want[parts[1]])
			want[parts[1]] = strconv.Itoa(n + 1)
		}
	}
	counts, err := f.rdb.HGetAll(ctx, sh.keys[3]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for site, n := range counts {
		if site != "" && n != "0" && want[site] != n {
			t.Fatalf("%s: %s counts %s in flight, %q are", when, site, n, want[site])
		}
	}
	for site, n := range want {
		if counts[site] != n {
			t.Fatalf("%s: %s counts %q in flight, %s are", when, site, counts[site], n)
		}
	}
}

// TestSettleStayCountsInFlight: a settlement whose worker asks to stay on
// its site leaves every site's count in flight right, whether the site's
// next item is handed on or not: handed on, run out, its queue lost under
// it, or with the shard's tidy-up in the same call.
func TestSettleStayCountsInFlight(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 3, Shards: 1})
	f.Add(ctx, 0, urls("a.example", 12)...)
	f.Add(ctx, 0, urls("b.example", 4)...)
	held := take(t, f, 6)
	flyMatches(t, ctx, f, "taken")
	// Stay on each item's site until the sites run out: hand-ons (the
	// shard tidies on every 8th), then b.example with nothing queued.
	for i := 0; len(held) > 0; i++ {
		it := held[0]
		r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true, Prefer: it.Site})
		if r.Settled != nil {
			t.Fatalf("settle %s: %v", it.URL, r.Settled)
		}
		held = held[1:]
		if r.NextErr == nil {
			held = append(held, r.Next)
		}
		flyMatches(t, ctx, f, "settlement "+strconv.Itoa(i)+" of "+it.URL)
	}

	// A site's queue lost (expired) under it: nothing to hand on.
	f.Add(ctx, 0, urls("c.example", 3)...)
	its := take(t, f, 2)
	sh := f.lay.Load().shards[0]
	if err := f.rdb.Del(ctx, qkeyOf(sh, "c.example")).Err(); err != nil {
		t.Fatal(err)
	}
	r := f.Settle(ctx, Settlement{Item: its[0], Outcome: Fetched, Next: true, Prefer: "c.example"})
	if r.Settled != nil {
		t.Fatal(r.Settled)
	}
	flyMatches(t, ctx, f, "a settlement whose site's queue was lost")
}

// TestSettleStayLinksBack: a site at its cap whose last queued URL's
// settlement (the worker asking to stay) links to a new URL of the site is
// ready with it at once, below its cap: the settled item is out of its
// count before the link joins the queue.
func TestSettleStayLinksBack(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 1, Shards: 1})
	f.Add(ctx, 0, "http://d.example/0")
	it := take(t, f, 1)[0]
	r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true, Prefer: "d.example", Links: []string{"http://d.example/1"}})
	if r.Settled != nil || r.NextErr != nil || r.Next.URL != "http://d.example/1" {
		t.Fatalf("settle: %v; next %q, %v: want d.example/1", r.Settled, r.Next.URL, r.NextErr)
	}
	flyMatches(t, ctx, f, "the settlement")

	// With a delay, nothing is handed on: the link waits the delay, the
	// site below its cap (not parked).
	f.Add(ctx, 0, "http://e.example/0")
	it = take(t, f, 1)[0]
	r = f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true, Prefer: "e.example",
		Rule: SiteRule{Cap: 1, Delay: time.Minute}, Links: []string{"http://e.example/1"}})
	if r.Settled != nil || r.Next.Site == "e.example" {
		t.Fatalf("settle: %v; next %q: want e.example's link kept back by its delay", r.Settled, r.Next.URL)
	}
	flyMatches(t, ctx, f, "the delayed settlement")
	sh := f.lay.Load().shards[0]
	if s, err := f.rdb.ZScore(ctx, sh.keys[0], "e.example").Result(); err != nil || s >= 1e15 {
		t.Fatalf("e.example with nothing in flight: place %v, %v; want its delay, not parked", s, err)
	}
}

// TestSettleStayTidied: a hand-on in the call that tidies the shard counts
// what the tidy-up freed: a site with one live item in flight and one whose
// worker died, at its cap, is not parked when the live one's next is handed
// on and the dead one's goes back to the queue.
func TestSettleStayTidied(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 2, Shards: 1, Visibility: 300 * time.Millisecond})
	f.Add(ctx, 0, urls("a.example", 6)...)
	its := take(t, f, 2)
	time.Sleep(400 * time.Millisecond) // both past their visibility timeout...
	sh := f.lay.Load().shards[0]
	members, err := f.rdb.ZRange(ctx, sh.keys[1], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members { // ...but the first one's worker lives
		if strings.Contains(m, its[0].URL) {
			f.rdb.ZAddXX(ctx, sh.keys[1], redis.Z{Score: 1e14, Member: m})
		}
	}
	live := its[0]
	sh.takes.Store(7) // the next take is the process's 8th on the shard: it tidies
	r := f.Settle(ctx, Settlement{Item: live, Outcome: Fetched, Next: true, Prefer: "a.example"})
	if r.Settled != nil || r.NextErr != nil {
		t.Fatalf("settle: %v, next: %v", r.Settled, r.NextErr)
	}
	flyMatches(t, ctx, f, "the tidying hand-on")
	if s, err := f.rdb.ZScore(ctx, sh.keys[0], "a.example").Result(); err != nil || s >= 1e15 {
		t.Fatalf("a.example with 1 of 2 in flight: place %v, %v; want ready (not parked)", s, err)
	}
}

// qkeyOf is the key of site's queue on sh (common.lua qkey).
func qkeyOf(sh *shard, site string) string { return sh.base + "q:" + site }

// TestSettleStayRanOutTidied: a hand-on to a site that ran out, in a call
// whose take then finds nothing ready and tidies the shard, counts the
// settled item out before the tidy-up: the site's dead items come back and
// one is handed out, the site below its cap and so not parked.
func TestSettleStayRanOutTidied(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Cap: 3, Shards: 1, Visibility: 300 * time.Millisecond})
	f.Add(ctx, 0, urls("a.example", 3)...)
	its := take(t, f, 3) // a.example's queue is empty now
	time.Sleep(400 * time.Millisecond)
	sh := f.lay.Load().shards[0]
	members, err := f.rdb.ZRange(ctx, sh.keys[1], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members { // the first one's worker lives; the others' died
		if strings.Contains(m, its[0].URL) {
			f.rdb.ZAddXX(ctx, sh.keys[1], redis.Z{Score: 1e14, Member: m})
		}
	}
	sh.takes.Store(8) // not a take that tidies first, nor an id used before (common.lua answered)
	r := f.Settle(ctx, Settlement{Item: its[0], Outcome: Fetched, Next: true, Prefer: "a.example"})
	if r.Settled != nil || r.NextErr != nil || r.Next.Site != "a.example" || r.Next.URL == its[0].URL {
		t.Fatalf("settle: %v; next %q, %v: want a dead item of a.example back", r.Settled, r.Next.URL, r.NextErr)
	}
	flyMatches(t, ctx, f, "the settlement")
	if s, err := f.rdb.ZScore(ctx, sh.keys[0], "a.example").Result(); err != nil || s >= 1e15 {
		t.Fatalf("a.example with 1 of 3 in flight and 1 queued: place %v, %v; want ready (not parked)", s, err)
	}
}

// TestTakeIDsTidyEveryShard: a process's take ids end in '0' (the tidy-up's
// turn) on every 8th take on each shard, however its takes go round the
// shards (Next turns to the next shard at each call).
func TestTakeIDsTidyEveryShard(t *testing.T) {
	f := newFrontier(t, Options{})
	shards := make([]*shard, 16)
	for i := range shards {
		shards[i] = &shard{n: i}
	}
	tidies := make([]int, len(shards))
	seen := map[string]bool{}
	for k := range 16 * 8 * 3 {
		sh := shards[k%len(shards)]
		id := f.takeID(sh)
		if seen[id] {
			t.Fatalf("id %q twice", id)
		}
		seen[id] = true
		if strings.HasSuffix(id, "0") {
			tidies[sh.n]++
		}
	}
	for n, c := range tidies {
		if c != 3 {
			t.Errorf("shard %d: %d tidy-ups in 24 takes, want 3", n, c)
		}
	}
}
