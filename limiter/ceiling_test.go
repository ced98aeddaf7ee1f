package limiter

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A site with contributors applies the lowest limit any of them asked for:
// once b has asked for 1, a's requests (asking for 3) get one permit at a
// time, and the permit says so.
func TestCeilingLowestLimit(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		l := newLimiter(t, newClient(t), Options{Mode: mode})
		a, b := Rule{Limit: 3, From: "a.shop.example"}, Rule{Limit: 1, From: "b.shop.example"}
		// Before b has asked, a's own rule holds: 3 at once.
		var held []*Permit
		for i := range 3 {
			p, err := l.TryAcquireRule(ctx, "shop.example", a)
			if err != nil {
				t.Fatalf("a's permit %d before b asked: %v", i, err)
			}
			if got := p.Rule(); got.Limit != 3 || got.From != a.From {
				t.Fatalf("a's permit before b asked: Rule %+v, want limit 3 from %s", got, a.From)
			}
			held = append(held, p)
		}
		for _, p := range held {
			p.Release(ctx)
		}
		p, err := l.TryAcquireRule(ctx, "shop.example", b)
		if err != nil {
			t.Fatal(err)
		}
		p.Release(ctx)
		p, err = l.TryAcquireRule(ctx, "shop.example", a)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
		if got := p.Rule(); got.Limit != 1 || !p.TookLastSlot() {
			t.Errorf("a's permit after b asked for 1: Rule %+v, TookLastSlot %v; want limit 1, true", got, p.TookLastSlot())
		}
		_, err = l.TryAcquireRule(ctx, "shop.example", a)
		var busy *BusyError
		if !errors.As(err, &busy) || !busy.Full {
			t.Fatalf("a's second permit after b asked for 1: %v, want a full *BusyError", err)
		}
		// A request without a contributor is held to its own rule alone.
		q, err := l.TryAcquireRule(ctx, "shop.example", Rule{Limit: 2})
		if err != nil {
			t.Fatalf("a rule without From, limit 2, one held: %v", err)
		}
		q.Release(ctx)
	})
}

// A waiter that took its place under a higher limit is not let in above a
// lower one recorded since: neither by the wake-up of a release that was
// granted under the higher limit, nor by its own checks.
func TestCeilingHoldsWaitersQueuedHigher(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		opts := Options{Mode: mode, Poll: 20 * time.Millisecond}
		l := newLimiter(t, rdb, opts)
		other := newLimiter(t, rdb, Options{Mode: mode, Prefix: l.opts.prefix(), Poll: 20 * time.Millisecond})
		a, b := Rule{Limit: 3, From: "a.shop.example"}, Rule{Limit: 1, From: "b.shop.example"}
		var held []*Permit
		for range 3 {
			p, err := l.AcquireRule(ctx, "shop.example", a)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, p)
		}
		// A waiter of a, in another process, queued under limit 3.
		got := make(chan *Permit, 1)
		go func() {
			p, err := other.AcquireRule(ctx, "shop.example", a)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		waitFor(t, "the waiter's place", func() bool {
			_, o := members(t, rdb, l, "shop.example")
			return len(o) == 4
		})
		// b asks for 1 (it is busy: 3 are held) and so lowers the ceiling.
		if _, err := l.TryAcquireRule(ctx, "shop.example", b); !errors.Is(err, ErrBusy) {
			t.Fatalf("b with 3 held: %v, want ErrBusy", err)
		}
		// Releasing two of the three leaves one held: the waiter, second in
		// line, must not be let in, though it ranks below 3.
		for i := range 2 {
			if err := held[i].Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case p := <-got:
				t.Fatalf("after %d of 3 released under a ceiling of 1, the waiter got a permit (rule %+v)", i+1, p.Rule())
			case <-time.After(300 * time.Millisecond): // a few of its checks (Poll 20ms)
			}
		}
		if err := held[2].Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-got:
			if p == nil {
				t.Fatal("the waiter failed")
			}
			if r := p.Rule(); r.Limit != 1 {
				t.Errorf("the waiter's permit: Rule %+v, want limit 1", r)
			}
			p.Release(ctx)
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter got no permit after all were released")
		}
	})
}

