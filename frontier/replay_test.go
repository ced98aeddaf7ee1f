package frontier

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// stalledFrontier is a frontier of one shard with n sites of one URL each,
// on a client whose read timeout (200ms) a stall of its Redis outlasts, so
// that go-redis sends a call again (MaxRetries) after Redis may have run it.
func stalledFrontier(t *testing.T, ctx context.Context, n int) *Frontier {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: 3})
	t.Cleanup(func() { rdb.Close() })
	f := New(rdb, &Options{Crawl: fmt.Sprintf("stall.%d", crawls.Add(1)), Shards: 1})
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("http://st%d.example/", i))
	}
	if _, err := f.Add(ctx, 0, all...); err != nil {
		t.Fatal(err)
	}
	return f
}

// stall stops the package's redis-server for d while do runs, and waits
// until every try of do has had its answer.
func stall(t *testing.T, d time.Duration, do func()) {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := time.AfterFunc(d, func() { srv.Resume() })
	defer resumed.Stop()
	do()
	time.Sleep(d + 100*time.Millisecond) // past the stall, and every try run
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
}

// A Redis that stalls past the client's read timeout while a Next is on
// its way takes one item for it, not one per try: the tries after the
// first get the first one's answer (common.lua answered). Without that,
// each took another item that nobody held until the visibility timeout.
func TestStalledNextTakesOnce(t *testing.T) {
	ctx := ctxT(t)
	f := stalledFrontier(t, ctx, 8)
	var it Item
	var err error
	stall(t, 500*time.Millisecond, func() { it, err = f.Next(ctx) })
	st, serr := f.Stats(ctx)
	if serr != nil {
		t.Fatal(serr)
	}
	if st.InFlight != 1 || err != nil {
		t.Fatalf("after one Next through a stall: %d items in flight, Next %+v, %v; want the one it took", st.InFlight, it, err)
	}
	if r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched}); r.Settled != nil {
		t.Fatalf("settling the item Next answered: %v", r.Settled)
	}
}

// A settlement that takes the next item, through the same stall, settles
// its item and takes one: a try after the first answers as the first did,
// where it found its item gone ("no longer held", a turn not finished)
// and took another.
func TestStalledSettleAnswersOnce(t *testing.T) {
	ctx := ctxT(t)
	f := stalledFrontier(t, ctx, 8)
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	stall(t, 500*time.Millisecond, func() { r = f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true}) })
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Settled != nil || r.Unsettled || r.NextErr != nil || st.Done != 1 || st.InFlight != 1 {
		t.Fatalf("settling through a stall: %v (unsettled %v), next %v; stats %d done, %d in flight; want 1 and 1",
			r.Settled, r.Unsettled, r.NextErr, st.Done, st.InFlight)
	}
}

// A settlement that gets no answer (a read timeout while Redis stalls,
// and no retry of go-redis's here) is sent once more (again), and that
// answer decides: the item is settled once and one item taken, and the
// result says so, where it said "not settled" of an item Redis settled
// when it woke.
func TestSettleSentAgainWithoutAnswer(t *testing.T) {
	ctx := ctxT(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 400 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	f := New(rdb, &Options{Crawl: fmt.Sprintf("again.%d", crawls.Add(1)), Shards: 1})
	if _, err := f.Add(ctx, 0, "http://a.example/1", "http://b.example/1", "http://c.example/1"); err != nil {
		t.Fatal(err)
	}
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	stall(t, 500*time.Millisecond, func() { r = f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true}) })
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Settled != nil || r.Unsettled || r.NextErr != nil || st.Done != 1 || st.InFlight != 1 {
		t.Fatalf("settling through a stall: %v (unsettled %v), next %v; stats %d done, %d in flight; want 1 and 1",
			r.Settled, r.Unsettled, r.NextErr, st.Done, st.InFlight)
	}
}
