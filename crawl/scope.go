package crawl

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/frontier"
)

// scope is this process's copy of the crawl's scope: the sites whose links
// are followed (frontier.Seed, frontier.Scope). Every process applies the
// crawl's scope, whoever seeded it, so a worker started without seeds
// follows the same links as the one that seeded the crawl.
//
// The copy is read once when Run starts, and again only when the frontier
// reports the scope bigger than the copy (frontier.ScopeLen, learnt from the
// answers of Next at no cost): once each time the crawl is seeded with new
// sites, never per page. A read that fails, or finds less than was reported,
// is not tried again within scopeRetry, unless the scope grows again.
type scope struct {
	mu    sync.RWMutex
	sites map[string]bool

	load  sync.Mutex // one read at a time; guards tried and at
	tried int        // ScopeLen when the copy was last read
	at    time.Time  // when

	// rules are the crawl's stored scope rules, compiled (see rules.go).
	rules atomic.Pointer[frontier.ScopeMatcher]
	// out counts the links dropped by the rules; outSeen is set once the
	// first is logged at Info.
	out     atomic.Int64
	outSeen atomic.Bool
}

// scopeRetry bounds how often a copy that stays short of the reported
// scope is read again (Redis failing, or a scope that lost sites).
const scopeRetry = time.Second

func (s *scope) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.sites)
}

// loadScope reads the crawl's scope into the copy, and returns the copy's
// size before and after. A scope smaller than the copy (Redis restarted
// empty) leaves the copy: a scope only grows.
func (c *Crawler) loadScope(ctx context.Context) (before, after int, err error) {
	c.scope.load.Lock()
	defer c.scope.load.Unlock()
	return c.loadScopeLocked(ctx)
}

func (c *Crawler) loadScopeLocked(ctx context.Context) (before, after int, err error) {
	c.scope.tried, c.scope.at = c.fr.ScopeLen(), time.Now()
	before = c.scope.len()
	sites, err := c.fr.Scope(ctx)
	if err != nil || len(sites) <= before {
		return before, before, err
	}
	m := make(map[string]bool, len(sites))
	for _, s := range sites {
		m[s] = true
	}
	c.scope.mu.Lock()
	c.scope.sites = m
	c.scope.mu.Unlock()
	return before, len(m), nil
}

// refreshScope reads the scope again if the frontier has seen it grow past
// the copy (see scope).
func (c *Crawler) refreshScope(ctx context.Context) {
	n := c.fr.ScopeLen()
	if n <= c.scope.len() {
		return
	}
	c.scope.load.Lock()
	defer c.scope.load.Unlock()
	if n <= c.scope.len() || (n <= c.scope.tried && time.Since(c.scope.at) < scopeRetry) {
		return // read meanwhile, or tried and found short a moment ago
	}
	before, after, err := c.loadScopeLocked(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		c.o.Log.Warn("cannot read the crawl's scope; links to the sites seeded since it was last read are dropped meanwhile", "err", err)
	case after > before:
		c.o.Log.Info("the crawl's scope grew: links to its new sites are followed", "sites", after, "was", before)
	}
	if after > before && !c.fr.RulesStored() {
		c.scope.rules.Store(nil) // joined before the crawl was seeded: its seeder's rules are read next
	}
}

// inScope sorts the links found on it's page by the crawl's scope: in,
// to sites in scope (the seeds' sites, and the allowed domains of the
// crawl's frontier.ScopeRules), and off, to other sites, followed while
// it.Hops+1 is within the rules' FollowExternal. Links that fail the
// rules' Include or Exclude, or lead further off, are dropped and counted
// (Progress.OutOfScope). Of the rest, those that the site's robots.txt,
// if this process holds it, closes are counted (Progress.LinksDisallowed)
// and never queued, which spares the frontier a URL and the crawl a turn
// that could only skip it. A link whose
// robots.txt is not at hand, or was unreachable (closed only until it is
// fetched again), is kept: its fetch is checked anyway.
func (c *Crawler) inScope(ctx context.Context, it frontier.Item, links []string) (in, off []string) {
	c.refreshScope(ctx)
	m := c.matcher(ctx)
	c.scope.mu.RLock()
	defer c.scope.mu.RUnlock()
	closed, out := 0, 0
	for _, l := range links {
		norm, site, err := frontier.Normalize(l)
		if err != nil {
			continue
		}
		inside := c.scope.sites[site] || m.Allowed(site)
		if !m.URL(norm) || (!inside && it.Hops >= m.FollowExternal()) {
			out++
			continue
		}
		if u, err := url.Parse(norm); err == nil {
			if pol, ok := c.rob.Local(u); ok && !pol.Unreachable() && !pol.Allowed(u.RequestURI()) {
				closed++
				continue
			}
		}
		if inside {
			in = append(in, l)
		} else {
			off = append(off, l)
		}
	}
	c.linksClosed.Add(int64(closed))
	c.countOutOfScope(it, out, m)
	return in, off
}

// startScope reads the crawl's scope as Run starts, and says when there is
// none yet: until a process seeds the crawl, this one has nothing to follow.
func (c *Crawler) startScope(ctx context.Context) {
	_, n, err := c.loadScope(ctx)
	switch {
	case err != nil:
		c.o.Log.Warn("cannot read the crawl's scope; it is read again once the frontier answers", "err", err)
	case n == 0:
		c.o.Log.Warn("the crawl has no scope yet (no process has seeded it): links are followed once one does", "crawl", c.fr.Options().Crawl)
	}
}
