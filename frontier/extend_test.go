package frontier

import (
	"errors"
	"testing"
	"time"
)

// Extend keeps an item with its worker past the visibility timeout, as
// often as it is called; once the item is settled, or was handed out
// again, it says so (ErrLost).
func TestExtendKeepsItem(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 1, Visibility: 400 * time.Millisecond})
	if _, err := f.Add(ctx, 0, "http://a.example/1", "http://b.example/1"); err != nil {
		t.Fatal(err)
	}
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 { // 1.2 s, three visibility timeouts
		time.Sleep(300 * time.Millisecond)
		if err := f.Extend(ctx, it); err != nil {
			t.Fatalf("Extend of an item held: %v", err)
		}
	}
	// other was not extended: it is handed out again, and it alone.
	again, err := nextSoon(ctx, f, time.Second)
	if err != nil || again.URL != other.URL {
		t.Fatalf("after the timeout: %+v, %v; want %s again (only it)", again, err, other.URL)
	}
	if err := f.Extend(ctx, other); !errors.Is(err, ErrLost) {
		t.Fatalf("Extend of an item handed out again: %v, want ErrLost", err)
	}
	if r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched}); r.Settled != nil || r.Unsettled {
		t.Fatalf("settling the extended item: %v", r.Settled)
	}
	if err := f.Extend(ctx, it); !errors.Is(err, ErrLost) {
		t.Fatalf("Extend of a settled item: %v, want ErrLost", err)
	}
}

// An Extend after the crawl was deleted under its worker (delete --force)
// finds nothing held and makes none of the crawl's keys again, though it
// carries the shard's refresh.
func TestExtendAfterDeleteMakesNoKeys(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 1})
	it := deletedUnder(t, f)
	f.lay.Load().shards[0].kept.Store(0) // its next call carries the refresh
	if err := f.Extend(ctx, it); !errors.Is(err, ErrLost) {
		t.Fatalf("Extend after the delete: %v, want ErrLost", err)
	}
	keys, err := f.rdb.Keys(ctx, f.o.Prefix+":*"+f.o.Crawl+"*").Result()
	if keys = notTomb(keys); err != nil || len(keys) != 0 {
		t.Fatalf("after Extend of a deleted crawl: keys %v, %v; want none", keys, err)
	}
}
