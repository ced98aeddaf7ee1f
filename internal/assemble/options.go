package assemble

import (
	"context"
	"log/slog"

	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/crawl"
	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/clock"
	"github.com/polite-crawler/polite/internal/redisacl"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/redis/go-redis/v9"
)

// newLimiter is the crawl's limiter: --semaphore, --lease, --prefix and
// adaptive politeness as cfg says; a permit that cannot be refreshed stops
// its download early enough (fetch.AbortGrace) for the site to notice
// before Redis hands the slot on. It logs whether Redis's restart guard
// holds permits back, or cannot be read, and whether Redis refuses the
// wake-up channels.
func newLimiter(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, log *slog.Logger) (*limiter.Limiter, error) {
	mode, err := limiter.ParseMode(cfg.Semaphore)
	if err != nil {
		return nil, usageError{"--semaphore: " + err.Error(), err}
	}
	lim := limiter.New(rdb, &limiter.Options{Mode: mode, Lease: cfg.Lease, Prefix: cfg.Prefix, StopMargin: fetch.AbortGrace,
		Now: clock.Now, Adaptive: adaptive(cfg)})
	switch left, err := lim.GuardLeft(ctx); {
	case err != nil:
		log.Warn("cannot read Redis's uptime, so the restart guard is off: a Redis restarted empty may hand out permits still held (let the Redis user run INFO)", "err", err)
	case left > 0:
		log.Info("Redis started less than a lease ago: no permits until the restart guard ends", "in", left)
	}
	if err := lim.CheckWakeups(ctx); redisacl.Refused(err) {
		log.Warn("Redis refuses the limiter's wake-up channels: a worker waiting for a site's permit learns that one freed only at its next poll, not at once (let the Redis user PUBLISH and SUBSCRIBE on the channels under --prefix: &"+cfg.Prefix+":*)", "err", err)
	}
	return lim, nil
}

// adaptive is adaptive politeness as cfg sets it (--adaptive*, with
// --max-crawl-delay bounding the delay it adds).
func adaptive(cfg *config.Config) *limiter.Adaptive {
	return &limiter.Adaptive{Off: !cfg.Adaptive, Backoff: cfg.AdaptiveBackoff, MaxBackoff: cfg.AdaptiveBackoffMax,
		Forgive: cfg.AdaptiveForgive, MaxDelay: cfg.MaxCrawlDelay}
}

// parsed is cfg's --site-key and --resolve, parsed.
func parsed(cfg *config.Config) (robots.SiteKey, fetch.Pins, error) {
	siteKey, err := robots.ParseSiteKey(cfg.SiteKey)
	if err != nil {
		return siteKey, nil, usageError{"--site-key: " + err.Error(), err}
	}
	pins, err := fetch.ParseResolve(cfg.Resolve)
	if err != nil {
		return siteKey, nil, usageError{"--resolve: " + err.Error(), err}
	}
	return siteKey, pins, nil
}

// robotsOptions is the robots.txt cache's options; a robots.txt that
// cannot be reached is logged, as it closes its site.
func robotsOptions(cfg *config.Config, log *slog.Logger) robots.CacheOptions {
	return robots.CacheOptions{Prefix: cfg.Prefix, UserAgent: cfg.UserAgent, FetchTimeout: cfg.Timeout,
		Parse: robots.Options{MaxCrawlDelay: cfg.MaxCrawlDelay}, Log: log,
		Fetched: func(_ context.Context, site string, p robots.Policy) {
			if p.Unreachable() {
				log.Warn("robots.txt unreachable: the site is closed until it is fetched again", "site", site, "status", p.Status, "cause", p.Why())
			}
		}}
}

// frontierOptions is the frontier's options. It keeps referrers only for
// --out, whose results name them; a site's permit is parked for half a
// lease; --max-queued-per-site 0 is the frontier's "no bound".
func frontierOptions(cfg *config.Config, siteKey robots.SiteKey) *frontier.Options {
	siteQueue := cfg.MaxQueuedPerSite
	if siteQueue == 0 {
		siteQueue = -1
	}
	return &frontier.Options{Prefix: cfg.Prefix, Crawl: cfg.Crawl, Visibility: cfg.Visibility, MaxAttempts: cfg.MaxAttempts,
		MaxDepth: cfg.MaxDepth, MaxPages: cfg.MaxPages, MaxQueuedPerSite: siteQueue, Shards: cfg.Shards, Cap: cfg.MaxPerSite,
		Park: cfg.Lease / 2, SiteKey: siteKey, TTL: cfg.CrawlTTL, Referrers: cfg.Out != "", Scope: cfg.ScopeRules()}
}

// crawlOptions is the crawler's options, without Out (see Crawl.open).
func crawlOptions(cfg *config.Config, siteKey robots.SiteKey, network *crawl.Net, log *slog.Logger, obs fetch.Observer) crawl.Options {
	return crawl.Options{Workers: cfg.Workers, Cap: cfg.MaxPerSite, UserAgent: cfg.UserAgent, MaxBodySize: int(cfg.MaxBodySize),
		MaxURLLength: cfg.MaxURLLength, Timeout: cfg.Timeout, StopGrace: cfg.StopGrace, Forever: cfg.Forever,
		SiteKey: siteKey, Net: network, Sitemaps: cfg.Sitemaps, Log: log, Observer: obs}
}
