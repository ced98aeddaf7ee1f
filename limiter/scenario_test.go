package limiter

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// With a crawl delay, permits come one at a time and each grant starts at
// least the delay after the previous release, across workers.
func TestCrawlDelaySpacing(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		const delay = 150 * time.Millisecond
		prefix := testPrefix(t)
		type span struct{ grant, release time.Time }
		var mu sync.Mutex
		var spans []span
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			l := newLimiter(t, rdb, Options{Mode: mode, Prefix: prefix, Delay: delay})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 2; i++ {
					// A limit of 3 is asked for; the delay forces 1.
					p, err := l.Acquire(ctx, "slow.example", 3)
					if err != nil {
						t.Error(err)
						return
					}
					// Grant time is read after Acquire returns (no earlier than
					// Redis granted), release time before Release is called (no
					// later than Redis released): the gap seen here is never
					// larger than the real one.
					s := span{grant: time.Now()}
					time.Sleep(5 * time.Millisecond)
					s.release = time.Now()
					mu.Lock()
					spans = append(spans, s)
					mu.Unlock()
					p.Release(ctx)
				}
			}()
		}
		wg.Wait()
		slices.SortFunc(spans, func(a, b span) int { return a.grant.Compare(b.grant) })
		if len(spans) != 6 {
			t.Fatalf("%d grants, want 6", len(spans))
		}
		for i := 1; i < len(spans); i++ {
			if gap := spans[i].grant.Sub(spans[i-1].release); gap < delay {
				t.Errorf("grant %d started %v after the previous release; crawl delay is %v", i, gap, delay)
			}
		}
	})
}

// TryAcquire during a crawl delay is refused with the time left.
func TestCrawlDelayTryAcquire(t *testing.T) {
	ctx := ctxT(t)
	l := newLimiter(t, newClient(t), Options{})
	rule := Rule{Limit: 5, Delay: time.Second}
	p, err := l.TryAcquireRule(ctx, "d.example", rule)
	if err != nil {
		t.Fatal(err)
	}
	if p.Rule().Limit != 1 {
		t.Fatalf("a delay must force limit 1, got %d", p.Rule().Limit)
	}
	p.Release(ctx)
	_, err = l.TryAcquireRule(ctx, "d.example", rule)
	var busy *BusyError
	// At most the delay, rounded up to Redis's whole millisecond.
	if !errors.As(err, &busy) || busy.Wait <= 500*time.Millisecond || busy.Wait > time.Second+time.Millisecond {
		t.Fatalf("TryAcquire right after a release: %v, want busy for about 1s", err)
	}
}

// skewed returns a worker clock off by d, with no monotonic reading, as a
// machine with a wrong wall clock would have.
func skewed(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d).Round(0) }
}

// Workers whose clocks are an hour off behave exactly like a worker with the
// right time: leases, limits and delays are all Redis's.
func TestClockSkewChangesNothing(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		const lease = 600 * time.Millisecond
		prefix := testPrefix(t)
		ahead := newLimiter(t, rdb, Options{Mode: mode, Prefix: prefix, Lease: lease, Now: skewed(time.Hour)})
		behind := newLimiter(t, rdb, Options{Mode: mode, Prefix: prefix, Lease: lease, Now: skewed(-time.Hour)})
		right := newLimiter(t, rdb, Options{Mode: mode, Prefix: prefix, Lease: lease})

		// A holder whose clock is behind is not taken for expired...
		p, err := behind.Acquire(ctx, "skew.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []*Limiter{right, ahead} {
			if _, err := l.TryAcquire(ctx, "skew.example", 1); !errors.Is(err, ErrBusy) {
				t.Fatalf("slot of a holder with a slow clock was handed out: %v", err)
			}
		}
		// ...and its own deadline is one lease on its own clock.
		if left := p.Deadline().Sub(skewed(-time.Hour)()); left < lease/2 || left > lease {
			t.Fatalf("deadline %v ahead on the holder's clock, want just under %v", left, lease)
		}
		// It expires after one lease of Redis time, no sooner and no later.
		start := time.Now()
		q, err := ahead.Acquire(ctx, "skew.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited > 3*lease {
			t.Fatalf("waited %v for a %v lease", waited, lease)
		}
		<-p.Done()
		// A holder whose clock is ahead keeps its slot while it refreshes.
		q.KeepAlive(ctx)
		time.Sleep(2 * lease)
		if _, err := behind.TryAcquire(ctx, "skew.example", 1); !errors.Is(err, ErrBusy) {
			t.Fatalf("kept-alive permit of a fast clock lost its slot: %v", err)
		}
		if err := q.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Every key a site uses has a TTL, and an idle site leaves nothing behind.
func TestKeysExpireWhenIdle(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		const lease = 200 * time.Millisecond
		l := newLimiter(t, rdb, Options{Mode: mode, Lease: lease})
		pattern := l.opts.prefix() + ":*"
		rule := Rule{Limit: 1, Delay: 50 * time.Millisecond}
		p, err := l.AcquireRule(ctx, "ttl.example", rule)
		if err != nil {
			t.Fatal(err)
		}
		// A waiter, and a permit that dies without release.
		waiting := make(chan *Permit)
		go func() { q, _ := l.AcquireRule(ctx, "ttl.example", rule); waiting <- q }()
		waitFor(t, "waiter to queue", func() bool { _, o := members(t, rdb, l, "ttl.example"); return len(o) == 2 })
		p.Release(ctx)
		<-waiting // never released: it must expire
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil || len(keys) < 4 {
			t.Fatalf("keys in use: %v %v", keys, err)
		}
		for _, k := range keys {
			if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 {
				t.Errorf("key %s has no TTL (%v)", k, ttl)
			}
		}
		waitFor(t, "keys to expire", func() bool {
			keys, _ := rdb.Keys(ctx, pattern).Result()
			return len(keys) == 0
		})
	})
}

