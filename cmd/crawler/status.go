package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"text/tabwriter"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, _, err := loadConfig("status", args, stderr, func(fs *flag.FlagSet) {
		fmt.Fprintln(stderr, "Usage: crawler status [flags]")
		fmt.Fprintln(stderr, "\nShows a crawl as Redis has it: its counts, and per site with queued URLs the permit")
		fmt.Fprintln(stderr, "limit, holders, waiters and backlog. Only --redis*, --prefix, --crawl and --max-per-site matter.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	})
	if err != nil {
		return err
	}
	rdb, err := connect(ctx, cfg, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	defer rdb.Close()
	lim := limiter.New(rdb, &limiter.Options{Prefix: cfg.Prefix, Lease: cfg.Lease})
	defer lim.Close()
	rob := robots.NewCache(rdb, nil, &robots.CacheOptions{Prefix: cfg.Prefix})
	fr := frontier.New(rdb, &frontier.Options{Prefix: cfg.Prefix, Crawl: cfg.Crawl})
	st, err := fr.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "crawl %s on %s: %d queued, %d in flight, %d done, %d failed, %d URLs seen\n\n",
		cfg.Crawl, cfg.RedisAddrs(), st.Queued, st.InFlight, st.Done, st.Failed, st.Seen)
	sites, err := fr.Sites(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "site\tlimit\tholders\twaiters\tqueued\tready in\tdelay left\t")
	for _, s := range sites {
		limit, known := cfg.MaxPerSite, "?"
		for _, scheme := range []string{"http", "https"} { // one robots.txt each; the site's permits are shared
			if pol, ok, err := rob.Cached(ctx, &url.URL{Scheme: scheme, Host: s.Site}); err == nil && ok {
				limit, known = min(limit, pol.Cap(cfg.MaxPerSite)), ""
			}
		}
		ls, err := lim.Status(ctx, s.Site, limit)
		if err != nil {
			return err
		}
		ready := s.ReadyIn.String()
		if s.Full {
			ready = "at cap" // back when one of its fetches settles
		}
		fmt.Fprintf(tw, "%s\t%d%s\t%d\t%d\t%d\t%s\t%s\t\n", s.Site, limit, known, ls.Holders, ls.Waiting, s.Queued, ready, ls.NextIn)
	}
	if len(sites) == 0 {
		fmt.Fprintln(tw, "(no site has queued URLs)\t\t\t\t\t\t\t")
	}
	tw.Flush()
	if len(sites) > 0 {
		fmt.Fprintln(stdout, "\nlimit?: robots.txt not fetched yet; the configured cap is shown.")
	}
	return nil
}
