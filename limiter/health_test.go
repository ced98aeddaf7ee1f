package limiter

import (
	"testing"
	"time"
)

// A health record of another layout (here the text one of earlier
// versions, which said cap 1) is no record: the site starts afresh at its
// full cap, and its next release writes a record of this layout over it.
func TestHealthRecordOfAnotherLayoutStartsAfresh(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode, Adaptive: fast(Adaptive{})})
		site, rule := "old.example", Rule{Limit: 3}
		k := keysFor(l.opts.prefix(), site)
		old := "1 0 52.3 55.1 50.2 0 0 7 7 0 0 0 0 3 8 0 0 0 0 0"
		if err := rdb.Set(ctxT(t), k.health, old, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if st := status(t, l, site, 3); st.Cap != 3 || st.Reduced {
			t.Fatalf("with an old record: %+v, want the full cap", st)
		}
		if n := granted(t, l, site, rule); n != 3 {
			t.Fatalf("with an old record that said cap 1: %d granted at once, want the full cap 3", n)
		}
		feed(t, l, site, rule, ok(50*time.Millisecond))
		raw, err := rdb.Get(ctxT(t), k.health).Result()
		if err != nil || len(raw) != healthLen || raw[0] != healthVersion {
			t.Fatalf("after a release: record %q (%v), want this layout (%d bytes)", raw, err, healthLen)
		}
		if st := status(t, l, site, 3); st.Cap != 3 || st.TTFB < 40*time.Millisecond || st.TTFB > 60*time.Millisecond {
			t.Fatalf("after one 50ms fetch: %+v, want the full cap and a TTFB of about 50ms", st)
		}
	})
}
