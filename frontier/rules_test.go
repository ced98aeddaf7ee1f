package frontier

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/polite-crawler/polite/robots"
)

// An allowed domain is put in the form robots.Site gives a host (case,
// IDNA, trailing dot, default port); a URL, a path or garbage is refused
// with ErrDomain, and so, with --site-key domain, is a name that is not a
// registered domain, the error naming the one to give.
func TestParseDomain(t *testing.T) {
	for _, tc := range []struct{ in, key, want, err string }{
		{"Example.COM", "", "example.com", ""},
		{"example.com.", "", "example.com", ""},
		{"BÜCHER.example", "", "xn--bcher-kva.example", ""},
		{"example.com:8080", "", "example.com:8080", ""},
		{"example.com:80", "", "example.com", ""},
		{"example.com:443", "", "example.com", ""},
		{"127.0.0.1:8081", "", "127.0.0.1:8081", ""},
		{"[0::1]", "", "[::1]", ""},
		{" a_b.example ", "", "a_b.example", ""},
		{"localhost", "", "localhost", ""},
		{"example.com", robots.SiteKeyDomain, "example.com", ""},
		{"http://example.com/", "", "", "is a URL"},
		{"example.com/path", "", "", "want a host name"},
		{"", "", "", "empty"},
		{"a..b", "", "", "not a host name"},
		{"-a.example", "", "", "not a host name"},
		{"1.2.3", "", "", "not a host name"},
		{"example.com:x", "", "", "want a host name"},
		{"user@example.com", "", "", "want a host name"},
		{"www.example.co.uk", robots.SiteKeyDomain, "", "give example.co.uk"},
		{"example.com:8080", robots.SiteKeyDomain, "", "give example.com"},
	} {
		got, err := ParseDomain(tc.in, tc.key)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseDomain(%q, %q) = %q, %v; want %q", tc.in, tc.key, got, err, tc.want)
		case tc.err != "" && (!errors.Is(err, ErrDomain) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseDomain(%q, %q) = %q, %v; want ErrDomain saying %q", tc.in, tc.key, got, err, tc.err)
		}
	}
}

// A link's site is in an allowed domain's scope when its host is the
// domain or a subdomain of it (Scrapy's rule), on any port unless the
// domain names one; an IP address only matches itself. Include and
// Exclude are matched against the normalised URL: with includes, one must
// match; any exclude drops it.
func TestScopeMatcher(t *testing.T) {
	m, err := ScopeRules{AllowDomains: []string{"example.com", "shop.test:8080", "127.0.0.1:9000", "[::1]"},
		Include: []string{`^https?://[^/]+/(docs|blog)/`, `\.html$`}, Exclude: []string{`[?&]session=`, `/private/`}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for site, want := range map[string]bool{
		"example.com": true, "www.example.com": true, "a.b.example.com:8443": true,
		"badexample.com": false, "example.com.evil.test": false, "com": false,
		"shop.test:8080": true, "x.shop.test:8080": true, "shop.test": false, "shop.test:8081": false,
		"127.0.0.1:9000": true, "127.0.0.1": false, "0.0.1:9000": false,
		"[::1]": true, "[::1]:8080": true, "[::2]": false,
	} {
		if got := m.Allowed(site); got != want {
			t.Errorf("Allowed(%q) = %v; want %v", site, got, want)
		}
	}
	for u, want := range map[string]bool{
		"http://a.test/docs/x": true, "http://a.test/blog/": true, "http://a.test/page.html": true,
		"http://a.test/other": false, "http://a.test/docs/x?session=1": false, "http://a.test/private/a.html": false,
	} {
		if got := m.URL(u); got != want {
			t.Errorf("URL(%q) = %v; want %v", u, got, want)
		}
	}
	if _, err := (ScopeRules{Include: []string{"("}}).Compile(); err == nil {
		t.Error("a bad regular expression compiled")
	}
	if _, err := (ScopeRules{AllowDomains: []string{"Example.com"}}).Compile(); !errors.Is(err, ErrDomain) {
		t.Errorf("a domain not in ParseDomain form: %v; want ErrDomain", err)
	}
	zero, _ := ScopeRules{}.Compile()
	if zero.Allowed("example.com") || !zero.URL("http://example.com/") {
		t.Error("the zero rules allow a domain or drop a URL")
	}
}

// The process that creates a crawl stores its scope rules in the crawl's
// meta; a later process that gives none adopts them (Rules), one that
// gives the same (in another order) joins, and one that gives others joins
// nothing: Seed and Next fail with ErrScopeConflict, and the meta keeps
// the creator's limits. Open's Meta shows the rules.
func TestScopeRulesLiveWithTheCrawl(t *testing.T) {
	ctx := ctxT(t)
	rules := ScopeRules{AllowDomains: []string{"b.example", "a.example"}, FollowExternal: 1, Include: []string{"/docs/"}}
	creator := newFrontier(t, Options{Scope: rules, Cap: 3})
	if _, err := creator.Seed(ctx, "http://seed.example/"); err != nil {
		t.Fatal(err)
	}
	adopter := New(creator.rdb, &Options{Crawl: creator.o.Crawl})
	got, err := adopter.Rules(ctx)
	if err != nil || !got.Equal(rules) || !slicesEqual(got.AllowDomains, []string{"a.example", "b.example"}) {
		t.Fatalf("a process with no rules: Rules() = %+v, %v; want the creator's %+v", got, err, rules)
	}
	same := New(creator.rdb, &Options{Crawl: creator.o.Crawl, Scope: ScopeRules{AllowDomains: []string{"a.example", "b.example", "a.example"}, FollowExternal: 1, Include: []string{"/docs/"}}})
	if _, err := same.Next(ctx); err != nil {
		t.Fatalf("a process with the same rules: Next = %v", err)
	}
	other := New(creator.rdb, &Options{Crawl: creator.o.Crawl, Cap: 7, Scope: ScopeRules{AllowDomains: []string{"a.example"}}})
	if _, err := other.Seed(ctx, "http://other.example/"); !errors.Is(err, ErrScopeConflict) || !strings.Contains(err.Error(), "allowed domains a.example b.example") {
		t.Errorf("a process with other rules: Seed = %v; want ErrScopeConflict naming the crawl's rules", err)
	}
	if _, err := other.Next(ctx); !errors.Is(err, ErrScopeConflict) {
		t.Errorf("a process with other rules: Next = %v; want ErrScopeConflict", err)
	}
	_, meta, err := Open(ctx, creator.rdb, &Options{Crawl: creator.o.Crawl})
	if err != nil || !meta.Scope.Equal(rules) || meta.MaxPerSite != 3 {
		t.Errorf("Open: %+v, %v; want the creator's scope and max per site 3", meta, err)
	}
	if sites, _ := creator.Scope(ctx); len(sites) != 1 {
		t.Errorf("scope %q: the conflicting Seed added a site", sites)
	}
	bad := New(creator.rdb, &Options{Crawl: creator.o.Crawl + ".bad", Scope: ScopeRules{Include: []string{"("}}})
	if _, err := bad.Seed(ctx, "http://a.example/"); err == nil || bad.Err() == nil {
		t.Errorf("rules that do not compile: Seed = %v, Err() = %v; want the rules' error", err, bad.Err())
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// Links settled as External are admitted one external hop further than
// their page; Links are at hop 0 again, whatever the page's.
func TestSettleCarriesExternalHops(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 1})
	if _, err := f.Seed(ctx, "http://in.example/"); err != nil {
		t.Fatal(err)
	}
	it := take(t, f, 1)[0]
	it.Hops = 2 // as if reached by two external hops
	if r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Links: []string{"http://in.example/back"}, External: []string{"http://out.example/"}}); r.Settled != nil {
		t.Fatal(r.Settled)
	}
	hops := map[string]int{}
	for _, it := range take(t, f, 2) {
		hops[it.URL] = it.Hops
		if it.Depth != 1 {
			t.Errorf("%s at depth %d; want 1", it.URL, it.Depth)
		}
	}
	if hops["http://in.example/back"] != 0 || hops["http://out.example/"] != 3 {
		t.Errorf("hops %v; want the in-scope link at 0, the external one at 3", hops)
	}
}