// The longest delay any contributor asked for holds the whole site: a's
// permits (no delay of its own) are one at a time with b's delay between.
func TestCeilingLongestDelay(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		l := newLimiter(t, newClient(t), Options{Mode: mode})
		const delay = 2 * time.Second
		a, b := Rule{Limit: 3, From: "a.shop.example"}, Rule{Limit: 3, Delay: delay, From: "b.shop.example"}
		p, err := l.TryAcquireRule(ctx, "shop.example", b)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = l.TryAcquireRule(ctx, "shop.example", a)
		var busy *BusyError
		if !errors.As(err, &busy) || busy.Wait < delay/2 {
			t.Fatalf("a right after b's release, b asking for a %s delay: %v, want a *BusyError waiting about %s", delay, err, delay)
		}
		k := keysFor(l.opts.prefix(), "shop.example")
		if err := l.rdb.Del(ctx, k.next).Err(); err != nil { // skip b's delay
			t.Fatal(err)
		}
		p, err = l.TryAcquireRule(ctx, "shop.example", a)
		if err != nil {
			t.Fatal(err)
		}
		if r := p.Rule(); r.Limit != 1 || r.Delay != delay {
			t.Errorf("a's permit: Rule %+v, want limit 1 and delay %s", r, delay)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// a's release started b's delay.
		if _, err := l.TryAcquireRule(ctx, "shop.example", a); !errors.As(err, &busy) || busy.Wait < delay/2 {
			t.Fatalf("a right after a's release: %v, want a *BusyError waiting about %s", err, delay)
		}
	})
}

// A contributor's rule is replaced by its next one, and forgotten after
// Options.RuleMemory.
func TestCeilingReplacedAndForgotten(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		const memory = 500 * time.Millisecond
		l := newLimiter(t, newClient(t), Options{Mode: mode, RuleMemory: memory})
		limitOf := func(r Rule) int {
			t.Helper()
			p, err := l.TryAcquireRule(ctx, "shop.example", r)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release(ctx)
			return p.Rule().Limit
		}
		a := Rule{Limit: 3, From: "a.shop.example"}
		limitOf(Rule{Limit: 1, From: "b.shop.example"})
		if got := limitOf(a); got != 1 {
			t.Fatalf("a after b asked for 1: limit %d, want 1", got)
		}
		limitOf(Rule{Limit: 2, From: "b.shop.example"})
		if got := limitOf(a); got != 2 {
			t.Fatalf("a after b asked for 2 instead: limit %d, want 2", got)
		}
		time.Sleep(memory + 100*time.Millisecond)
		if got := limitOf(a); got != 3 {
			t.Fatalf("a %s after b last asked: limit %d, want 3 (b's rule forgotten)", memory+100*time.Millisecond, got)
		}
		k := keysFor(l.opts.prefix(), "shop.example")
		if ttl := l.rdb.PTTL(ctx, k.rules).Val(); ttl <= 0 || ttl > memory {
			t.Errorf("rules key TTL %s, want in (0, %s]", ttl, memory)
		}
	})
}

// The record is bounded: past ceilingMax contributors the rest are folded
// into one entry that keeps the strictest of their rules.
func TestCeilingBounded(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		l := newLimiter(t, newClient(t), Options{Mode: mode})
		const hosts = 100
		for i := range hosts {
			r := Rule{Limit: 3, From: fmt.Sprintf("h%d.shop.example", i)}
			if i == hosts-1 {
				r.Limit = 1 // the last, folded, asks for the least
			}
			p, err := l.TryAcquireRule(ctx, "shop.example", r)
			if err != nil {
				t.Fatalf("host %d: %v", i, err)
			}
			p.Release(ctx)
		}
		k := keysFor(l.opts.prefix(), "shop.example")
		if n := l.rdb.HLen(ctx, k.rules).Val(); n != 65 {
			t.Errorf("rules kept for %d hosts: %d, want 65 (64 and the folded)", hosts, n)
		}
		p, err := l.TryAcquireRule(ctx, "shop.example", Rule{Limit: 3, From: "h0.shop.example"})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
		if r := p.Rule(); r.Limit != 1 {
			t.Errorf("h0 after a folded host asked for 1: Rule %+v, want limit 1", r)
		}
	})
}

