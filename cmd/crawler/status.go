package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/redis/go-redis/v9"
)

// statusUsage is crawler status's help, before its flags.
const statusUsage = `Usage: crawler status [flags]

Shows a crawl as Redis has it: its counts, the limits it was created with, and per site
with queued URLs the permit limit, holders, waiters and backlog. Only --redis*, --prefix and
--crawl matter. Exits 1 when the crawl does not exist ('crawler crawls' lists them).
`

// noCrawl is status's error for a crawl without a meta: a crawl List
// calls lost or expired is named as such, with what to do; any other is
// no crawl at all.
func noCrawl(ctx context.Context, rdb redis.UniversalClient, prefix, crawl string) error {
	crawls, _, err := frontier.List(ctx, rdb, prefix)
	if err != nil {
		return fmt.Errorf("no crawl %s under prefix %s (and listing the crawls failed: %w)", crawl, prefix, err)
	}
	for _, c := range crawls {
		if c.Name != crawl {
			continue
		}
		switch c.State {
		case frontier.StateLost:
			return fmt.Errorf("crawl %s under prefix %s is lost: Redis no longer has its record (meta), but its queues are still there. "+
				"A process still running on it puts the record back within a minute; if none runs, `crawler delete --crawl %s` removes what is left", crawl, prefix, crawl)
		case frontier.StateExpired:
			return fmt.Errorf("crawl %s under prefix %s has expired: it is registered, but its keys are gone (`crawler delete --crawl %s` forgets it)", crawl, prefix, crawl)
		}
	}
	return fmt.Errorf("no crawl %s under prefix %s (see crawler crawls)", crawl, prefix)
}

// runStatus wires crawler status: settings → Redis → the crawl's counts
// and limits, then a row per site with queued URLs (writeSites).
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	cfg, fs, err := loadConfig("status", args, stderr, statusUsage)
	if err != nil {
		return err
	}
	defer func() { err = cfg.WithPermHint(err) }()
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q (name the crawl with --crawl)", fs.Args())
	}
	rdb, err := cfg.Connect(ctx, newLogger(cfg, stderr, isTerminal(stderr)))
	if err != nil {
		return err
	}
	defer rdb.Close()
	lim := limiter.New(rdb, &limiter.Options{Prefix: cfg.Prefix, Lease: cfg.Lease})
	defer lim.Close()
	rob := robots.NewCache(rdb, nil, &robots.CacheOptions{Prefix: cfg.Prefix})
	fr, meta, err := frontier.Open(ctx, rdb, &frontier.Options{Prefix: cfg.Prefix, Crawl: cfg.Crawl})
	if errors.Is(err, frontier.ErrNoCrawl) {
		return noCrawl(ctx, rdb, cfg.Prefix, cfg.Crawl)
	}
	if err != nil {
		return err
	}
	st, err := fr.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "crawl %s on %s: %d queued, %d in flight, %d done, %d failed, %d URLs seen\n",
		cfg.Crawl, cfg.RedisAddrs(), st.Queued, st.InFlight, st.Done, st.Failed, st.Seen)
	// The crawl's own limits, as its processes recorded them, not this
	// process's flags.
	fmt.Fprintf(stdout, "limits: %s\n", limits(meta, st))
	fmt.Fprintf(stdout, "scope: %s\n", meta.Scope)
	if note := seenNote(st.SeenMostInShard); note != "" {
		fmt.Fprintln(stdout, note)
	}
	if frontier.StateOf(st, meta) == frontier.StateStalled {
		fmt.Fprintf(stdout, "stalled: no process has worked on it for %s (its processes stopped or died); crawler run --crawl %s carries it on\n",
			meta.Idle().Round(time.Second), cfg.Crawl)
	}
	fmt.Fprintln(stdout)
	perSite := meta.MaxPerSite
	if perSite == 0 { // a crawl from before the limits were recorded
		perSite = cfg.MaxPerSite
	}
	sites, err := fr.Sites(ctx)
	if err != nil {
		return err
	}
	return writeSites(ctx, stdout, sites, perSite, lim, rob)
}

