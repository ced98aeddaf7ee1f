package crawl

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/sitemap"
	"golang.org/x/sync/errgroup"
)

// sitemaps is the sitemap discovery of the seeds this process admitted
// (Options.Sitemaps): one origin (scheme and host) each, once.
type sitemaps struct {
	origins []*url.URL // to read, noted by Seed
	running atomic.Int32
	urls    atomic.Int64 // URLs the sitemaps listed that were queued
}

// noteSeeds keeps the origins of seeds, for Run to read their sitemaps.
// Only a process whose Seed admitted something reads them: the others
// would fetch the same sitemaps again.
func (s *sitemaps) noteSeeds(seeds []string) {
	seen := map[string]bool{}
	for _, raw := range seeds {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		o := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/"}
		if !seen[o.String()] {
			seen[o.String()] = true
			s.origins = append(s.origins, o)
		}
	}
}

// sitemapReaders bounds how many sites' sitemaps a process reads at once
// (each under its site's permit, like a page), besides Options.Workers: a
// site's sitemaps are a request or more of its own latency, so read one
// site at a time they held a crawl of many small sites long after its
// pages (1,000 sites of 50 ms: 52 s, the pages done in 10).
const sitemapReaders = 32

// discoverSitemaps reads the sitemaps of the origins Seed noted (those its
// robots.txt names, or /sitemap.xml), each once per crawl whichever
// process seeded it (frontier.Frontier.Claim), and queues the URLs they list on
// their own host, at depth 1, through the scope like links: up to
// min(Workers, sitemapReaders) sites at once, in the seeds' order. Every
// sitemap request goes through the crawl's Transport: the robots check and
// the site's permit, like a page. While it runs, this process's workers do
// not take an empty frontier for a finished crawl (see work).
func (c *Crawler) discoverSitemaps(ctx context.Context) {
	defer c.maps.running.Add(-1)
	f := &sitemap.Fetcher{Client: &http.Client{Transport: c.tr}, UserAgent: c.o.UserAgent,
		Options: &sitemap.Options{MaxLocLength: c.o.MaxURLLength}, Log: c.o.Log}
	var g errgroup.Group
	g.SetLimit(max(1, min(c.o.Workers, sitemapReaders)))
	for _, o := range c.maps.origins {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			c.readSitemaps(ctx, f, o)
			return nil
		})
	}
	_ = g.Wait()
}

// readSitemaps reads the sitemaps of origin o, once per crawl.
func (c *Crawler) readSitemaps(ctx context.Context, f *sitemap.Fetcher, o *url.URL) {
	// Once per crawl: several processes may seed the same sites.
	if first, err := c.fr.Claim(ctx, "sitemaps "+o.String()); err != nil || !first {
		if err != nil && ctx.Err() == nil {
			c.o.Log.Warn("sitemaps not read: cannot claim them", "site", o.Host, "err", err)
		}
		return
	}
	pol, err := c.rob.Policy(ctx, o)
	if err != nil {
		if ctx.Err() == nil {
			c.o.Log.Warn("sitemaps not read: robots.txt unknown", "site", o.Host, "err", err)
		}
		return
	}
	if pol.Unreachable() {
		return // the site is closed until its robots.txt is read
	}
	var queued int64
	st, err := f.Discover(ctx, o, pol.Sitemaps, func(urls []string) error {
		in, _ := c.inScope(ctx, frontier.Item{URL: o.String()}, urls) // on the seed's own site: in scope
		n, err := c.fr.Add(ctx, 1, in...)
		queued += int64(n)
		return err
	})
	c.maps.urls.Add(queued)
	if err != nil && !errors.Is(err, context.Canceled) {
		c.o.Log.Warn("sitemaps: stopped", "site", o.Host, "err", err)
	}
	c.o.Log.Info("sitemaps read", "site", o.Host, "sitemaps", st.Fetched, "missing", st.Missing, "failed", st.Failed, "listed", st.URLs,
		"queued", queued, "dropped", st.Dropped, "limited", st.Limited)
}
