package limiter

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// commandStats is how many times Redis has run each command (INFO
// commandstats), those inside scripts included.
func commandStats(t testing.TB, rdb *redis.Client) map[string]float64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]float64{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("INFO commandstats %s: %v", name, err)
				}
				calls[cmd] = n
			}
		}
	}
	return calls
}

// Acquires and releases prune (ZREMRANGEBYSCORE + ZINTERSTORE) only when a
// holder has expired: never while every entry is live, on an idle or a busy
// site; and an expired holder is still pruned, so it does not count against
// the limit.
func TestPruneOnlyWhenExpired(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		const lease = 300 * time.Millisecond
		l := newLimiter(t, rdb, Options{Mode: mode, Lease: lease})
		before := commandStats(t, rdb)
		for i := 0; i < 20; i++ {
			p, err := l.Acquire(ctx, "prune.example", 2)
			if err != nil {
				t.Fatal(err)
			}
			q, err := l.Acquire(ctx, "prune.example", 2)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.TryAcquire(ctx, "prune.example", 2); !errors.Is(err, ErrBusy) {
				t.Fatalf("third permit: %v, want busy", err)
			}
			p.Release(ctx)
			q.Release(ctx)
		}
		after := commandStats(t, rdb)
		for _, cmd := range []string{"zinterstore", "zremrangebyscore"} {
			if n := after[cmd] - before[cmd]; n != 0 {
				t.Errorf("%s ran %v times with no entry expired, want 0", cmd, n)
			}
		}
		if n := after["zadd"] - before["zadd"]; n < 80 {
			t.Fatalf("%v ZADDs: the test counted the wrong server", n)
		}

		// A holder that dies is pruned once its lease has run out.
		if _, err := l.Acquire(ctx, "prune.example", 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease + 50*time.Millisecond)
		p, err := l.TryAcquire(ctx, "prune.example", 1)
		if err != nil {
			t.Fatalf("after the holder's lease ran out: %v", err)
		}
		if h, o := members(t, rdb, l, "prune.example"); !slices.Equal(h, []string{p.ID()}) || !slices.Equal(o, []string{p.ID()}) {
			t.Fatalf("holders %v owners %v, want only %s", h, o, p.ID())
		}
		if n := commandStats(t, rdb)["zinterstore"] - after["zinterstore"]; n < 1 {
			t.Fatalf("the expired holder was dropped without ZINTERSTORE (%v)", n)
		}
		p.Release(ctx)
	})
}

// Holders can expire a millisecond before owners (their TTLs are set one
// after the other): the entries left in owners then do not count against
// the limit, and are dropped.
func TestOwnersOutliveHolders(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode})
		old, err := l.Acquire(ctx, "outlive.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		k := keysFor(l.opts.prefix(), "outlive.example")
		rdb.Del(ctx, k.holders) // as if it had expired first
		p, err := l.TryAcquire(ctx, "outlive.example", 1)
		if err != nil {
			t.Fatalf("with holders gone: %v, want a permit", err)
		}
		if _, o := members(t, rdb, l, "outlive.example"); !slices.Equal(o, []string{p.ID()}) {
			t.Fatalf("owners %v, want only %s (not %s)", o, p.ID(), old.ID())
		}
		noKeyWithoutTTL(t, l)
	})
}

// On a site in use (a permit held keeps its keys), acquires and releases
// set no TTL while the keys' TTL is less than a lease old: TTLs are set
// together, once a lease, not by every call on every key.
func TestTTLSetOnlyWhenNeeded(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode})
		held, err := l.Acquire(ctx, "ttl.example", 3)
		if err != nil {
			t.Fatal(err)
		}
		before := commandStats(t, rdb)
		for i := 0; i < 20; i++ {
			p, err := l.Acquire(ctx, "ttl.example", 3)
			if err != nil {
				t.Fatal(err)
			}
			p.Release(ctx)
		}
		after := commandStats(t, rdb)
		if n := after["pexpire"] - before["pexpire"]; n != 0 {
			t.Errorf("PEXPIRE ran %v times in 20 acquire+release pairs on a site in use, want 0", n)
		}
		if n := after["zadd"] - before["zadd"]; n < 40 {
			t.Fatalf("%v ZADDs: the test counted the wrong server", n)
		}
		held.Release(ctx)
		noKeyWithoutTTL(t, l)
	})
}
