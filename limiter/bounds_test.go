package limiter

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/keyname"
)

// A crawl delay too long to add to a lease (a robots.txt asking for
// centuries) is cut to MaxDelay: the site gets one permit, never two at once,
// and every key the limiter wrote keeps a TTL. Before the cut, 3*lease+delay
// overflowed, the keys' TTL went negative (Redis deleted them, or ModeLocked
// left the counter with none) and the second caller was let in.
func TestHugeDelayGivesOnePermit(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		for _, c := range []struct {
			name string
			opts Options
			rule Rule
		}{
			{"rule", Options{}, Rule{Limit: 1, Delay: math.MaxInt64}},
			{"options", Options{Delay: math.MaxInt64}, Rule{Limit: 3, Delay: math.MaxInt64}},
		} {
			c.opts.Mode, c.opts.NoRestartGuard = mode, true // the guard would wait a day first
			c.opts.Prefix = testPrefix(t) + ":" + c.name
			l := newLimiter(t, rdb, c.opts)
			take := func() (*Permit, error) {
				if c.name == "options" {
					return l.TryAcquire(ctx, "a.example", 3)
				}
				return l.TryAcquireRule(ctx, "a.example", c.rule)
			}
			p, err := take()
			if err != nil {
				t.Fatalf("%s: first: %v", c.name, err)
			}
			if q, err := take(); !errors.Is(err, ErrBusy) {
				q.Release(ctx)
				t.Fatalf("%s: a second permit while the first is held: %v", c.name, err)
			}
			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			q, err := l.AcquireRule(short, "a.example", c.rule)
			cancel()
			if err == nil {
				q.Release(ctx)
				t.Fatalf("%s: Acquire got a second permit while the first is held", c.name)
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			var be *BusyError
			if _, err := take(); !errors.As(err, &be) || be.Full || be.Wait < MaxDelay-time.Minute {
				t.Fatalf("%s: after release: %v, want busy for about MaxDelay", c.name, err)
			}
			noKeyWithoutTTL(t, l)
		}
	})
}

// noKeyWithoutTTL fails the test if a key under l's prefix has no TTL.
func noKeyWithoutTTL(t *testing.T, l *Limiter) {
	t.Helper()
	ctx := context.Background()
	iter := l.rdb.Scan(ctx, 0, l.opts.prefix()+":*", 100).Iterator()
	n := 0
	for iter.Next(ctx) {
		n++
		ttl, err := l.rdb.PTTL(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < 0 {
			t.Errorf("key %s has no TTL (PTTL %s)", iter.Val(), ttl)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("no keys under %s: the test looked in the wrong place", l.opts.prefix())
	}
}

// A prefix or an option that cannot work makes every call fail with
// ErrInvalid (New has no error return). A prefix with braces would change
// the keys' Redis Cluster hash tag: "{}" is an empty tag, and one site's
// keys would land in different slots (CROSSSLOT).
func TestInvalidOptions(t *testing.T) {
	ctx := ctxT(t)
	rdb := newClient(t)
	for _, o := range []Options{
		{Prefix: "{}"}, {Prefix: "a{}"}, {Prefix: "a}b"}, {Prefix: "a b"}, {Prefix: "a\nb"},
		{Prefix: strings.Repeat("p", keyname.MaxLen+1)},
		{Lease: -time.Second}, {Lease: MaxLease + time.Second}, {Delay: -time.Second},
		{LockTTL: -1}, {LockTTL: 2 * MaxLease}, {Poll: -1}, {StopMargin: -1},
	} {
		l := New(rdb, &o)
		short, cancel := context.WithTimeout(ctx, 2*time.Second) // if Acquire wrongly waits
		_, err1 := l.TryAcquire(ctx, "a.example", 1)
		_, err2 := l.Acquire(short, "a.example", 1)
		cancel()
		err3 := l.Backoff(ctx, "a.example", time.Second)
		_, err4 := l.Status(ctx, "a.example", 1)
		for _, err := range []error{err1, err2, err3, err4} {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Options{Prefix: %.40q, Lease: %s, Delay: %s, LockTTL: %s, Poll: %s, StopMargin: %s}: %v, want ErrInvalid",
					o.Prefix, o.Lease, o.Delay, o.LockTTL, o.Poll, o.StopMargin, err)
			}
		}
		if o.Prefix != "" && !errors.Is(err1, keyname.ErrInvalid) {
			t.Errorf("prefix %.40q: %v, want keyname.ErrInvalid too", o.Prefix, err1)
		}
		l.Close()
	}
	// The tests of this package write only under "t:" prefixes: a key
	// elsewhere came from a rejected option.
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "t:") {
			t.Errorf("key %.60q written under a rejected option", k)
		}
	}
}

// Site names follow the same rule as every other name in a key.
func TestInvalidSiteNames(t *testing.T) {
	ctx := ctxT(t)
	l := newLimiter(t, newClient(t), Options{})
	for _, site := range []string{"", "{}", "a{}", "a}", "a b", "a\x00b", "\xff", strings.Repeat("s", keyname.MaxLen+1)} {
		_, err := l.TryAcquire(ctx, site, 1)
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, keyname.ErrInvalid) {
			t.Errorf("TryAcquire(%q) = %v, want ErrInvalid and keyname.ErrInvalid", site, err)
		}
	}
}
