package limiter

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// srv is this package's private redis-server, started by TestMain.
var srv *redistest.Server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(stressChild()) // re-executed as a stress worker process
	}
	redistest.Main(m, &srv, func(s *redistest.Server) error {
		// The restart guard grants nothing on a server younger than lease +
		// crawl delay + 1 s; the tests here expect permits at once (the
		// default lease is 10 s). TestRestartGuard tests the guard on
		// servers of its own.
		if err := s.WaitUptime(12 * time.Second); err != nil {
			return err
		}
		return os.Setenv("REDIS_ADDR", s.Addr) // for the examples
	})
}

// newClient returns a client of srv, closed when the test ends.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	c := srv.Client()
	t.Cleanup(func() { c.Close() })
	return c
}

// newLimiter returns a Limiter with a key prefix of the test's own, so tests
// never see each other's keys. It is closed when the test ends.
func newLimiter(t testing.TB, rdb redis.UniversalClient, o Options) *Limiter {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = testPrefix(t)
	}
	l := New(rdb, &o)
	t.Cleanup(func() { l.Close() })
	return l
}

// loadScripts loads the limiter's library on l's server, and settles how
// l runs it there, so that no call a test counts loads it first.
func loadScripts(t testing.TB, ctx context.Context, l *Limiter) {
	t.Helper()
	if err := l.fn.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if !l.fn.Functions(ctx) {
		t.Fatal("the limiter's scripts do not run as functions on redis-server")
	}
}

// forgetScripts makes rdb's server forget the limiter's library and
// scripts, as a restart without persistence does.
func forgetScripts(t testing.TB, ctx context.Context, rdb redis.Cmdable) {
	t.Helper()
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// testPrefix is the test's own key prefix (redistest.Prefix): the same
// for every call of one test, another in every run of it.
func testPrefix(t testing.TB) string { return redistest.Prefix(t) }

// forModes runs f once per mode as a subtest.
func forModes(t *testing.T, f func(t *testing.T, mode Mode)) {
	for _, m := range []Mode{ModeLocked, ModeAtomic} {
		t.Run(m.String(), func(t *testing.T) { f(t, m) })
	}
}

// ctxT is a context bounded well inside the test binary's timeout.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// members lists a site's entries as Redis has them.
func members(t testing.TB, rdb redis.UniversalClient, l *Limiter, site string) (holders, owners []string) {
	t.Helper()
	k := keysFor(l.opts.prefix(), site)
	ctx := context.Background()
	h, err := rdb.ZRange(ctx, k.holders, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	o, err := rdb.ZRange(ctx, k.owners, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return h, o
}

// wantNoEntries fails the test at once if site has entries in Redis; what
// names the failure ("entries left" when "").
func wantNoEntries(t testing.TB, rdb redis.UniversalClient, l *Limiter, site, what string) {
	t.Helper()
	if h, o := members(t, rdb, l, site); len(h)+len(o) != 0 {
		if what == "" {
			what = "entries left"
		}
		t.Fatalf("%s: holders %v owners %v", what, h, o)
	}
}

// waitFor polls cond every 5 ms until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
