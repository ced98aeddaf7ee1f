package crawl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// scoped is a crawler of crawl name whose process gives rules, logging to
// log.
func scoped(t *testing.T, name string, rules frontier.ScopeRules, log *logBuf) *Crawler {
	t.Helper()
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	prefix := "t:rules"
	lim := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: time.Second})
	t.Cleanup(func() { lim.Close() })
	rob := NewRobotsCache(rdb, lim, 3, robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"}, nil)
	fr := frontier.New(rdb, &frontier.Options{Prefix: prefix, Crawl: name, Scope: rules})
	o := Options{Workers: 1, UserAgent: "politebot/1.0"}
	if log != nil {
		o.Log = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return New(fr, lim, rob, o)
}

// The links of a page are sorted by the crawl's stored rules: to the
// seeds' sites and the allowed domains (subdomains too) in scope; to other
// sites off scope while the page's external hops allow one more, else
// dropped; failing include or exclude, dropped. The dropped are counted,
// and the first page with any is logged at info. A second process that
// gives no rules applies the crawl's; one that gives others cannot Seed
// or Run.
func TestLinksFollowTheCrawlsScopeRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("rules-%d", time.Now().UnixNano())
	rules := frontier.ScopeRules{AllowDomains: []string{"allowed.test"}, FollowExternal: 1, Exclude: []string{`/logout`}}
	var log logBuf
	first := scoped(t, name, rules, &log)
	if _, err := first.Seed(ctx, []string{"http://seed.test/"}); err != nil {
		t.Fatal(err)
	}
	links := []string{"http://seed.test/a", "http://www.allowed.test/b", "http://allowed.test:8080/c",
		"http://other.test/d", "http://seed.test/logout", "mailto:x@seed.test", "http://notallowed.test/e"}
	for _, c := range []*Crawler{first, scoped(t, name, frontier.ScopeRules{}, nil)} {
		c.startScope(ctx) // as Run does
		in, off := c.inScope(ctx, frontier.Item{URL: "http://seed.test/"}, links)
		wantIn := []string{"http://seed.test/a", "http://www.allowed.test/b", "http://allowed.test:8080/c"}
		wantOff := []string{"http://other.test/d", "http://notallowed.test/e"}
		if !slices.Equal(in, wantIn) || !slices.Equal(off, wantOff) {
			t.Errorf("from a page in scope: in %q, off %q; want %q and %q", in, off, wantIn, wantOff)
		}
		in, off = c.inScope(ctx, frontier.Item{URL: "http://other.test/d", Hops: 1}, links)
		if !slices.Equal(in, wantIn) || len(off) != 0 {
			t.Errorf("from a page one hop off: in %q, off %q; want %q and none (a second hop)", in, off, wantIn)
		}
		if p := c.Progress(); p.OutOfScope != 1+3 {
			t.Errorf("OutOfScope = %d; want 4 (the excluded link twice, two sites a second hop off)", p.OutOfScope)
		}
	}
	if s := log.String(); strings.Count(s, "level=INFO msg=\"links out of the crawl's scope dropped") != 1 {
		t.Errorf("want the first page with links out of scope logged once at info; log:\n%s", s)
	}
	other := scoped(t, name, frontier.ScopeRules{FollowExternal: 2}, nil)
	if _, err := other.Seed(ctx, []string{"http://seed.test/"}); !errors.Is(err, frontier.ErrScopeConflict) {
		t.Errorf("Seed with other rules: %v; want ErrScopeConflict", err)
	}
	if err := other.Run(ctx); !errors.Is(err, frontier.ErrScopeConflict) {
		t.Errorf("Run with other rules: %v; want ErrScopeConflict", err)
	}
}
