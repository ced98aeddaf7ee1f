package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// The demo runs on an embedded miniredis, whose Lua has no struct library:
// the health record is written and read by luanums.lua's stand-in there,
// in the same layout, so releases that record an outcome succeed and
// Status reads what they wrote.
func TestHealthOnEmbeddedRedis(t *testing.T) {
	m, err := miniredis.Run()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	l := New(rdb, &Options{Mode: ModeAtomic, NoRestartGuard: true})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		p, err := l.Acquire(ctx, "embedded.example", 3)
		if err != nil {
			t.Fatal(err)
		}
		p.SetOutcome(Outcome{Class: OutcomeOK, TTFB: 50 * time.Millisecond, TTLB: 60 * time.Millisecond})
		if err := p.Release(ctx); err != nil {
			t.Fatalf("release %d with an outcome: %v", i, err)
		}
	}
	st, err := l.Status(ctx, "embedded.example", 3)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTFB < 45*time.Millisecond || st.TTFB > 55*time.Millisecond || st.Window.OK != 3 || st.Cap != 3 {
		t.Fatalf("status after three 50ms fetches: %+v, want a TTFB of about 50ms, 3 OK and the full cap", st)
	}
}
