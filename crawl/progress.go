package crawl

import "time"

// Progress is what this process has done so far.
type Progress struct {
	// Outcomes counts the turns recorded, by outcome name (Outcomes).
	// Done is the sum of the final ones' counts (all but retry and
	// deferred): the URLs this process finished. Pages counts fetched,
	// Failed failed_after_retries, and Skipped the URLs finished without a
	// page and not retried (http_error, disallowed, unreachable, skipped).
	Outcomes                     map[string]int64
	Done, Pages, Failed, Skipped int64
	Bytes                        int64 // body bytes read
	InFlight, Waiting            int64
	// TooLong counts the links found that were longer than
	// Options.MaxURLLength, and dropped.
	TooLong int64
	// LinksDisallowed counts the links found that their site's robots.txt
	// closes, dropped before they were queued (see Crawler.Seed's scope).
	LinksDisallowed int64
	// OutOfScope counts the links found that the crawl's scope drops (see
	// frontier.ScopeRules): to sites out of it, past the external hops it
	// allows, or failing its include and exclude patterns.
	OutOfScope int64
	// SitemapURLs counts the URLs the seeds' sitemaps listed that were
	// queued (Options.Sitemaps).
	SitemapURLs int64
}

// Progress reads the process's counters.
func (c *Crawler) Progress() Progress {
	p := Progress{Outcomes: c.Outcomes(), Bytes: c.bytes.Load(), InFlight: c.inflight.Load(),
		TooLong: c.tooLong.Load(), LinksDisallowed: c.linksClosed.Load(), Waiting: int64(c.tr.Waiting()),
		SitemapURLs: c.maps.urls.Load(), OutOfScope: c.scope.out.Load()}
	for o := range numOutcomes {
		if o.Final() {
			p.Done += c.counts[o].Load()
		}
	}
	p.Pages, p.Failed = c.counts[OutcomeFetched].Load(), c.counts[OutcomeFailed].Load()
	for _, o := range []Outcome{OutcomeHTTPError, OutcomeDisallowed, OutcomeUnreachable, OutcomeSkipped} {
		p.Skipped += c.counts[o].Load()
	}
	return p
}

// Outcomes is how many turns this process has recorded of each outcome,
// by name (Outcomes), every name present.
func (c *Crawler) Outcomes() map[string]int64 {
	m := make(map[string]int64, numOutcomes)
	for o, name := range outcomeNames {
		m[name] = c.counts[o].Load()
	}
	return m
}

// Summary is p as key-value pairs for a log record (slog): "elapsed" (a
// duration's string), "done", "bytes", then each outcome's count by its
// name (Outcomes), and the links dropped and sitemap URLs queued. done is
// the sum of the final outcomes' counts (all but retry and deferred): the
// URLs this process finished, each once.
func (p Progress) Summary(elapsed time.Duration) []any {
	kv := []any{"elapsed", elapsed.Round(time.Millisecond).String(), "done", p.Done, "bytes", p.Bytes}
	for _, name := range outcomeNames {
		kv = append(kv, name, p.Outcomes[name])
	}
	return append(kv, "links_too_long", p.TooLong, "links_disallowed", p.LinksDisallowed, "links_out_of_scope", p.OutOfScope, "sitemap_urls", p.SitemapURLs)
}
