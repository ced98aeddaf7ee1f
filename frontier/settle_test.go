package frontier

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// counted is f with a round-trip counter on its client.
func counted(t *testing.T, f *Frontier) *roundTrips {
	rt := &roundTrips{}
	f.rdb.(redis.UniversalClient).AddHook(rt)
	return rt
}

// trips runs step and returns the round trips and script calls (at Redis)
// it took.
func trips(t *testing.T, f *Frontier, rt *roundTrips, step func()) (roundTrips, scripts int64) {
	t.Helper()
	ctx := ctxT(t)
	before, err := readLoad(ctx, f.rdb)
	if err != nil {
		t.Fatal(err)
	}
	n := rt.n.Load()
	step()
	got := rt.n.Load() - n
	after, err := readLoad(ctx, f.rdb)
	if err != nil {
		t.Fatal(err)
	}
	return got, after.scripts - before.scripts
}

// Settling a page, admitting its links of the same site and taking the
// next item is one script call in one round trip; links of another shard
// add one call, not a round trip; so do a skip, a retry and a deferral
// that take the next item.
func TestSettleIsOneScript(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	f.Add(ctx, 0, urls("a.example", 3)...)
	f.Add(ctx, 0, urls("b.example", 3)...)
	it := take(t, f, 1)[0]
	rt := counted(t, f)
	var r Result
	rts, scripts := trips(t, f, rt, func() {
		r = f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true,
			Links: []string{"http://" + it.Site + "/new/1", "http://" + it.Site + "/new/2"}})
	})
	if r.Settled != nil || r.NextErr != nil || rts != 1 || scripts != 1 {
		t.Fatalf("Settle with links of its site and Next: %+v in %d round trips, %d script calls; want 1 and 1", r, rts, scripts)
	}
	other := "b.example"
	if it.Site == other {
		other = "a.example"
	}
	if shardOf(t, f, other) == shardOf(t, f, it.Site) {
		t.Fatal("a.example and b.example share a shard: pick other sites")
	}
	it = r.Next
	rts, scripts = trips(t, f, rt, func() {
		r = f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true, Links: []string{"http://" + other + "/new"}})
	})
	if r.Settled != nil || r.NextErr != nil || rts != 1 || scripts != 2 {
		t.Fatalf("with a link of another shard: %+v in %d round trips, %d script calls; want 1 and 2", r, rts, scripts)
	}
	for _, o := range []Outcome{Skipped, Retry, Deferred, Released} {
		it = r.Next
		rts, scripts = trips(t, f, rt, func() { r = f.Settle(ctx, Settlement{Item: it, Outcome: o, Next: true}) })
		if r.Settled != nil || r.NextErr != nil || rts != 1 || scripts != 1 {
			t.Fatalf("outcome %d with Next: %+v in %d round trips, %d script calls; want 1 and 1", o, r, rts, scripts)
		}
	}
}

// Also's commands go in the settlement's round trip, before it; its after
// function runs once the reply is in, and its error joins Settled.
func TestSettleAlso(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	f.Add(ctx, 0, urls("a.example", 2)...)
	it := take(t, f, 1)[0]
	rt := counted(t, f)
	key := "also:" + f.o.Crawl
	var incr *redis.IntCmd
	var r Result
	rts, _ := trips(t, f, rt, func() {
		r = f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true,
			Also: func(pipe redis.Pipeliner) func() error {
				incr = pipe.Incr(ctx, key)
				pipe.Expire(ctx, key, 60e9)
				return func() error {
					if incr.Val() != 1 {
						return fmt.Errorf("INCR = %d", incr.Val())
					}
					return errors.New("released late")
				}
			}})
	})
	if rts != 1 || incr.Val() != 1 {
		t.Fatalf("%d round trips, INCR %v; want 1 and the command run", rts, incr)
	}
	if r.NextErr != nil || r.Next.URL == "" || r.Settled == nil || r.Settled.Error() != "released late" {
		t.Fatalf("result %+v; want the next item and Also's error", r)
	}
}

func ExampleFrontier_Settle() {
	ctx := context.Background()
	f := New(srv.Client(), &Options{Crawl: fmt.Sprint("example-settle.", crawls.Add(1))})
	f.Seed(ctx, "http://example.com/")
	it, _ := f.Next(ctx)
	// ... fetch it.URL, under a permit of it.Site ...
	r := f.Settle(ctx, Settlement{
		Item:    it,
		Outcome: Fetched,
		Links:   []string{"http://example.com/a", "http://example.com/b"},
		Rule:    SiteRule{Cap: 2}, // as robots.txt said
		Next:    true,
	})
	fmt.Println(r.Settled, r.Next.URL, r.NextErr)
	// Output: <nil> http://example.com/a <nil>
}

// A worker polling a crawl with nothing ready makes one read-only round
// trip a poll, and no script call.
func TestIdlePoll(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	f.Add(ctx, 0, "http://busy.example/1")
	held := take(t, f, 1)[0]
	rt := counted(t, f)
	notReady(t, f, "the only item held")
	for range 3 {
		rts, scripts := trips(t, f, rt, func() { notReady(t, f, "the only item held") })
		if rts != 1 || scripts != 0 {
			t.Fatalf("an idle poll: %d round trips, %d script calls; want 1 and 0", rts, scripts)
		}
	}
	f.Add(ctx, 0, "http://other.example/1")
	if it := take(t, f, 1)[0]; it.Site != "other.example" {
		t.Fatalf("after idling: %+v", it)
	}
	f.Done(ctx, held)
}
