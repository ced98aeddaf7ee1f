package frontier

import (
	"testing"
	"time"
)

// Stats.Held names the site the frontier will hand out soonest when none
// may be tried now: one in its crawl delay after a fetch settled, or one
// deferred; nothing once a site is ready.
func TestStatsHeld(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 4, Cap: 1}) // one item of a site out at once
	f.Add(ctx, 0, "http://slow.example/1", "http://slow.example/2", "http://later.example/1")
	if st, err := f.Stats(ctx); err != nil || st.Held != (Held{}) {
		t.Fatalf("sites ready: Held %+v, %v", st.Held, err)
	}
	for range 2 {
		it, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch it.Site {
		case "slow.example": // fetched, under a 5 s crawl delay
			s := Settlement{Item: it, Outcome: Fetched, Rule: SiteRule{Cap: 1, Delay: 5 * time.Second}}
			if err := f.Settle(ctx, s).Settled; err != nil {
				t.Fatal(err)
			}
		default: // held off longer
			if err := f.Defer(ctx, it, 20*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Held.Site != "slow.example" || st.Held.In <= 4*time.Second || st.Held.In > 5*time.Second {
		t.Fatalf("Held %+v, want slow.example in 4s..5s (stats %+v)", st.Held, st)
	}
	f.Add(ctx, 0, "http://ready.example/1")
	if st, err := f.Stats(ctx); err != nil || st.Held != (Held{}) {
		t.Fatalf("a site ready again: Held %+v, %v", st.Held, err)
	}
}
