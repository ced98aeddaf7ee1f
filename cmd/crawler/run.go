package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/crawl"
	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/clock"
	"github.com/polite-crawler/polite/internal/console"
	"github.com/polite-crawler/polite/internal/redisinfo"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/metrics"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/warc"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// loadConfig reads defaults, --config FILE, CRAWLER_* and then the flags
// (config.Load), then validates them.
func loadConfig(name string, args []string, stderr io.Writer, usage func(fs *flag.FlagSet)) (*config.Config, *flag.FlagSet, error) {
	return loadConfigExtra(name, args, stderr, func(*flag.FlagSet) {}, usage)
}

// evictionWhy says why only maxmemory-policy noeviction is safe.
const evictionWhy = "every key the crawler writes has a TTL, so under memory pressure any policy but noeviction (volatile-* ones too) " +
	"may evict a held permit, and its site would then get more requests than its cap; set maxmemory-policy noeviction " +
	"(a full Redis then refuses writes, and the crawler stops rather than overloading sites)"

// checkEviction reads Redis's maxmemory-policy (INFO memory, on every
// master of a cluster). With any policy but noeviction, or when it cannot be
// read, it warns in log, or with --strict returns an error that says why.
func checkEviction(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	policy, err := evictionPolicy(ctx, rdb)
	switch {
	case err != nil && cfg.Strict:
		return fmt.Errorf("--strict: cannot read the maxmemory-policy of Redis at %s (let the Redis user run INFO): %w", cfg.RedisAddrs(), err)
	case err != nil:
		log.Warn("cannot read Redis's maxmemory-policy, so cannot tell whether it may evict permits (let the Redis user run INFO)", "err", err, "safe", "maxmemory-policy noeviction")
	case policy != "noeviction" && cfg.Strict:
		return fmt.Errorf("--strict: Redis at %s has maxmemory-policy %s: %s", cfg.RedisAddrs(), policy, evictionWhy)
	case policy != "noeviction":
		log.Warn("Redis may evict permits: maxmemory-policy "+policy, "policy", policy, "safe", "maxmemory-policy noeviction", "why", evictionWhy)
	}
	return nil
}

// evictionPolicy is Redis's maxmemory_policy from INFO memory; on a
// cluster, the first master's that is not noeviction, if any.
func evictionPolicy(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	var mu sync.Mutex // ForEachMaster asks the masters at once
	policy := ""
	ask := func(ctx context.Context, c redis.UniversalClient) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return fmt.Errorf("INFO memory: %w", err)
		}
		v, ok := redisinfo.Field(info, "maxmemory_policy")
		if !ok {
			return errors.New("INFO memory has no maxmemory_policy")
		}
		mu.Lock()
		if policy == "" || policy == "noeviction" {
			policy = v
		}
		mu.Unlock()
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return ask(ctx, c) })
	} else {
		err = ask(ctx, rdb)
	}
	return policy, err
}

