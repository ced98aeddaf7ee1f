package metrics

import (
	"context"
	"testing"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/internal/rtkind"
	"github.com/redis/go-redis/v9"
)

// A pipeline is one round trip however many commands it carries; each
// command on its own is one.
func TestRoundTripsCounted(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := srv.Client()
	defer rdb.Close()
	ctx := context.Background()
	work := func() {
		for i := 0; i < 3; i++ {
			if err := rdb.Incr(ctx, "n").Err(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < 5; i++ {
				p.Incr(ctx, "n")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	work() // opens the connections it needs: their set-up round trips are not counted below
	m := New()
	m.CountRoundTrips(rdb)
	work()
	if got := m.RoundTrips(); got != 4 {
		t.Fatalf("RoundTrips = %d, want 4 (3 commands, 1 pipeline)", got)
	}
	if n := rdb.Get(ctx, "n").Val(); n != "16" {
		t.Fatalf("the commands did not all run: n = %s", n)
	}
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "polite_redis_round_trips_total" {
			if v := f.GetMetric()[0].GetCounter().GetValue(); v != 5 { // the GET above too
				t.Fatalf("polite_redis_round_trips_total = %v, want 5", v)
			}
			return
		}
	}
	t.Fatal("polite_redis_round_trips_total not registered")
}

// Round trips made under a context marked rtkind.Robots count in both
// totals; the others only in RoundTrips. (A connection's set-up counts
// under the context of the call that opened it, hence the ranges.)
func TestRobotsRoundTripsCountedApart(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := srv.Client()
	defer rdb.Close()
	m := New()
	m.CountRoundTrips(rdb)
	ctx := context.Background()
	for range 3 {
		if err := rdb.Incr(ctx, "n").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if got, robots := m.RoundTrips(), m.RobotsRoundTrips(); got < 3 || robots != 0 {
		t.Fatalf("unmarked: RoundTrips = %d, RobotsRoundTrips = %d; want at least 3 and 0", got, robots)
	}
	before := m.RoundTrips()
	marked := rtkind.With(ctx, rtkind.Robots)
	for range 2 {
		if err := rdb.Incr(marked, "n").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rdb.Pipelined(marked, func(p redis.Pipeliner) error { p.Incr(marked, "n"); p.Incr(marked, "n"); return nil }); err != nil {
		t.Fatal(err)
	}
	if got, robots := m.RoundTrips()-before, m.RobotsRoundTrips(); robots < 3 || robots > 5 || got != robots {
		t.Fatalf("marked: %d round trips, RobotsRoundTrips = %d; want 3 (5 with a connection's set-up), all for robots.txt", got, robots)
	}
}
