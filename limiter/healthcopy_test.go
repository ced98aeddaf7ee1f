package limiter

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func timeout() Outcome { return Outcome{Class: OutcomeTimeout} }

// twoWriters are limiters on clients a and b under one prefix, both
// recording outcomes (a window of 50), the library loaded through a: two
// writers of the same sites' health records.
func twoWriters(t *testing.T, ctx context.Context, a, b redis.UniversalClient) (*Limiter, *Limiter, string) {
	t.Helper()
	pfx := testPrefix(t)
	ad := fast(Adaptive{Window: 50})
	la := newLimiter(t, a, Options{Mode: ModeAtomic, Prefix: pfx, Adaptive: ad})
	lb := newLimiter(t, b, Options{Mode: ModeAtomic, Prefix: pfx, Adaptive: ad})
	loadScripts(t, ctx, la)
	return la, lb, pfx
}

// A parsed record kept by the library (recs in adaptive.lua) stands for
// the text it was parsed from, whoever wrote the key: two crawls in
// databases 0 and 1 with one prefix each count their own outcomes (a
// review found a copy that carried outcomes of its own serving the other
// database's key of the same name and bytes; these tests keep that out).
func TestHealthCopyServesOnlyItsKey(t *testing.T) {
	ctx := ctxT(t)
	r0 := redis.NewClient(&redis.Options{Addr: srv.Addr, DB: 0})
	r1 := redis.NewClient(&redis.Options{Addr: srv.Addr, DB: 1})
	defer r0.Close()
	defer r1.Close()
	l0, l1, _ := twoWriters(t, ctx, r0, r1)
	site, rule := "xdb.example", Rule{Limit: 4}
	feed(t, l0, site, rule, timeout())
	feed(t, l1, site, rule, timeout())
	feed(t, l1, site, rule, timeout())
	feed(t, l0, site, rule, timeout())
	for db, l := range []*Limiter{l0, l1} {
		if st := status(t, l, site, 4); st.Cap != 4 || st.Window.Timeouts != 2 {
			t.Errorf("database %d after its 2 timeouts of 50: cap %d, window %+v: want 4 and its own 2", db, st.Cap, st.Window)
		}
	}
}

// Another writer of a site's record (a user without Functions runs plain
// scripts; so does a process of another version) is read as written:
// outcomes from before the record expired do not come back, and the third
// timeout of a window, whoever records each, reduces the cap.
func TestHealthCopyWithAnotherWriter(t *testing.T) {
	ctx := ctxT(t)
	adm := newClient(t)
	user := "plain" + strconv.FormatInt(time.Now().UnixNano(), 36)
	rs, err := srv.ClientAs(ctx, user, "-function")
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Do(ctx, "ACL", "DELUSER", user)
	defer rs.Close()
	lib, plain, pfx := twoWriters(t, ctx, adm, rs)
	if plain.fn.Functions(ctx) {
		t.Fatal("the user without FUNCTION runs Functions")
	}
	site, rule := "expired.example", Rule{Limit: 4}
	k := keysFor(pfx, site)
	feed(t, lib, site, rule, timeout())
	feed(t, lib, site, rule, timeout())
	adm.PExpire(ctx, k.health, time.Millisecond)
	waitFor(t, "the record to expire", func() bool { return adm.Exists(ctx, k.health).Val() == 0 })
	feed(t, plain, site, rule, timeout())
	feed(t, lib, site, rule, timeout())
	if st := status(t, lib, site, 4); st.Cap != 4 || st.Window.Timeouts != 2 {
		t.Errorf("2 timeouts since the record expired: cap %d, window %+v: want 4 and 2", st.Cap, st.Window)
	}

	site = "shared.example"
	feed(t, lib, site, rule, timeout())
	feed(t, lib, site, rule, timeout())
	feed(t, plain, site, rule, ok(5*time.Millisecond))
	feed(t, lib, site, rule, timeout())
	if st := status(t, lib, site, 4); st.Cap == 4 || st.Window.Timeouts != 3 {
		t.Errorf("3 timeouts of 50, another writer between: cap %d, window %+v: want reduced, 3", st.Cap, st.Window)
	}
}
