package bench

import (
	"context"
	"flag"
	"fmt"
	"net/url"

	"github.com/gocolly/colly/v2"
)

// collyAlone crawls the sites with colly and nothing else, at most 3
// requests at once per site, in procs independent processes.
func collyAlone(ctx context.Context, s CrawlSpec, procs int) (CrawlRow, error) {
	row, err := s.crawl(ctx, fmt.Sprintf("colly alone, %d process(es)", procs), procs, s.slots(), func(seeds []string) []string {
		return append([]string{"bench-colly", "--user-agent", s.UserAgent}, seeds...)
	})
	row.Peer = true
	return row, err
}

// CollyWorker is one colly-alone process (crawler bench-colly --user-agent
// UA SEED...): it crawls from the seeds within their hosts, at most 3
// requests at a time per host (a LimitRule per host: one rule's Parallelism
// is shared by every host it matches), honouring robots.txt the colly way.
func CollyWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("crawler bench-colly", flag.ContinueOnError)
	ua := fs.String("user-agent", "politebot/0.1", "User-Agent")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var hosts []string
	var rules []*colly.LimitRule
	for _, s := range fs.Args() {
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("bench: seed %q: %w", s, err)
		}
		hosts = append(hosts, u.Hostname())
		rules = append(rules, &colly.LimitRule{DomainGlob: u.Host, Parallelism: siteCap})
	}
	c := colly.NewCollector(colly.Async(true), colly.AllowedDomains(hosts...), colly.StdlibContext(ctx), colly.UserAgent(*ua))
	c.IgnoreRobotsTxt = false
	if err := c.Limits(rules); err != nil {
		return err
	}
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	for _, s := range fs.Args() {
		c.Visit(s)
	}
	c.Wait()
	return nil
}
