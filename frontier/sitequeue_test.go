package frontier

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// sitePages are n URLs of site, from offset on.
func sitePages(site string, offset, n int) []string {
	u := make([]string, n)
	for i := range u {
		u[i] = fmt.Sprintf("http://%s/p%d", site, offset+i)
	}
	return u
}

// A site's queue takes at most MaxQueuedPerSite of the links a settlement
// brings: the rest of them is dropped, counted in SiteFull, and not
// remembered as seen, by Redis or by the process, so the same links found
// again once the queue has room are admitted. Another site's links are
// not held back.
func TestSiteQueueBound(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxQueuedPerSite: 10, Shards: 1})
	if _, err := f.Seed(ctx, "http://home.test/", "http://home.test/again"); err != nil {
		t.Fatal(err)
	}
	page, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	links := append(sitePages("trap.test", 0, 25), sitePages("fine.test", 0, 5)...)
	if r := f.Settle(ctx, Settlement{Item: page, Outcome: Fetched, Links: links}); r.Settled != nil {
		t.Fatal(r.Settled)
	}
	st, err := f.Stats(ctx)
	if err != nil || st.Queued != 16 || st.SiteFull != 15 || st.Seen != 17 {
		t.Fatalf("stats %+v, %v: want 16 queued (1 seed), 15 dropped at the bound, 17 seen", st, err)
	}
	got := drainExcept(t, ctx, f, "http://home.test/again")
	trap := 0
	for _, u := range got {
		if strings.Contains(u, "trap.test") {
			trap++
		}
	}
	if len(got) != 15 || trap != 10 {
		t.Fatalf("handed out %d URLs, %d of trap.test: want 15 and 10", len(got), trap)
	}
	// The same links on another page: the first 10 are seen, the dropped
	// ones are new, as far as the bound.
	again, err := nextSoon(ctx, f, 0)
	if err != nil || again.URL != "http://home.test/again" {
		t.Fatalf("Next: %+v, %v; want the second seed", again, err)
	}
	if r := f.Settle(ctx, Settlement{Item: again, Outcome: Fetched, Links: sitePages("trap.test", 0, 25)}); r.Settled != nil {
		t.Fatal(r.Settled)
	}
	if got := drain(t, ctx, f); len(got) != 10 || got[0] != "http://trap.test/p10" {
		t.Fatalf("handed out %v; want p10 to p19", got)
	}
}

// drainExcept is drain, but puts back (Released) the item with URL keep
// each time it comes, for later; it returns the others' URLs.
func drainExcept(t *testing.T, ctx context.Context, f *Frontier, keep string) []string {
	t.Helper()
	var got []string
	for {
		st, err := f.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queued+st.InFlight <= 1 {
			return got
		}
		it, err := nextSoon(ctx, f, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if it.URL == keep {
			if err := f.Release(ctx, it); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got = append(got, it.URL)
		if err := f.Done(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
}

// A page's links go through the bound however many there are; Seed and
// Add, whose callers bound what they admit (sitemaps: 200,000 URLs a
// site), are not held to it; a negative MaxQueuedPerSite sets none.
func TestSiteQueueBoundOnSettle(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxQueuedPerSite: 10, Shards: 1})
	if _, err := f.Seed(ctx, "http://trap.test/"); err != nil {
		t.Fatal(err)
	}
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Links: sitePages("trap.test", 0, 1000)}); r.Settled != nil {
		t.Fatal(r.Settled)
	}
	st, err := f.Stats(ctx)
	if err != nil || st.Queued != 10 || st.SiteFull != 990 || st.Done != 1 {
		t.Fatalf("stats %+v, %v: want 10 queued, 990 dropped at the bound", st, err)
	}
	if n, err := f.Add(ctx, 1, sitePages("trap.test", 5000, 50)...); err != nil || n != 50 {
		t.Fatalf("Add past the bound: %d admitted, %v; want all 50", n, err)
	}
	if n, err := f.Seed(ctx, sitePages("trap.test", 6000, 5)...); err != nil || n != 5 {
		t.Fatalf("Seed past the bound: %d admitted, %v; want all 5", n, err)
	}

	none := newFrontier(t, Options{MaxQueuedPerSite: -1, Shards: 1})
	if _, err := none.Seed(ctx, "http://big.test/"); err != nil {
		t.Fatal(err)
	}
	it, err = none.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	none.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Links: sitePages("big.test", 0, 500)})
	if st, err := none.Stats(ctx); err != nil || st.Queued != 500 || st.SiteFull != 0 {
		t.Fatalf("with no bound: %+v, %v; want 500 queued", st, err)
	}
}
