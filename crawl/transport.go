package crawl

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/warc"
	"github.com/redis/go-redis/v9"
)

// pool is http.DefaultTransport with room to keep a connection idle for
// each of a site's slots (cap, default 3). The default keeps 2 per host, so
// with 3 requests at once the third connection was often closed and dialled
// again: 12 connections for 61 requests on one site, measured at the site.
// A name under "invalid" is not looked up (fetch.Invalid).
func pool(cap int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(cap, 3)
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			if err := fetch.Invalid(host); err != nil {
				return nil, &net.OpError{Op: "dial", Net: network, Err: err}
			}
		}
		return dial(ctx, network, addr)
	}
	return t
}

// NewRobotsCache returns the robots cache a crawl needs: robots.txt
// requests take permits like every other request, and a crawl delay starts
// with the robots.txt request itself (so the first page waits too). A
// Fetched hook in o is still called, after that. Permits are keyed by host
// (robots.Site) and requests go out on a pool of their own; see
// NewRobotsCacheOn.
func NewRobotsCache(rdb redis.Cmdable, lim *limiter.Limiter, cap int, o robots.CacheOptions, obs fetch.Observer) *robots.Cache {
	return NewRobotsCacheOn(rdb, lim, nil, nil, o, obs)
}

// NewRobotsCacheOn is NewRobotsCache for a crawl whose requests go out on
// net (the crawl's Options.Net, so robots.txt requests take address
// permits like pages; nil: a pool of its own) and whose permits are keyed
// by key (Options.SiteKey; nil: robots.Site): a robots.txt request takes
// the permit of its key, and a crawl delay holds off the key's permits.
// robots.txt itself is still fetched and cached per scheme+host+port.
func NewRobotsCacheOn(rdb redis.Cmdable, lim *limiter.Limiter, net *Net, key robots.SiteKey, o robots.CacheOptions, obs fetch.Observer) *robots.Cache {
	tr := &fetch.RobotsTransport{Base: pool(3), Limiter: lim, Observer: obs, Timeout: o.FetchTimeout, SiteKey: key, Log: o.Log}
	if net != nil {
		tr.Base = net.rt
	}
	then := o.Fetched
	o.Fetched = func(ctx context.Context, site string, p robots.Policy) {
		if p.CrawlDelay > 0 {
			if err := lim.Backoff(ctx, permitSite(key, site), p.CrawlDelay); err != nil && o.Log != nil && ctx.Err() == nil {
				o.Log.Warn("could not start the crawl delay from the robots.txt request; the site's permits start it from their own", "site", site, "crawl_delay", p.CrawlDelay, "err", err)
			}
		}
		if then != nil {
			then(ctx, site, p)
		}
	}
	return robots.NewCache(rdb, &http.Client{Transport: tr, Timeout: 2 * time.Minute}, &o)
}

// Net is the way out to servers that a crawl's pages and its robots.txt
// requests share (Options.Net, NewRobotsCacheOn): one connection pool and,
// when it pins names or caps addresses, one DNS cache and one line per
// server address.
type Net struct {
	rt   http.RoundTripper
	idle func()
}

// NetOptions say how a crawl's requests reach servers (NewNet).
type NetOptions struct {
	// Cap is how many connections are kept idle per host (default 3).
	Cap int
	// Pins (fetch.ParseResolve) connect pinned names to their addresses
	// without asking DNS.
	Pins fetch.Pins
	// MaxPerIP > 0 caps the requests at once per server address, fleet-wide.
	MaxPerIP int
	// WARC, if not nil, records every request and its response (package
	// warc): pages, robots.txt and sitemaps alike.
	WARC *warc.Writer
}

// NewNet returns a Net with room to keep o.Cap connections idle per host.
// With o.Pins or o.MaxPerIP > 0, every request is resolved once (a bounded
// DNS cache; pinned names never ask DNS) and dialled to exactly that
// address; with MaxPerIP > 0 it also takes that address's fleet-wide
// permit (at most MaxPerIP at once), always after its site's
// (fetch.AddrTransport). Without either, requests dial as net/http does
// (with its fallback between a name's addresses). o may be nil.
func NewNet(lim *limiter.Limiter, o *NetOptions) (*Net, error) {
	if o == nil {
		o = &NetOptions{}
	}
	base := pool(o.Cap)
	n := &Net{rt: base, idle: base.CloseIdleConnections}
	if len(o.Pins) > 0 || o.MaxPerIP > 0 {
		res, err := fetch.NewResolver(&fetch.ResolverOptions{Pins: o.Pins})
		if err != nil {
			return nil, fmt.Errorf("crawl: %w", err)
		}
		at := fetch.NewAddrTransport(base, res, lim, o.MaxPerIP)
		n.rt, n.idle = at, at.CloseIdleConnections
	}
	if o.WARC != nil {
		n.rt = &warc.Transport{Base: n.rt, W: o.WARC}
	}
	return n, nil
}

// CloseIdleConnections closes the Net's idle connections (and so their
// goroutines).
func (n *Net) CloseIdleConnections() { n.idle() }

// permitSite is the permit key of a robots.txt's site (robots.Site form).
// The URL has no scheme, so no port counts as a default one: a site is its
// own key by host.
func permitSite(key robots.SiteKey, site string) string {
	if key == nil {
		return site
	}
	return key(&url.URL{Host: site})
}