// All of a site's keys and its channel hash to one Redis Cluster slot, as a
// real cluster-enabled redis-server computes it; and the limiter works through
// a ClusterClient on a 3-master cluster (scripts and pipelines would fail with
// CROSSSLOT otherwise), for sites on every node, each node's clock its own.
func TestRedisCluster(t *testing.T) {
	rc, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := ctxT(t)
	cc := rc.Client()
	defer cc.Close()
	for _, site := range []string{"example.com", "127.0.0.1:8080", "xn--bcher-kva.example"} {
		k := keysFor("polite", site)
		want := cc.ClusterKeySlot(ctx, "{"+site+"}").Val()
		for _, name := range k.all() {
			if !strings.Contains(name, "{"+site+"}") {
				t.Errorf("%s lacks the site's hash tag", name)
			}
			if got, err := cc.ClusterKeySlot(ctx, name).Result(); err != nil || got != want {
				t.Errorf("%s: slot %d (%v), want %d", name, got, err, want)
			}
		}
	}

	// A site on each node.
	byNode := map[string]string{}
	for i := 0; len(byNode) < 3 && i < 1000; i++ {
		site := fmt.Sprintf("site%d.example", i)
		node, err := cc.MasterForKey(ctx, "{"+site+"}")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byNode[node.Options().Addr]; !ok {
			byNode[node.Options().Addr] = site
		}
	}
	if len(byNode) != 3 {
		t.Fatalf("sites on %d nodes, want 3", len(byNode))
	}
	for _, mode := range []Mode{ModeLocked, ModeAtomic} {
		l := New(cc, &Options{Mode: mode})
		defer l.Close()
		for addr, site := range byNode {
			p, err := l.Acquire(ctx, site, 1)
			if err != nil {
				t.Fatalf("%s on the node at %s: %v", mode, addr, err)
			}
			if err := p.Refresh(ctx); err != nil {
				t.Fatalf("%s refresh on the node at %s: %v", mode, addr, err)
			}
			got := make(chan error, 1)
			go func() {
				q, err := l.Acquire(ctx, site, 1)
				if err == nil {
					err = q.Release(ctx)
				}
				got <- err
			}()
			time.Sleep(50 * time.Millisecond)
			if _, err := l.TryAcquire(ctx, site, 1); !errors.Is(err, ErrBusy) {
				t.Fatalf("%s on the node at %s: %v, want busy", mode, addr, err)
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("%s waiter on the node at %s: %v", mode, addr, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s waiter on the node at %s was never granted", mode, addr)
			}
		}
	}
	if left, err := New(cc, nil).GuardLeft(ctx); err != nil || left != 0 {
		t.Fatalf("GuardLeft on the cluster after the guard: %s, %v", left, err)
	}
}

// Pruning rewrites owners (ZINTERSTORE drops a key's TTL); whatever path did
// the pruning, the keys must still expire once every holder has died.
func TestKeysExpireAfterPruningPaths(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		const lease = 200 * time.Millisecond
		l := newLimiter(t, rdb, Options{Mode: mode, Lease: lease})
		pattern := l.opts.prefix() + ":*"
		// Two holders that die (never released); then, once they have
		// expired, a busy TryAcquire and a release prune them.
		if _, err := l.Acquire(ctx, "prune.example", 2); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease / 2)
		if _, err := l.Acquire(ctx, "prune.example", 2); err != nil {
			t.Fatal(err)
		}
		p, err := l.Acquire(ctx, "prune.example", 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.TryAcquire(ctx, "prune.example", 1); !errors.Is(err, ErrBusy) {
			t.Fatalf("want busy, got %v", err)
		}
		time.Sleep(lease*3/5 + 10*time.Millisecond) // the first holder has expired
		if _, err := l.TryAcquire(ctx, "prune.example", 2); !errors.Is(err, ErrBusy) {
			t.Fatalf("want busy, got %v", err)
		}
		p.Release(ctx) // leaves the second holder, which dies too
		waitFor(t, "keys to expire", func() bool {
			keys, _ := rdb.Keys(ctx, pattern).Result()
			return len(keys) == 0
		})
	})
}

