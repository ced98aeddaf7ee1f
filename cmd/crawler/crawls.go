package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/frontier"
)

// crawlsUsage is crawler crawls's help, before its flags.
const crawlsUsage = `Usage: crawler crawls [flags]

Lists the crawls under --prefix: each one's state (running: URLs queued or in flight;
stalled: URLs queued or in flight, but no process has worked on it for five minutes, as
after its processes stopped or died, and 'crawler run --crawl NAME' carries it on; limit:
nothing left but URLs past its --max-pages, which a run with a higher one continues with;
done; expired: registered, but its keys are gone; lost: its record (meta) is gone but
its queues are not, and no process can join it until a running one puts the record back,
within a minute, or 'crawler delete --crawl NAME' removes it), counts, limits, and when its keys expire
unless a process works on it (--crawl-ttl). Only --redis* and --prefix matter.
`

// deleteUsage is crawler delete's help, before its flags.
const deleteUsage = `Usage: crawler delete --crawl NAME [--yes] [--force] [flags]

Deletes every key of a crawl: its meta, scope, queues, seen URLs and counts, and its entry in
'crawler crawls'. Without --yes it only says what it would delete (a dry run). Sites' permits
and robots.txt policies are shared by crawls and stay. It refuses a crawl with items in flight
unless --force, and exits 1 for a crawl that does not exist. Processes still working on a
crawl deleted with --force stop (exit 1) at their next settlement; stop them first all the
same. Only --redis*, --prefix and --crawl of the other flags matter.
`

// runCrawls lists the crawls under --prefix with their state.
func runCrawls(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	cfg, fs, err := loadConfig("crawls", args, stderr, crawlsUsage)
	if err != nil {
		return err
	}
	defer func() { err = cfg.WithPermHint(err) }()
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	rdb, err := cfg.Connect(ctx, newLogger(cfg, stderr, isTerminal(stderr)))
	if err != nil {
		return err
	}
	defer rdb.Close()
	crawls, complete, err := frontier.List(ctx, rdb, cfg.Prefix)
	if err != nil {
		return err
	}
	if len(crawls) == 0 {
		fmt.Fprintf(stdout, "no crawls under prefix %s on %s\n", cfg.Prefix, cfg.RedisAddrs())
	} else {
		writeCrawls(stdout, crawls)
	}
	if !complete {
		fmt.Fprintf(stdout, "\nThe scan for crawls created by older crawlers stopped after %d keys: some may be missing.\n", frontier.ScanBudget)
	}
	return nil
}

// writeCrawls prints a row per crawl (crawlRow).
func writeCrawls(w io.Writer, crawls []frontier.CrawlInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "crawl\tstate\tqueued\tin flight\tdone\tfailed\tpast limit\tshards\tmax pages\tmax per site\tcreated\texpires in\t")
	for _, c := range crawls {
		fmt.Fprintln(tw, crawlRow(c))
	}
	tw.Flush()
}

// crawlRow is a crawl's row of writeCrawls, tab-separated: an expired or
// lost crawl has its name and state only; "?" marks a limit not recorded.
func crawlRow(c frontier.CrawlInfo) string {
	if c.State == frontier.StateExpired || c.State == frontier.StateLost {
		return fmt.Sprintf("%s\t%s\t\t\t\t\t\t\t\t\t\t\t", c.Name, c.State)
	}
	m, st := c.Meta, c.Stats
	return fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t", c.Name, c.State, st.Queued, st.InFlight, st.Done, st.Failed,
		st.Over, m.Shards, maxPages(m.MaxPages), perSite(m.MaxPerSite), created(m.Created), m.ExpiresIn.Round(time.Second))
}

// maxPages shows a crawl's page limit: none, or ? when not recorded.
func maxPages(n int) string {
	switch {
	case n < 0:
		return "?"
	case n == 0:
		return "none"
	}
	return strconv.Itoa(n)
}

// perSite shows a crawl's per-site limit, ? when not recorded.
func perSite(n int) string {
	if n <= 0 {
		return "?"
	}
	return strconv.Itoa(n)
}

func created(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format(time.DateTime)
}

// runDelete deletes a crawl's keys, or says which it would.
func runDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var yes, force bool
	cfg, fs, err := loadConfigExtra("delete", args, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&yes, "yes", false, "delete: without it, only say what would be deleted")
		fs.BoolVar(&force, "force", false, "delete even when items are in flight (stop the crawl's workers first: they would lose them)")
	}, deleteUsage)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q (name the crawl with --crawl)", fs.Args())
	}
	rdb, err := cfg.Connect(ctx, newLogger(cfg, stderr, isTerminal(stderr)))
	if err != nil {
		return err
	}
	defer rdb.Close()
	d, err := frontier.Delete(ctx, rdb, cfg.Prefix, cfg.Crawl, frontier.DeleteOptions{DryRun: !yes, Force: force})
	if err != nil {
		return deleteError(err, cfg.Prefix, cfg.Crawl, d)
	}
	fmt.Fprint(stdout, deleteReport(cfg.Prefix, cfg.Crawl, d, yes))
	return nil
}

// deleteError says what a failed frontier.Delete of crawl under prefix
// means for the user: no such crawl, or one still running (d.InFlight
// items) that --force would delete anyway; any other error as it is.
func deleteError(err error, prefix, crawl string, d frontier.Deleted) error {
	switch {
	case errors.Is(err, frontier.ErrNoCrawl):
		return fmt.Errorf("no crawl %s under prefix %s (see crawler crawls)", crawl, prefix)
	case errors.Is(err, frontier.ErrRunning):
		return fmt.Errorf("crawl %s has %d items in flight: stop its workers first, or add --force", crawl, d.InFlight)
	}
	return err
}

// deleteReport says what frontier.Delete deleted (yes) or would delete (a
// dry run, which says how to delete), and when its scan stopped short.
func deleteReport(prefix, crawl string, d frontier.Deleted, yes bool) string {
	what := fmt.Sprintf("crawl %s under prefix %s: %d keys (%d shards, %d site queues)", crawl, prefix, d.Keys, d.Shards, d.Queues)
	if d.Registered {
		what += " and its registry entry"
	}
	report := fmt.Sprintf("would delete %s\ndry run: nothing deleted; add --yes to delete\n", what)
	if yes {
		report = fmt.Sprintf("deleted %s\n", what)
	}
	if !d.Complete {
		report += fmt.Sprintf("the scan for the crawl's keys stopped after %d keys: keys it did not reach expire with the crawl's TTL\n", frontier.ScanBudget)
	}
	return report
}

// loadConfigExtra is loadConfig with the command's own flags, defined by
// extra, besides the Config's.
func loadConfigExtra(name string, args []string, stderr io.Writer, extra func(fs *flag.FlagSet), usage string) (*config.Config, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("crawler "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(fs, usage) }
	if only := shownFlags[name]; only != nil {
		fs.Usage = func() { printSomeUsage(fs, usage, only) }
	}
	extra(fs)
	var cfg *config.Config
	err := parseQuiet(fs, func() (err error) { cfg, err = config.Load(fs, args, os.Getenv); return err })
	switch {
	case errors.Is(err, flag.ErrHelp), errors.Is(err, errUsage):
		return nil, nil, err
	case err != nil: // the file's or a variable's, which say where
		return nil, nil, badFlags(err.Error())
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, usageErr("invalid settings:\n%v", err)
	}
	warnUnknownEnv(cfg, stderr)
	return cfg, fs, nil
}
