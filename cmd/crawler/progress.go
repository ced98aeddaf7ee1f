package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/polite-crawler/polite/crawl"
	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/console"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// progress is what the progress report reads: the process's counts, the
// crawl's, and, when the process idles, why.
type progress struct {
	c   *crawl.Crawler
	fr  *frontier.Frontier
	lim *limiter.Limiter
	rob *robots.Cache
	cap int // --max-per-site, to ask the limiter with
}

// report shows progress every interval until done: a line redrawn in place
// on a terminal console, log records otherwise. Each tick costs one Redis
// round trip (frontier.Stats), and one more when the process idles while
// the frontier holds every queued site back (see waiting).
func (pr *progress) report(ctx context.Context, done <-chan struct{}, every time.Duration, con *console.Console, log *slog.Logger) {
	start, last := time.Now(), int64(0)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			con.End()
			return
		case <-done:
			con.End()
			return
		case <-tick.C:
		}
		p := pr.c.Progress()
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, _ := pr.fr.Stats(qctx)
		waiting := pr.waiting(qctx, p, st)
		cancel()
		rate := float64(p.Pages-last) / every.Seconds()
		last = p.Pages
		if con.Terminal() {
			line := fmt.Sprintf("%6.0fs  pages %d  %.1f/s  queued %d  ", time.Since(start).Seconds(), p.Pages, rate, st.Queued)
			if waiting == "" {
				line += fmt.Sprintf("in flight %d (fleet %d)  waiting for permits %d", p.InFlight, st.InFlight, p.Waiting)
			} else { // none of its own in flight or waiting: room for why
				line += fmt.Sprintf("fleet in flight %d  %s", st.InFlight, waiting)
			}
			con.Progress(line)
			continue
		}
		attrs := []any{"pages", p.Pages, "pages_per_s", rate, "queued", st.Queued, "in_flight", p.InFlight,
			"fleet_in_flight", st.InFlight, "waiting_for_permits", p.Waiting, "done", st.Done, "failed", st.Failed}
		if waiting != "" {
			attrs = append(attrs, "waiting", waiting)
		}
		log.Info("progress", attrs...)
	}
}

// waiting says why the process idles, as "waiting: next site ready in 12s
// (example.com: crawl delay)", or "" when it does not: something of its
// own is in flight or waits for a permit, or a site is ready, or none is
// held back. With nothing in flight it first asks whether Redis's restart
// guard holds every permit back (GuardLeft: INFO, none when the guard is
// off). Else it asks the limiter about the site the frontier hands out
// soonest (one script call); which site that is is approximate when a
// hold-off outlasts the frontier's deferral of a site.
func (pr *progress) waiting(ctx context.Context, p crawl.Progress, st frontier.Stats) string {
	if p.InFlight > 0 {
		return ""
	}
	if left, err := pr.lim.GuardLeft(ctx); err == nil && left > 0 {
		return fmt.Sprintf("waiting: Redis started less than a lease ago: no permits for %s (restart guard)", roundWait(left))
	}
	if p.Waiting > 0 || st.Held.Site == "" {
		return ""
	}
	ls, err := pr.lim.Status(ctx, st.Held.Site, pr.cap)
	if err != nil {
		return ""
	}
	wait, why := holdReason(st.Held.In, ls, pr.crawlDelay(st.Held.Site))
	return fmt.Sprintf("waiting: next site ready in %s (%s: %s)", roundWait(wait), st.Held.Site, why)
}

// crawlDelay is site's crawl delay if this process holds its robots.txt in
// memory (no Redis call), else 0.
func (pr *progress) crawlDelay(site string) time.Duration {
	for _, scheme := range []string{"http", "https"} {
		if p, ok := pr.rob.Local(&url.URL{Scheme: scheme, Host: site}); ok {
			return p.CrawlDelay
		}
	}
	return 0
}

// holdReason is how long a site the frontier holds back for in yet waits,
// and why, from the limiter's view of it and its robots.txt crawl delay. A
// hold-off longer than the crawl delay (and any adaptive extra delay)
// explains is a Retry-After, as the limiter keeps both in one mark.
func holdReason(in time.Duration, ls limiter.SiteStatus, crawlDelay time.Duration) (time.Duration, string) {
	switch {
	case ls.BackoffLeft > 0 && ls.BackoffLeft+time.Second >= ls.NextIn:
		return max(in, ls.BackoffLeft), "backoff after 429/503"
	case ls.NextIn > crawlDelay+ls.ExtraDelay+time.Second:
		return max(in, ls.NextIn), "Retry-After"
	case crawlDelay > 0:
		return max(in, ls.NextIn), "crawl delay"
	case ls.ExtraDelay > 0:
		return max(in, ls.NextIn), "adaptive delay"
	}
	return in, "deferred"
}

// roundWait rounds d for a person: whole seconds from 10s, tenths below.
func roundWait(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}
