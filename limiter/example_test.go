package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/redis/go-redis/v9"
)

// A worker takes a permit before a request, keeps it alive while the body
// streams, stops if it is lost, and gives it back.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	l := limiter.New(rdb, &limiter.Options{Prefix: "example", Lease: 10 * time.Second})
	defer l.Close()
	ctx := context.Background()

	p, err := l.Acquire(ctx, "example.com", 3) // blocks until one of 3 slots is free
	if err != nil {
		fmt.Println(err)
		return
	}
	p.KeepAlive(ctx)               // refresh every Lease/3 while we work
	work, cancel := p.Context(ctx) // cancelled if the permit is lost
	_ = work                       // ... do the request under work ...
	cancel()
	fmt.Println("fetched under permit for", p.Site(), "err:", p.Err())
	if err := p.Release(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: fetched under permit for example.com err: <nil>
}

// TryAcquire never waits: a full site answers ErrBusy with a hint of how
// long to wait.
func ExampleLimiter_TryAcquire() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	l := limiter.New(rdb, &limiter.Options{Prefix: "example-try"})
	defer l.Close()
	ctx := context.Background()

	p, _ := l.TryAcquire(ctx, "one-at-a-time.example", 1)
	_, err := l.TryAcquire(ctx, "one-at-a-time.example", 1)
	var busy *limiter.BusyError
	fmt.Println(errors.Is(err, limiter.ErrBusy), errors.As(err, &busy) && busy.Wait > 0)
	p.Release(ctx)
	// Output: true true
}

// A crawl delay (from robots.txt) makes the site one-at-a-time, with the
// delay between one release and the next grant, fleet-wide.
func ExampleLimiter_AcquireRule() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	l := limiter.New(rdb, &limiter.Options{Prefix: "example-rule"})
	defer l.Close()
	ctx := context.Background()

	rule := limiter.Rule{Limit: 3, Delay: 100 * time.Millisecond}
	p, _ := l.AcquireRule(ctx, "polite.example", rule)
	released := time.Now()
	p.Release(ctx)
	q, _ := l.AcquireRule(ctx, "polite.example", rule)
	fmt.Println("limit", q.Rule().Limit, "waited at least the delay:", time.Since(released) >= rule.Delay)
	q.Release(ctx)
	// Output: limit 1 waited at least the delay: true
}

// ReleaseOn puts a permit's release on a pipeline that carries other
// commands (here, recording the page), so both cost one round trip.
func ExamplePermit_ReleaseOn() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	l := limiter.New(rdb, &limiter.Options{Prefix: "example"})
	defer l.Close()
	ctx := context.Background()

	p, err := l.Acquire(ctx, "example.org", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... fetch the page under p ...
	pipe := rdb.Pipeline()
	after := p.ReleaseOn(ctx, pipe)
	done := pipe.Incr(ctx, "example:pages")
	if _, err := pipe.Exec(ctx); err != nil && !limiter.ScriptMissing(err) {
		fmt.Println(err) // the release's own error comes from after
	}
	fmt.Println("released:", after(), "recorded:", done.Err() == nil)
	// Output: released: <nil> recorded: true
}

// A worker whose next request goes to the same site keeps its slot in the
// release's own script call (when a newcomer would have been granted it),
// and fetches the next page under the permit kept; else it takes the next
// permit the usual way.
func ExamplePermit_KeepOn() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	l := limiter.New(rdb, &limiter.Options{Prefix: "example", Mode: limiter.ModeAtomic})
	defer l.Close()
	ctx := context.Background()
	rule := limiter.Rule{Limit: 2}

	p, err := l.AcquireRule(ctx, "keep.example.org", rule)
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... fetch a page under p ...
	pipe := rdb.Pipeline()
	released, kept := p.KeepOn(ctx, pipe, rule)
	_, _ = pipe.Exec(ctx) // each command's outcome is read from it
	next, err := kept()
	if err != nil {
		next, err = l.AcquireRule(ctx, "keep.example.org", rule) // refused: the usual way
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("released:", released(), "same slot:", next.ID() == p.ID())
	// ... fetch the next page under next ...
	fmt.Println("released:", next.Release(ctx))
	// Output:
	// released: <nil> same slot: true
	// released: <nil>
}

// At start, a process can learn whether Redis carries its wake-up
// messages: without them (an ACL without the channels under the prefix)
// its waiters still get their permits, at their next poll.
func ExampleLimiter_CheckWakeups() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	l := limiter.New(rdb, &limiter.Options{Prefix: "example"})
	defer l.Close()
	if err := l.CheckWakeups(context.Background()); err != nil {
		fmt.Println("waiters will poll:", err)
		return
	}
	fmt.Println("wake-ups carried")
	// Output: wake-ups carried
}
