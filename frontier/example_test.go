package frontier_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/redis/go-redis/v9"
)

// One worker's loop: seed the crawl, take an item, fetch it, settle it with
// the links found on it and take the next item in the same round trip, until
// the crawl is done for the whole fleet. Every worker of every process runs
// this loop on the same crawl; each URL is handed to one of them.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	ctx := context.Background()
	f := frontier.New(rdb, &frontier.Options{Prefix: "example", Crawl: "docs"})
	defer frontier.Delete(ctx, rdb, "example", "docs", frontier.DeleteOptions{})

	if _, err := f.Seed(ctx, "https://example.com/"); err != nil {
		fmt.Println(err)
		return
	}
	it, err := f.Next(ctx)
	for {
		var empty *frontier.EmptyError
		switch {
		case errors.Is(err, frontier.ErrDone):
			fmt.Println("crawl done")
			return
		case errors.As(err, &empty): // nothing ready yet: come back later
			time.Sleep(empty.Wait)
			it, err = f.Next(ctx)
			continue
		case err != nil:
			fmt.Println(err)
			return
		}
		fmt.Println("fetch", it.URL, "at depth", it.Depth)
		var links []string // ... fetch it.URL, and read its links ...
		if it.Depth == 0 {
			links = []string{"https://example.com/about", "https://example.com/"}
		}
		r := f.Settle(ctx, frontier.Settlement{Item: it, Outcome: frontier.Fetched, Links: links, Next: true})
		if r.Settled != nil {
			fmt.Println(r.Settled) // frontier.ErrLost: another worker has it now
		}
		it, err = r.Next, r.NextErr
	}
	// Output:
	// fetch https://example.com/ at depth 0
	// fetch https://example.com/about at depth 1
	// crawl done
}
