package crawl

import (
	"context"
	"net/http"
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
// Fetched hook in o is still called, after that.
func NewRobotsCache(rdb redis.UniversalClient, lim *limiter.Limiter, cap int, o robots.CacheOptions, obs fetch.Observer) *robots.Cache {
	tr := &fetch.RobotsTransport{Limiter: lim, Observer: obs, Timeout: o.FetchTimeout}
	then := o.Fetched
	o.Fetched = func(ctx context.Context, site string, p robots.Policy) {
		if p.CrawlDelay > 0 {
			lim.Backoff(ctx, site, p.CrawlDelay)
		}
		if then != nil {
			then(ctx, site, p)
		}
	}
	return robots.NewCache(rdb, &http.Client{Transport: tr, Timeout: 2 * time.Minute}, &o)
}
