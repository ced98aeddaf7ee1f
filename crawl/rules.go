package crawl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/polite-crawler/polite/frontier"
)

// seedsOnly is the matcher of the zero rules: the seeds' sites, every URL.
var seedsOnly, _ = frontier.ScopeRules{}.Compile()

// matcher is the crawl's scope rules, compiled once per process. They are
// the frontier's copy of the crawl's stored rules (frontier.Frontier.Rules),
// at hand without a round trip once the frontier has joined the crawl,
// which it has before it hands out an item. Should they still be unknown
// (Redis failing), the seeds' sites alone are followed meanwhile, and the
// rules read again on the next call; rules that do not compile, for good.
func (c *Crawler) matcher(ctx context.Context) *frontier.ScopeMatcher {
	if m := c.scope.rules.Load(); m != nil {
		return m
	}
	m, err := c.loadRules(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.o.Log.Warn("cannot read the crawl's scope rules; only links to its seeds' sites are followed until they are read", "err", err)
		}
		return seedsOnly
	}
	return m
}

// loadRules reads the crawl's scope rules (joining the crawl, if the
// frontier has not yet) and compiles them.
func (c *Crawler) loadRules(ctx context.Context) (*frontier.ScopeMatcher, error) {
	r, err := c.fr.Rules(ctx)
	if err != nil {
		return nil, err
	}
	m, err := r.Compile()
	if err != nil { // stored by another build: not read again
		c.scope.rules.Store(seedsOnly)
		return nil, fmt.Errorf("crawl: the crawl's stored scope: %w", err)
	}
	c.scope.rules.Store(m)
	return m, nil
}

// startRules reads the crawl's scope rules as Run starts, and logs them
// when they add to the seeds' sites. A process given other rules than the
// crawl's (frontier.ErrScopeConflict) must not run: it returns that error.
// Other failures are left to the workers, which retry the frontier.
func (c *Crawler) startRules(ctx context.Context) error {
	m, err := c.loadRules(ctx)
	switch {
	case errors.Is(err, frontier.ErrScopeConflict):
		return fmt.Errorf("crawl: %w", err)
	case err != nil:
		c.o.Log.Warn("cannot read the crawl's scope rules yet; they are read again once the frontier answers", "err", err)
	case c.fr.Options().Scope.IsZero() && !m.Rules().IsZero():
		c.o.Log.Info("following the crawl's stored scope (no scope options given)", "scope", m.Rules().String())
	case !m.Rules().IsZero():
		c.o.Log.Info("the crawl's scope", "scope", m.Rules().String())
	}
	return nil
}

// countOutOfScope counts the links of it's page dropped by the scope. The
// first page with such links in the process is logged at Info, the
// others at Debug, one record a page.
func (c *Crawler) countOutOfScope(it frontier.Item, n int, m *frontier.ScopeMatcher) {
	if n == 0 {
		return
	}
	c.scope.out.Add(int64(n))
	const msg = "links out of the crawl's scope dropped (logged once at info; counted in progress)"
	if c.scope.outSeen.CompareAndSwap(false, true) {
		c.o.Log.Info(msg, "page", it.URL, "links", n, "hops", it.Hops, "scope", m.Rules().String())
		return
	}
	if c.o.Log.Enabled(context.Background(), slog.LevelDebug) { // no record, nor its arguments, built per page
		c.o.Log.Debug(msg, "page", it.URL, "links", n, "hops", it.Hops)
	}
}