// writeSites prints a row per site with queued URLs: its permit limit
// (the lower of perSite and what its robots.txt asks, "?" when none is
// cached yet) and the limiter's state of it (siteRow), then a legend.
func writeSites(ctx context.Context, w io.Writer, sites []frontier.SiteQueue, perSite int, lim *limiter.Limiter, rob *robots.Cache) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "site\tlimit\tcap now\textra delay\tttfb\tbackoff\tholders\twaiters\tqueued\tready in\tdelay left\t")
	for _, s := range sites {
		limit, known := rob.SiteCap(ctx, s.Site, perSite)
		ls, err := lim.Status(ctx, s.Site, limit)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, siteRow(s, limitText(limit, known), ls))
	}
	if len(sites) == 0 {
		fmt.Fprintln(tw, "(no site has queued URLs)\t\t\t\t\t\t\t\t\t\t\t")
	}
	tw.Flush()
	if len(sites) > 0 {
		fmt.Fprint(w, siteLegend)
	}
	return nil
}

// limitText is a site's limit column: "?" after it while no robots.txt of
// the site is cached (the crawl's max per site stands in).
func limitText(limit int, known bool) string {
	if known {
		return strconv.Itoa(limit)
	}
	return strconv.Itoa(limit) + "?"
}

// siteLegend explains writeSites' columns.
const siteLegend = `
limit?: robots.txt not fetched yet; the crawl's max per site is shown. cap now: the cap adaptive politeness
applies, fleet-wide (- : no health recorded yet); extra delay, ttfb (smoothed time to first byte) and
backoff (after a 429/503 without Retry-After, with its level) are the site's health in Redis.
`

// siteRow is a site's row of writeSites, tab-separated: "-" for what the
// limiter has not recorded, "at cap" when the site waits for one of its
// fetches to settle.
func siteRow(s frontier.SiteQueue, limit string, ls limiter.SiteStatus) string {
	ready := s.ReadyIn.String()
	if s.Full {
		ready = "at cap" // back when one of its fetches settles
	}
	capNow, ttfb, back := "-", "-", "-"
	if ls.Cap > 0 {
		capNow = strconv.Itoa(ls.Cap)
	}
	if ls.TTFB > 0 {
		ttfb = ls.TTFB.Round(time.Millisecond).String()
	}
	if ls.BackoffLeft > 0 {
		back = fmt.Sprintf("%s (x%d)", ls.BackoffLeft.Round(time.Second), ls.Backoffs)
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t", s.Site, limit, capNow, ls.ExtraDelay, ttfb, back,
		ls.Holders, ls.Waiting, s.Queued, ready, ls.NextIn)
}

// seenNote warns of a crawl with a shard that has seen more URLs (most:
// Stats.SeenMostInShard) than its seen sets hold compactly with Redis's
// default set-max-intset-entries (512), and says what to set; "" when none
// has.
func seenNote(most int64) string {
	if most <= frontier.CompactSeen(512) {
		return ""
	}
	return fmt.Sprintf("seen URLs: %d in one shard, past the %d a shard keeps compact with Redis's default set-max-intset-entries 512: "+
		"unless it is set higher, each past it costs some 77 bytes rather than 9 (CONFIG SET set-max-intset-entries 4096 keeps %d a shard compact)",
		most, frontier.CompactSeen(512), frontier.CompactSeen(4096))
}

// limits says what the crawl applies, from its meta: shards, page limit
// (and what waits past it), per-site limit, site key, and when its keys
// expire.
func limits(m frontier.Meta, st frontier.Stats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d shards", m.Shards)
	switch {
	case m.MaxPages > 0:
		fmt.Fprintf(&b, ", max pages %d", m.MaxPages)
	case m.MaxPages == 0:
		b.WriteString(", no page limit")
	}
	if st.Over > 0 || st.Dropped > 0 {
		fmt.Fprintf(&b, " (%d URLs past it wait for a run with a higher --max-pages", st.Over)
		if st.Dropped > 0 {
			fmt.Fprintf(&b, "; %d dropped, the overflow full", st.Dropped)
		}
		b.WriteString(")")
	}
	if st.SiteFull > 0 {
		fmt.Fprintf(&b, ", %d links dropped at a site's --max-queued-per-site (queued if a page fetched later links to them again)", st.SiteFull)
	}
	if m.MaxPerSite > 0 {
		fmt.Fprintf(&b, ", max per site %d", m.MaxPerSite)
	} else {
		b.WriteString(", max per site not recorded (created by an older crawler: this command's --max-per-site is shown)")
	}
	if m.SiteKey != "" {
		fmt.Fprintf(&b, ", site key %s", m.SiteKey)
	}
	fmt.Fprintf(&b, "; its keys expire in %s unless a process works on it", m.ExpiresIn.Round(time.Second))
	return b.String()
}
