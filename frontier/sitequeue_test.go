package frontier

import (
	"fmt"
	"strings"
	"testing"
)

// sitePages are n URLs of site, from offset on.
func sitePages(site string, offset, n int) []string {
	u := make([]string, n)
	for i := range u {
		u[i] = fmt.Sprintf("http://%s/p%d", site, offset+i)
	}
	return u
}

// A site's queue takes at most MaxQueuedPerSite URLs: the rest of a batch of
// links to it is dropped, counted in SiteFull, and not remembered as seen,
// by Redis or by the process, so the same links sent again once the queue
// has room are admitted. Another site's links are not held back.
func TestSiteQueueBound(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxQueuedPerSite: 10, Shards: 1})
	n, err := f.Add(ctx, 0, append(sitePages("trap.test", 0, 25), sitePages("fine.test", 0, 5)...)...)
	if err != nil || n != 15 {
		t.Fatalf("Add: %d admitted, %v; want 10 of trap.test and 5 of fine.test", n, err)
	}
	st, err := f.Stats(ctx)
	if err != nil || st.Queued != 15 || st.SiteFull != 15 || st.Seen != 15 {
		t.Fatalf("stats %+v, %v: want 15 queued, 15 dropped at the bound, 15 seen", st, err)
	}
	got := drain(t, ctx, f)
	trap := 0
	for _, u := range got {
		if strings.Contains(u, "trap.test") {
			trap++
		}
	}
	if len(got) != 15 || trap != 10 {
		t.Fatalf("handed out %d URLs, %d of trap.test: want 15 and 10", len(got), trap)
	}
	// The same links again: the first 10 are seen, the dropped ones are
	// new, as far as the bound.
	n, err = f.Add(ctx, 0, sitePages("trap.test", 0, 25)...)
	if err != nil || n != 10 {
		t.Fatalf("Add again: %d admitted, %v; want the 10 dropped first that fit now", n, err)
	}
	if got := drain(t, ctx, f); len(got) != 10 || got[0] != "http://trap.test/p10" {
		t.Fatalf("handed out %v; want p10 to p19", got)
	}
}

// A page's links go through the same bound when its settlement admits
// them; a negative MaxQueuedPerSite sets none.
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

	none := newFrontier(t, Options{MaxQueuedPerSite: -1, Shards: 1})
	if n, err := none.Add(ctx, 0, sitePages("big.test", 0, 500)...); err != nil || n != 500 {
		t.Fatalf("Add with no bound: %d admitted, %v; want 500", n, err)
	}
}
