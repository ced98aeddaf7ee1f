package crawl

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/redis/go-redis/v9"
)

// pool is http.DefaultTransport with room to keep a connection idle for
// each of a site's slots (cap, default 3). The default keeps 2 per host, so
// with 3 requests at once the third connection was often closed and dialled
// again: 12 connections for 61 requests on one site, measured at the site.
func pool(cap int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(cap, 3)
	return t
}

// NewRobotsCache returns the robots cache a crawl needs: robots.txt
// requests take permits like every other request, and a crawl delay starts
// with the robots.txt request itself (so the first page waits too). A
// Fetched hook in o is still called, after that. Permits are keyed by host
// (robots.Site); see NewRobotsCacheKeyed.
func NewRobotsCache(rdb redis.UniversalClient, lim *limiter.Limiter, cap int, o robots.CacheOptions, obs fetch.Observer) *robots.Cache {
	return NewRobotsCacheKeyed(rdb, lim, cap, o, obs, nil)
}

// NewRobotsCacheKeyed is NewRobotsCache for a crawl whose permits are keyed
// by key (Options.SiteKey; nil: robots.Site): a robots.txt request takes
// the permit of its key, and a crawl delay holds off the key's permits.
// robots.txt itself is still fetched and cached per scheme+host+port.
func NewRobotsCacheKeyed(rdb redis.UniversalClient, lim *limiter.Limiter, cap int, o robots.CacheOptions, obs fetch.Observer, key robots.SiteKey) *robots.Cache {
	tr := &fetch.RobotsTransport{Limiter: lim, Observer: obs, Timeout: o.FetchTimeout, SiteKey: key}
	then := o.Fetched
	o.Fetched = func(ctx context.Context, site string, p robots.Policy) {
		if p.CrawlDelay > 0 {
			lim.Backoff(ctx, permitSite(key, site), p.CrawlDelay)
		}
		if then != nil {
			then(ctx, site, p)
		}
	}
	return robots.NewCache(rdb, &http.Client{Transport: tr, Timeout: 2 * time.Minute}, &o)
}

// permitSite is the permit key of a robots.txt's site (robots.Site form).
// The URL has no scheme, so no port counts as a default one: a site is its
// own key by host.
func permitSite(key robots.SiteKey, site string) string {
	if key == nil {
		return site
	}
	return key(&url.URL{Host: site})
}