// Without contributors the ceiling costs nothing: host-keyed acquires and
// releases run no command on the rules hash, in either mode (counted by
// Redis); with one, they do.
func TestCeilingFreeWithoutContributors(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		rdb := newClient(t)
		l := newLimiter(t, rdb, Options{Mode: mode})
		run := func(r Rule) (hash, total float64) {
			const n = 20
			before := commandStats(t, rdb)
			for range n {
				p, err := l.AcquireRule(ctx, "solo.example", r)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			after := commandStats(t, rdb)
			for cmd, v := range after {
				d := v - before[cmd]
				if cmd == "info" {
					continue
				}
				if cmd == "hgetall" || cmd == "hset" || cmd == "hdel" {
					hash += d
				}
				total += d
			}
			return hash / n, total / n
		}
		run(Rule{Limit: 3}) // the site's keys exist from here on, as in steady use
		hash, total := run(Rule{Limit: 3})
		if hash != 0 {
			t.Errorf("host-keyed acquire+release: %.1f commands on the rules hash each, want 0", hash)
		}
		dhash, dtotal := run(Rule{Limit: 3, From: "a.solo.example"})
		if dhash == 0 {
			t.Errorf("with a contributor: no command on the rules hash: the ceiling was not applied")
		}
		t.Logf("%s: commands per uncontended acquire+release: host-keyed %.2f, with a contributor %.2f (%.2f on the rules hash)", mode, total, dtotal, dhash)
	})
}

// A contributor named like the folded entry, or unfit for a key, is refused.
func TestCeilingInvalidContributor(t *testing.T) {
	l := newLimiter(t, newClient(t), Options{})
	for _, from := range []string{"*", "a b", "a{b}"} {
		if _, err := l.TryAcquireRule(context.Background(), "shop.example", Rule{Limit: 1, From: from}); !errors.Is(err, ErrInvalid) {
			t.Errorf("From %q: %v, want ErrInvalid", from, err)
		}
	}
}

// A strict rule folded into '*' is forgotten RuleMemory after its last
// asker, even while looser folded hosts keep asking: they neither loosen
// it nor keep it alive.
func TestCeilingFoldedStrictRuleIsForgotten(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		ctx := ctxT(t)
		const memory = 800 * time.Millisecond
		l := newLimiter(t, newClient(t), Options{Mode: mode, RuleMemory: memory})
		ask := func(from string, limit int) int {
			p, err := l.TryAcquireRule(ctx, "shop.example", Rule{Limit: limit, From: from})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release(ctx)
			return p.Rule().Limit
		}
		for i := range 64 {
			ask(fmt.Sprintf("h%d.shop.example", i), 3)
		}
		if got := ask("strict.shop.example", 1); got != 1 { // folded into '*', asks once
			t.Fatalf("the strict host's own permit: limit %d, want 1", got)
		}
		if got := ask("h0.shop.example", 3); got != 1 {
			t.Fatalf("right after the strict host asked: limit %d, want 1", got)
		}
		for deadline := time.Now().Add(3 * memory); time.Now().Before(deadline); time.Sleep(memory / 6) {
			for i := range 64 {
				ask(fmt.Sprintf("h%d.shop.example", i), 3)
			}
			ask("late.shop.example", 3) // another folded host, a looser rule
		}
		if got := ask("h0.shop.example", 3); got != 3 {
			t.Errorf("%s after the strict host last asked (RuleMemory %s): limit %d, want 3", 3*memory, memory, got)
		}
	})
}