// A process that joins a crawl before anyone seeds it, with no scope
// options, stores no rules: the seeder's are the crawl's, and the early
// joiner reads them once stored. A seeder with no options stores the zero
// rules, so a later process with options is refused.
func TestEarlyJoinerDoesNotFixTheScope(t *testing.T) {
	ctx := ctxT(t)
	rules := ScopeRules{AllowDomains: []string{"a.example"}}
	early := newFrontier(t, Options{})
	if _, err := early.Seed(ctx); err != nil { // joins, seeds nothing
		t.Fatal(err)
	}
	if got, err := early.Rules(ctx); err != nil || !got.IsZero() || early.RulesStored() {
		t.Fatalf("before any seed: Rules() = %+v, %v, stored %v; want the zero rules, none stored", got, err, early.RulesStored())
	}
	seeder := New(early.rdb, &Options{Crawl: early.o.Crawl, Scope: rules})
	if _, err := seeder.Seed(ctx, "http://seed.example/"); err != nil {
		t.Fatalf("the seeder with options after an early joiner: %v", err)
	}
	if got, err := early.Rules(ctx); err != nil || !got.Equal(rules) || !early.RulesStored() {
		t.Errorf("the early joiner after the seed: Rules() = %+v, %v; want the seeder's %+v", got, err, rules)
	}

	plain := New(early.rdb, &Options{Crawl: early.o.Crawl + ".plain"})
	if _, err := plain.Seed(ctx, "http://seed.example/"); err != nil {
		t.Fatal(err)
	}
	if !plain.RulesStored() {
		t.Errorf("a seeder with no options left the crawl's rules unstored")
	}
	late := New(early.rdb, &Options{Crawl: early.o.Crawl + ".plain", Scope: rules})
	if _, err := late.Seed(ctx, "http://other.example/"); !errors.Is(err, ErrScopeConflict) {
		t.Errorf("options given after a seeder gave none: Seed = %v; want ErrScopeConflict", err)
	}
}

// Patterns are bounded in number, length and total length, so that every
// process of the crawl compiles their union quickly and surely; rules past
// the bounds are refused, not compiled.
func TestPatternsAreBounded(t *testing.T) {
	for name, r := range map[string]ScopeRules{
		"too many":        {Exclude: slices.Repeat([]string{"a"}, MaxPatterns+1)},
		"one too long":    {Include: []string{strings.Repeat("a", MaxPatternLen+1)}},
		"too long in all": {Include: slices.Repeat([]string{"[a-z]{1000}" + strings.Repeat("b", 1000)}, MaxPatternsLen/1000+1)},
	} {
		if err := r.Validate(); err == nil {
			t.Errorf("%s: Validate accepted them", name)
		}
		if _, err := r.Compile(); err == nil {
			t.Errorf("%s: Compile accepted them", name)
		}
	}
	ok := ScopeRules{Include: slices.Repeat([]string{"[a-z]{1000}" + strings.Repeat("b", 1000)}, MaxPatternsLen/1011)}
	if _, err := ok.Compile(); err != nil {
		t.Errorf("patterns within the bounds: %v", err)
	}
}
