package limiter

import (
	"errors"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// On a Redis whose ACL denies FUNCTION the scripts run as plain scripts
// (EVALSHA, luafn): there a call's prelude state is its own, and a script
// may not replace a global (Redis 7 makes them read-only), so the key
// names the scripts make live in a local (common.lua K). A permit's life
// works as with Functions: grants to the cap under a contributor's rule,
// a waiter let in by a release that records an outcome, a keep, and
// nothing left in line.
func TestScriptsWithoutFunctionsOnRedis(t *testing.T) {
	ctx := ctxT(t)
	own, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	admin := own.Client()
	t.Cleanup(func() { admin.Close() })
	rdb, err := own.ClientAs(ctx, "nofn", "-function")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	forModes(t, func(t *testing.T, mode Mode) {
		l := newLimiter(t, rdb, Options{Mode: mode, NoRestartGuard: true})
		if l.fn.Functions(ctx) {
			t.Fatal("the library runs as Functions for a user denied FUNCTION")
		}
		site := "evalmode.example"
		rule := Rule{Limit: 2, From: "a.evalmode.example"}
		a, err := l.AcquireRule(ctx, site, rule)
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.AcquireRule(ctx, site, rule)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *Permit, 1)
		go func() {
			p, err := l.AcquireRule(ctx, site, rule)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		waitFor(t, "a third caller in line", func() bool {
			_, owners := members(t, admin, l, site)
			return len(owners) == 3
		})
		select {
		case <-got:
			t.Fatal("a third permit under a cap of 2")
		case <-time.After(50 * time.Millisecond):
		}
		a.SetOutcome(Outcome{Class: OutcomeOK, TTFB: 20 * time.Millisecond, TTLB: 30 * time.Millisecond})
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var c *Permit
		select {
		case c = <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not let in by the release")
		}
		if c == nil {
			t.Fatal("no permit for the waiter")
		}
		released, k, err := keepOn(t, rdb, b, rule)
		var busy *BusyError
		if released != nil || (err != nil && !errors.As(err, &busy)) {
			t.Fatalf("keep: released %v, kept %v", released, err)
		}
		for _, p := range []*Permit{c, k} {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if holders, owners := members(t, admin, l, site); len(holders)+len(owners) != 0 {
			t.Fatalf("left in line: holders %v, owners %v", holders, owners)
		}
	})
}
