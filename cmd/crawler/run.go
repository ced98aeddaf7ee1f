package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/internal/assemble"
	"github.com/polite-crawler/polite/internal/console"
)

// loadConfig reads defaults, --config FILE, CRAWLER_* and then the flags
// (config.Load), then validates them; usage is the command's help before
// its flags (printUsage).
func loadConfig(name string, args []string, stderr io.Writer, usage string) (*config.Config, *flag.FlagSet, error) {
	return loadConfigExtra(name, args, stderr, func(*flag.FlagSet) {}, usage)
}

// runUsage is crawler run's help, before its flags.
const runUsage = `Usage: crawler run [flags] SEED_URL...  (or a seeds: list in the --config file)

Crawls from the seeds, sharing the crawl with every other 'crawler run' pointed at the same
Redis and --crawl, on any host. Before every request it takes a permit from the site's
semaphore in Redis, so no site sees more than its cap at once, fleet-wide. Links are followed
within the seeds' sites, and as --allow-domain, --follow-external, --include and --exclude say:
the crawl's first process stores them; later ones follow the stored scope. Exits 0 when nothing
is queued or in flight anywhere (unless --forever).
Ctrl-C (SIGINT) or SIGTERM stops it gracefully and it exits 130 (143); a second Ctrl-C quits at once.
`

// runCrawl wires crawler run: settings and seeds → Redis → the crawl
// (assemble.New) → seed and run it with a progress report, stopping
// gracefully on the first signal.
func runCrawl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, fs, err := loadConfig("run", args, stderr, runUsage)
	if err != nil {
		return err
	}
	seeds, err := assemble.Seeds(cfg, fs.Args())
	if err != nil {
		return asUsage(err)
	}
	con := console.New(stdout, isTerminal(stdout)) // owns the progress line; logs clear it first
	log := newLogger(cfg, con.Writer(stderr), isTerminal(stderr))
	rdb, err := cfg.Connect(ctx, log)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := cfg.CheckEviction(ctx, rdb, log); err != nil {
		return err
	}
	c, err := assemble.New(ctx, rdb, cfg, log)
	if err != nil {
		return asUsage(err)
	}
	defer c.Close()                              // last: the metrics server and the limiter
	defer lingerMetrics(ctx, c.Server, cfg, log) // after the WARC files and --out are finished
	defer c.Finish()
	if err := c.Seed(ctx, seeds); err != nil {
		return asUsage(err)
	}
	onStop(ctx, func(hint string) { // no new requests; the downloads under way may finish
		log.Info(hint, "in_flight", c.Crawler.Progress().InFlight, "stop_grace", cfg.StopGrace)
	})
	pr := &progress{c: c.Crawler, fr: c.Frontier, lim: c.Limiter, rob: c.Robots, cap: cfg.MaxPerSite}
	return c.Run(ctx, func(ctx context.Context, over <-chan struct{}) { pr.report(ctx, over, cfg.Progress, con, log) })
}

// asUsage makes an error of assemble.ErrUsage a usage error (exit 2);
// others stay as they are.
func asUsage(err error) error {
	if errors.Is(err, assemble.ErrUsage) {
		return usageErr("%v", err)
	}
	return err
}