func runCrawl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, fs, err := loadConfig("run", args, stderr, func(fs *flag.FlagSet) {
		fmt.Fprintln(stderr, "Usage: crawler run [flags] SEED_URL...  (or a seeds: list in the --config file)")
		fmt.Fprintln(stderr, "\nCrawls from the seeds, sharing the crawl with every other 'crawler run' pointed at the same")
		fmt.Fprintln(stderr, "Redis and --crawl, on any host. Before every request it takes a permit from the site's")
		fmt.Fprintln(stderr, "semaphore in Redis, so no site sees more than its cap at once, fleet-wide. Links are followed")
		fmt.Fprintln(stderr, "within the seeds' sites, and as --allow-domain, --follow-external, --include and --exclude say:")
		fmt.Fprintln(stderr, "the crawl's first process stores them; later ones follow the stored scope. Exits 0 when nothing")
		fmt.Fprintln(stderr, "is queued or in flight anywhere (unless --forever).")
		fmt.Fprintln(stderr, "Ctrl-C (SIGINT) or SIGTERM stops it gracefully and it exits 130 (143); a second Ctrl-C quits at once.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	})
	if err != nil {
		return err
	}
	seeds := fs.Args() // they replace the file's, as flags do
	if len(seeds) == 0 {
		seeds = cfg.Seeds
	}
	if len(seeds) == 0 && !cfg.Forever {
		return usageErr("no seed URLs (give at least one, or a seeds: list in the --config file, or --forever to join a crawl others seed)")
	}
	for _, s := range seeds {
		if _, _, err := frontier.Normalize(s); err != nil {
			return usageErr("seed %q: want an absolute http(s) URL", s)
		}
	}
	con := console.New(stdout, isTerminal(stdout)) // owns the progress line; logs clear it first
	log := newLogger(cfg, con.Writer(stderr), isTerminal(stderr))
	rdb, err := cfg.Connect(ctx, log)
	if err != nil {
		return err
	}
	defer rdb.Close()

	if err := checkEviction(ctx, rdb, cfg, log); err != nil {
		return err
	}

	mode, err := limiter.ParseMode(cfg.Semaphore)
	if err != nil {
		return usageErr("%v", err)
	}
	// A permit that cannot be refreshed stops its download early enough for
	// the site to notice before Redis hands the slot on.
	if skew := clock.Skew(); skew != 0 {
		log.Warn("test build: this process's clock is shifted", "by", skew)
	}
	adapt := &limiter.Adaptive{Off: !cfg.Adaptive, Backoff: cfg.AdaptiveBackoff, MaxBackoff: cfg.AdaptiveBackoffMax,
		Forgive: cfg.AdaptiveForgive, MaxDelay: cfg.MaxCrawlDelay}
	lim := limiter.New(rdb, &limiter.Options{Mode: mode, Lease: cfg.Lease, Prefix: cfg.Prefix, StopMargin: fetch.AbortGrace, Now: clock.Now, Adaptive: adapt})
	defer lim.Close()
	switch left, err := lim.GuardLeft(ctx); {
	case err != nil:
		log.Warn("cannot read Redis's uptime, so the restart guard is off: a Redis restarted empty may hand out permits still held (let the Redis user run INFO)", "err", err)
	case left > 0:
		log.Info("Redis started less than a lease ago: no permits until the restart guard ends", "in", left)
	}
	m := metrics.New()
	msrv, err := listenMetrics(cfg, m) // before anything is seeded: a taken port fails first
	if err != nil {
		return err
	}
	defer msrv.Close()
	defer lingerMetrics(ctx, msrv, cfg, log) // last: after the WARC files and --out are finished
	m.CountRoundTrips(rdb)
	m.Adaptive(lim)
	siteKey, err := robots.ParseSiteKey(cfg.SiteKey)
	if err != nil {
		return usageErr("--site-key: %v", err)
	}
	pins, err := fetch.ParseResolve(cfg.Resolve)
	if err != nil {
		return usageErr("--resolve: %v", err)
	}
	var archive *warc.Writer
	if cfg.WARC != "" {
		if archive, err = warc.Open(cfg.WARC, &warc.Options{Prefix: cfg.Crawl, IsPartOf: cfg.Crawl, MaxFileSize: int64(cfg.WARCSize)}); err != nil {
			return fmt.Errorf("--warc: %w", err)
		}
		defer func() { // after the crawl: its last exchanges are in the queue
			if err := archive.Close(); err != nil {
				log.Error("WARC files not finished", "dir", archive.Dir(), "err", err)
			}
			s := archive.Stats()
			log.Info("WARC written", "dir", archive.Dir(), "exchanges", s.Exchanges, "files", s.Files, "truncated", s.Truncated, "errors", s.Errors, "last_error", archive.Err())
		}()
	}
	network, err := crawl.NewNet(lim, &crawl.NetOptions{Cap: cfg.MaxPerSite, Pins: pins, MaxPerIP: cfg.MaxPerIP, WARC: archive})
	if err != nil {
		return err
	}
	rob := crawl.NewRobotsCacheOn(rdb, lim, network, siteKey, robots.CacheOptions{Prefix: cfg.Prefix, UserAgent: cfg.UserAgent,
		FetchTimeout: cfg.Timeout, Parse: robots.Options{MaxCrawlDelay: cfg.MaxCrawlDelay},
		Fetched: func(_ context.Context, site string, p robots.Policy) {
			if p.Unreachable() {
				log.Warn("robots.txt unreachable: the site is closed until it is fetched again", "site", site, "status", p.Status, "cause", p.Why())
			}
		}}, m)
	m.Robots(rob)
	fr := frontier.New(rdb, &frontier.Options{Prefix: cfg.Prefix, Crawl: cfg.Crawl, Visibility: cfg.Visibility,
		MaxAttempts: cfg.MaxAttempts, MaxDepth: cfg.MaxDepth, MaxPages: cfg.MaxPages, Shards: cfg.Shards, Cap: cfg.MaxPerSite, Park: cfg.Lease / 2, SiteKey: siteKey, TTL: cfg.CrawlTTL,
		Referrers: cfg.Out != "", Scope: cfg.ScopeRules()})

	var out io.Writer
	if cfg.Out != "" {
		f, err := os.OpenFile(cfg.Out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		defer f.Close()
		out = f
	}
	c := crawl.New(fr, lim, rob, crawl.Options{Workers: cfg.Workers, Cap: cfg.MaxPerSite, UserAgent: cfg.UserAgent,
		MaxBodySize: int(cfg.MaxBodySize), MaxURLLength: cfg.MaxURLLength, Timeout: cfg.Timeout, StopGrace: cfg.StopGrace,
		Forever: cfg.Forever, SiteKey: siteKey, Net: network, Sitemaps: cfg.Sitemaps, Out: out, Log: log, Observer: m})
	m.Progress(func() int64 { return c.Progress().InFlight }, metrics.FrontierFleet(fr))
	m.Outcomes(c.Outcomes)
	added, err := c.Seed(ctx, seeds)
	if err != nil {
		if errors.Is(err, frontier.ErrScopeConflict) {
			return usageErr("%v", err)
		}
		if errors.Is(err, crawl.ErrURLTooLong) {
			return usageErr("%v (see --max-url-length)", err)
		}
		if hint := cfg.KeyPermHint(err); hint != "" {
			return fmt.Errorf("seeding: %w (%s)", err, hint)
		}
		return fmt.Errorf("seeding: %w", err)
	}
	log.Info("crawl started", "crawl", cfg.Crawl, "redis", cfg.RedisAddrs(), "seeds", len(seeds), "new", added,
		"workers", cfg.Workers, "max_per_site", cfg.MaxPerSite, "site_key", cfg.SiteKey, "max_per_ip", cfg.MaxPerIP, "resolve", len(pins), "semaphore", cfg.Semaphore)
	if len(seeds) > 0 && added == 0 {
		log.Info("every seed was already seen in this crawl, so none is fetched again (crawler status shows what was done; another --crawl starts afresh)", "crawl", cfg.Crawl)
	}

	onStop(ctx, func(hint string) { // no new requests; the downloads under way may finish
		log.Info(hint, "in_flight", c.Progress().InFlight, "stop_grace", cfg.StopGrace)
	})
	g, gctx := errgroup.WithContext(ctx)
	done := make(chan struct{})
	pr := &progress{c: c, fr: fr, lim: lim, rob: rob, cap: cfg.MaxPerSite}
	g.Go(func() error { pr.report(gctx, done, cfg.Progress, con, log); return nil })
	start := time.Now()
	g.Go(func() error { defer close(done); return c.Run(gctx) })
	err = g.Wait()
	log.Info("crawl finished", append(c.Progress().Summary(time.Since(start)), "stopped", ctx.Err() != nil,
		"redis_round_trips", m.RoundTrips(), "redis_round_trips_robots", m.RobotsRoundTrips())...)
	if err == nil && ctx.Err() == nil {
		err = c.SeedsFailed() // every seed it gave unreachable: say so, exit 1
	}
	return err
}
