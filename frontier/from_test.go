package frontier

import (
	"testing"
)

// A link keeps the page it was found on (Item.From), through a retry too;
// a seed has none.
func TestLinksKnowTheirPage(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 1, Referrers: true})
	if _, err := f.Seed(ctx, "http://a.example/"); err != nil {
		t.Fatal(err)
	}
	seed := take(t, f, 1)[0]
	if seed.From != "" {
		t.Fatalf("seed from %q", seed.From)
	}
	r := f.Settle(ctx, Settlement{Item: seed, Outcome: Fetched, Next: true, Links: []string{"http://a.example/x"}})
	if r.Settled != nil || r.NextErr != nil || r.Next.URL != "http://a.example/x" || r.Next.From != seed.URL {
		t.Fatalf("the link: %+v, want from %s", r, seed.URL)
	}
	r = f.Settle(ctx, Settlement{Item: r.Next, Outcome: Retry, Next: true})
	if r.Next.URL != "http://a.example/x" || r.Next.From != seed.URL || r.Next.Attempts != 1 {
		t.Fatalf("retried: %+v, want from %s", r.Next, seed.URL)
	}
}