// A holder whose refreshes cannot reach Redis (the server is frozen) loses its
// permit by its own clock, no later than one lease after its last confirmed
// refresh; once Redis is back, the crawl goes on.
func TestSelfFencingWhenRedisFreezes(t *testing.T) {
	frozen, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	rdb := frozen.Client()
	defer rdb.Close()
	ctx := ctxT(t)
	const lease = 600 * time.Millisecond
	l := New(rdb, &Options{Lease: lease})
	defer l.Close()
	p, err := l.Acquire(ctx, "frozen.example", 1)
	if err != nil {
		t.Fatal(err)
	}
	p.KeepAlive(ctx)
	time.Sleep(lease / 2) // at least one refresh confirmed
	if err := frozen.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			frozen.Resume()
		}
	}()
	paused := time.Now()
	select {
	case <-p.Done():
	case <-time.After(10 * lease):
		t.Fatal("permit still held 10 leases after Redis froze")
	}
	if lostAfter := time.Since(paused); lostAfter > 2*lease {
		t.Errorf("Done closed %v after Redis froze; the lease is %v", lostAfter, lease)
	}
	if err := p.Err(); !errors.Is(err, ErrPermitLost) {
		t.Fatalf("Err() = %v", err)
	}
	frozen.Resume()
	resumed = true
	if err := p.Release(ctx); !errors.Is(err, ErrPermitLost) {
		t.Fatalf("release after losing the permit: %v, want ErrPermitLost", err)
	}
	q, err := l.Acquire(ctx, "frozen.example", 1)
	if err != nil {
		t.Fatalf("acquire after Redis came back: %v", err)
	}
	q.Release(ctx)
}

// A Retry-After from one worker holds every worker off the site.
func TestBackoffHoldsTheFleet(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		a := newLimiter(t, rdb, Options{Mode: mode})
		b := newLimiter(t, rdb, Options{Mode: mode, Prefix: a.opts.prefix()})
		if err := a.Backoff(ctx, "busy.example", 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		a.Backoff(ctx, "busy.example", 10*time.Millisecond) // never shortens
		_, err := b.TryAcquire(ctx, "busy.example", 3)
		var busy *BusyError
		if !errors.As(err, &busy) || busy.Wait < 200*time.Millisecond {
			t.Fatalf("during a backoff: %v", err)
		}
		st, err := b.Status(ctx, "busy.example", 3)
		if err != nil || st.NextIn < 200*time.Millisecond || st.Holders != 0 {
			t.Fatalf("status during a backoff: %+v %v", st, err)
		}
		start := time.Now()
		p, err := b.Acquire(ctx, "busy.example", 3)
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < 150*time.Millisecond {
			t.Fatalf("acquired %v into a 300ms backoff", waited)
		}
		q, _ := b.Acquire(ctx, "busy.example", 3)
		st, _ = b.Status(ctx, "busy.example", 1)
		if st.Holders != 1 || st.Waiting != 1 {
			t.Fatalf("status with 2 live entries, limit 1: %+v", st)
		}
		p.Release(ctx)
		q.Release(ctx)
	})
}
