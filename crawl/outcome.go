package crawl

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/netcause"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// Outcome is what one turn of a URL came to. Its name is the same in the
// results (the "outcome" of each JSON line), the logs, the final summary
// and Crawler.Outcomes. Every turn that is recorded has exactly one.
type Outcome uint8

const (
	OutcomeFetched     Outcome = iota // 2xx: the page, its links queued
	OutcomeRedirect                   // 3xx: not followed; its Location queued as a link of the page
	OutcomeHTTPError                  // 4xx but 429: final at once
	OutcomeDisallowed                 // robots.txt closes the URL
	OutcomeUnreachable                // robots.txt could not be read (cause): the site is closed for a while (RFC 9309)
	OutcomeFailed                     // a retryable failure (429, 5xx, network, permit lost; cause) on the URL's last attempt
	OutcomeRetry                      // a retryable failure (cause) with attempts left: tried again later, not finished
	OutcomeDeferred                   // not requested, the crawler's doing (cause): back in the queue, no attempt counted
	OutcomeSkipped                    // not a URL the crawler can request
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"fetched", "redirect", "http_error", "disallowed", "unreachable",
	"failed_after_retries", "retry", "deferred", "skipped"}

// String is the outcome's name: "fetched", "redirect", "http_error",
// "disallowed", "unreachable", "failed_after_retries", "retry", "deferred"
// or "skipped".
func (o Outcome) String() string {
	if o >= numOutcomes {
		return "unknown"
	}
	return outcomeNames[o]
}

// Final reports whether the outcome finishes its URL: every outcome but
// retry and deferred, after which the URL is fetched again.
func (o Outcome) Final() bool { return o != OutcomeRetry && o != OutcomeDeferred }

// Outcomes lists every outcome's name, in a fixed order (the summary's).
func Outcomes() []string { return append([]string(nil), outcomeNames[:]...) }

// verdict is what one turn came to: its outcome and, for unreachable,
// failed_after_retries, retry and deferred, the cause in netcause's words
// or "status N".
type verdict struct {
	o     Outcome
	cause string
}

// judge classifies a turn: pg is what the site answered (status 0: no
// answer), err the fetch's or the reservation's error, last whether this
// is the URL's last attempt (frontier.Options.MaxAttempts).
func judge(pg *page, err error, last bool) verdict {
	var closed *fetch.DisallowedError
	switch {
	case errors.As(err, &closed) && closed.Policy.Unreachable():
		return verdict{OutcomeUnreachable, closed.Policy.Why()}
	case errors.Is(err, fetch.ErrDisallowed):
		return verdict{o: OutcomeDisallowed}
	case pg.status == 0 && errors.Is(err, robots.ErrNotFetched) && !errors.Is(err, limiter.ErrPermitLost):
		return verdict{OutcomeDeferred, netcause.Of(err)}
	case err == nil || pg.status >= 200 && pg.status < 300:
		return verdict{o: OutcomeFetched} // colly calls 203..299 errors: they are pages
	case pg.status >= 300 && pg.status < 400:
		return verdict{o: OutcomeRedirect}
	case pg.status >= 400 && pg.status < 500 && pg.status != http.StatusTooManyRequests:
		return verdict{o: OutcomeHTTPError}
	}
	v := verdict{OutcomeRetry, netcause.Of(err)}
	switch {
	case pg.status != 0:
		v.cause = "status " + strconv.Itoa(pg.status)
	case errors.Is(err, limiter.ErrPermitLost):
		v.cause = "permit lost"
	}
	if last {
		v.o = OutcomeFailed
	}
	return v
}

// settlement is what the frontier makes of a verdict on it: a page's links
// are queued (fetched, redirect), a retryable failure goes back after a
// backoff, a deferral to the head of its site's queue.
func (c *Crawler) settlement(it frontier.Item, v verdict, links, external []string) frontier.Settlement {
	s := frontier.Settlement{Item: it, Outcome: frontier.Skipped}
	switch v.o {
	case OutcomeFetched, OutcomeRedirect:
		s.Outcome, s.Links, s.External = frontier.Fetched, links, external
	case OutcomeRetry, OutcomeFailed:
		s.Outcome, s.Delay = frontier.Retry, time.Duration(it.Attempts+1)*time.Second
	case OutcomeDeferred:
		s.Outcome, s.Delay = frontier.Deferred, time.Second
	}
	return s
}

// ending is how a turn ends: its settlement and, when the turn is recorded,
// the verdict with the page and error it was judged on. A final turn is
// recorded after its settlement (see settleTurn), so that one whose
// settlement did not take is not written as its URL's last.
type ending struct {
	s   frontier.Settlement
	v   *verdict // nil: not recorded (a deferral at the semaphore)
	pg  *page
	err error
}

// judged is an ending recorded with verdict v.
func judged(s frontier.Settlement, v verdict, pg *page, err error) ending {
	return ending{s: s, v: &v, pg: pg, err: err}
}

// unsettled is what a final turn came to when its settlement did not take
// (see frontier.Result.Unsettled): its URL is handed out again, so the
// verdict becomes a retry, caused by "not settled", and the line says why
// (settleErr) when the fetch had no error of its own. No attempt is counted.
func unsettled(v verdict, err, settleErr error) (verdict, error) {
	if err == nil {
		err = settleErr
	}
	return verdict{OutcomeRetry, "not settled"}, err
}

// outcome is what becomes of a fetched item: its verdict, counted once the
// settlement is sent, and its settlement.
func (c *Crawler) outcome(ctx context.Context, it frontier.Item, pg *page, err error) ending {
	v := judge(pg, err, it.Attempts+1 >= c.maxAttempts)
	c.countTooLong(it, pg.tooLong)
	if v.cause == "permit lost" {
		c.o.Log.Warn("permit lost mid-request (not refreshed in time): request stopped", "url", it.URL, "outcome", v.o.String(), "err", err)
	}
	var links, external []string
	if v.o == OutcomeFetched || v.o == OutcomeRedirect {
		links, external = c.inScope(ctx, it, pg.links)
	}
	s := c.settlement(it, v, links, external)
	s.Next = ctx.Err() == nil
	return judged(s, v, pg, err)
}
