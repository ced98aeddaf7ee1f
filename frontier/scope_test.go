package frontier

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/keyname"
)

// A prefix or crawl name that would change the crawl's hash tag ("{}",
// "a{}") or break line-based output such as `crawler status` (a newline) is
// refused: every call fails with an error that says so, and nothing is
// written to Redis.
func TestInvalidNamesAreRejected(t *testing.T) {
	ctx := ctxT(t)
	rdb := srv.Client()
	defer rdb.Close()
	for _, tc := range []struct{ prefix, crawl, what string }{
		{"{}", "ok", "prefix"}, {"a{}", "ok", "prefix"}, {"a\nb", "ok", "prefix"},
		{"t:names", "{}", "crawl name"}, {"t:names", "a{}", "crawl name"}, {"t:names", "a\nb", "crawl name"},
	} {
		f := New(rdb, &Options{Prefix: tc.prefix, Crawl: tc.crawl})
		err := f.Err()
		if !errors.Is(err, keyname.ErrInvalid) || !strings.HasPrefix(err.Error(), "frontier: ") || !strings.Contains(err.Error(), tc.what) {
			t.Errorf("prefix %q, crawl %q: Err() = %v; want a frontier error naming the %s, wrapping keyname.ErrInvalid", tc.prefix, tc.crawl, err, tc.what)
			continue
		}
		calls := map[string]error{}
		_, calls["Add"] = f.Add(ctx, 0, "http://a.example/")
		_, calls["Seed"] = f.Seed(ctx, "http://a.example/")
		_, calls["Next"] = f.Next(ctx)
		calls["Done"] = f.Done(ctx, Item{ID: "1", URL: "http://a.example/"})
		_, calls["Retry"] = f.Retry(ctx, Item{ID: "1", URL: "http://a.example/"}, 0)
		calls["Defer"] = f.Defer(ctx, Item{ID: "1"}, 0)
		calls["Release"] = f.Release(ctx, Item{ID: "1"})
		calls["Hold"] = f.Hold(ctx, "a.example", time.Second)
		_, calls["DoneNext settled"], calls["DoneNext"] = f.DoneNext(ctx, Item{ID: "1"}, []string{"http://a.example/1"})
		_, calls["Stats"] = f.Stats(ctx)
		_, calls["Sites"] = f.Sites(ctx)
		_, calls["Scope"] = f.Scope(ctx)
		for name, got := range calls {
			if !errors.Is(got, keyname.ErrInvalid) {
				t.Errorf("prefix %q, crawl %q: %s = %v; want the Err() error", tc.prefix, tc.crawl, name, got)
			}
		}
	}
	for _, pattern := range []string{"{}:*", "a{}:*", "a\nb:*", "t:names:{crawl:{}}:*", "t:names:{crawl:a{}}:*", "t:names:{crawl:a\nb}:*"} {
		if keys, err := rdb.Keys(ctx, pattern).Result(); err != nil || len(keys) > 0 {
			t.Errorf("keys %q in Redis after refused calls: %q %v", pattern, keys, err)
		}
	}
}

// Seed puts the seeds' sites in the crawl's scope, in Redis beside the
// crawl's other keys, and with their TTL; Add does not. Another Frontier
// value on the same crawl (another process) reads the scope, and learns
// from Next, at no cost, that it grew.
func TestSeedKeepsTheScopeWithTheCrawl(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxPages: 2, TTL: time.Hour})
	other := New(f.rdb, &Options{Crawl: f.o.Crawl, TTL: time.Hour, MaxPages: 2}) // a seedless process
	if sites, err := other.Scope(ctx); err != nil || len(sites) != 0 || other.ScopeLen() != 0 {
		t.Fatalf("scope before seeding: %q, %v, len %d; want empty", sites, err, other.ScopeLen())
	}
	if _, err := other.Next(ctx); !errors.Is(err, ErrDone) || other.ScopeLen() != 0 {
		t.Fatalf("Next before seeding: %v, scope len %d", err, other.ScopeLen())
	}
	n, err := f.Seed(ctx, "http://a.example/", "HTTP://B.example:80/x", "http://a.example/2")
	if err != nil || n != 2 {
		t.Fatalf("Seed: %d, %v; want 2 admitted (page limit 2)", n, err)
	}
	if _, err := f.Add(ctx, 1, "http://c.example/"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seed(ctx, "http://d.example/", "javascript:x"); err == nil {
		t.Fatal("Seed took a javascript: URL")
	}
	if _, err := f.Seed(ctx, "http://a.example/"); err != nil { // seeded again, by another process
		t.Fatal(err)
	}
	// The seed past the page limit still names its site: b.example.
	want := []string{"a.example", "b.example"}
	if ttl, err := f.rdb.PTTL(ctx, f.scope).Result(); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Errorf("scope key TTL %v, %v; want the crawl's (1h)", ttl, err)
	}
	if _, err := other.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if other.ScopeLen() != len(want) {
		t.Fatalf("after Next, ScopeLen() = %d; want %d", other.ScopeLen(), len(want))
	}
	sites, err := other.Scope(ctx)
	slices.Sort(sites)
	if err != nil || !slices.Equal(sites, want) {
		t.Fatalf("scope %q, %v; want %q (not c.example: added as a link; not d.example: its seeding failed)", sites, err, want)
	}
}
