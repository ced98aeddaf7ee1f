// Package fetch makes every HTTP request of the crawler polite: Transport
// checks the site's robots policy, takes a permit from the site's semaphore
// for each request (redirect hops included), keeps it alive while the body
// streams, stops the request if the permit is lost, and gives it back when
// the body is closed. A worker may instead reserve the permit ahead
// (Transport.Reserve) and pass it with the request's context
// (WithReservation); it then releases it itself, for example in the round
// trip that settles the URL. RobotsTransport takes the permits of
// robots.txt requests. NewCollector sets colly up on a Transport.
//
// Transport, RobotsTransport and AddrTransport are safe for concurrent use;
// one of each serves every worker of a process. A request robots.txt
// forbids fails with a *DisallowedError (ErrDisallowed); one that failed
// for want of a permit, or lost its permit mid-request, wraps
// robots.ErrNotFetched (and limiter.ErrPermitLost when lost): the crawler's
// doing, no verdict on the site. Other errors are the server's or the
// network's, as net/http returns them.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/internal/clock"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// ErrDisallowed is returned (wrapped in a *DisallowedError) for a URL the
// site's robots.txt closes to us.
var ErrDisallowed = errors.New("fetch: disallowed by robots.txt")

// DisallowedError names the URL robots.txt closed, and the policy that
// closed it: when Policy.Unreachable, robots.txt could not be read
// (Policy.Why says why) and the site is closed until it can (RFC 9309).
type DisallowedError struct {
	URL    string
	Policy robots.Policy
}

func (e *DisallowedError) Error() string {
	if why := e.Policy.Why(); why != "" {
		return "fetch: " + e.URL + ": robots.txt unreachable (" + why + "): the site is closed until it can be read"
	}
	return "fetch: " + e.URL + " is disallowed by robots.txt"
}
func (e *DisallowedError) Unwrap() error { return ErrDisallowed }

// Observer hears what the transport does, for metrics. All methods must be
// safe for concurrent use; a nil Observer is fine.
type Observer interface {
	PermitWait(site string, waited time.Duration, err error)
	PermitHeld(delta int)
	PermitLost(site string)
	Response(site string, status int)
	// Fetched reports a response's body closed: its status, the body's
	// bytes read, and the time from the request's start (its site permit
	// held) to the close. Requests that got no response are not reported.
	Fetched(site string, status int, bytes int64, took time.Duration)
}

// Transport is an http.RoundTripper that takes a permit per request. It
// holds no per-request state and is safe for concurrent use: one Transport
// serves every worker of a process. A permit a worker took ahead for a
// request (Reserve) travels with that request's context (WithReservation).
type Transport struct {
	// Base makes the requests (default http.DefaultTransport).
	Base http.RoundTripper
	// Limiter and Robots are required.
	Limiter *limiter.Limiter
	Robots  *robots.Cache
	// Cap is the most requests at once per site when robots.txt says
	// nothing lower (default 3).
	Cap      int
	Observer Observer
	// SiteKey names the permit a URL's requests take, and the site the
	// Observer hears of: robots.Site (nil, the default: by host) or
	// robots.Domain (by registered domain). Every process of a crawl must
	// use the same, and the frontier the same as the permits. robots.txt
	// is fetched, cached and checked per scheme+host+port whatever it is.
	// With a key that gathers hosts, the key's cap and delay are the
	// strictest its hosts' robots.txt asked for recently (the lowest
	// Concurrency, the longest Crawl-delay or Request-rate), fleet-wide:
	// see Reservation.Rule and limiter.Rule.From.
	SiteKey robots.SiteKey
	// Log hears, as warnings, what the transport failed to do but went on
	// without: recording a site's Retry-After (default: discard).
	Log *slog.Logger

	waiting atomic.Int64 // requests waiting for a permit now
	checks  atomic.Int64 // robots checks made (Policy.Allowed), for tests
}

// checkKey names what a robots check is about: the robots.txt (scheme, site)
// and the path and query it judged.
func checkKey(u *url.URL) string {
	return u.Scheme + "://" + robots.Site(u) + u.RequestURI()
}

// allowed is the robots check, counted.
func (t *Transport) allowed(pol robots.Policy, u *url.URL) bool {
	t.checks.Add(1)
	return pol.Allowed(u.RequestURI())
}

// rule returns the policy of a URL's robots.txt (its scheme, host and port)
// and the permit rule for its site: robots Concurrency lowers Cap, a crawl
// delay makes it one at a time. When the permit's key may gather several
// hosts (SiteKey robots.Domain), the rule names the host as its contributor
// (limiter.Rule.From), so the key's permits follow the strictest rule any of
// its hosts' robots.txt asked for recently: the lowest Concurrency, the
// longest delay.
func (t *Transport) rule(ctx context.Context, req *http.Request) (robots.Policy, limiter.Rule, error) {
	pol, err := t.Robots.Policy(ctx, req.URL)
	if err != nil {
		return pol, limiter.Rule{}, fmt.Errorf("fetch: robots.txt of %s://%s: %w", req.URL.Scheme, robots.Site(req.URL), err)
	}
	return pol, t.ruleOf(pol, req.URL), nil
}

// ruleOf is the permit rule pol, u's robots.txt policy, gives u's site.
func (t *Transport) ruleOf(pol robots.Policy, u *url.URL) limiter.Rule {
	return limiter.Rule{Limit: pol.Cap(t.cap()), Delay: pol.CrawlDelay, From: t.ruleFrom(u)}
}

// ruleFrom is the contributor of u's rule (limiter.Rule.From): u's host
// when SiteKey may put several hosts under one key, which is anything but
// the host's own key (nil or robots.Site); then every host's rule is a
// contributor's, the key's own host's too (example.com and a.example.com
// are both under example.com). Otherwise "": a host-keyed crawl pays
// nothing for the ceiling.
func (t *Transport) ruleFrom(u *url.URL) string {
	if t.SiteKey == nil || reflect.ValueOf(t.SiteKey).Pointer() == siteKeyHost {
		return ""
	}
	return robots.Site(u)
}

var siteKeyHost = reflect.ValueOf(robots.SiteKey(robots.Site)).Pointer()

// site is the key of u's permit (SiteKey).
func (t *Transport) site(u *url.URL) string {
	if t.SiteKey == nil {
		return robots.Site(u)
	}
	return t.SiteKey(u)
}

func (t *Transport) cap() int {
	if t.Cap <= 0 {
		return 3
	}
	return t.Cap
}

// Waiting is how many requests are waiting for a permit now.
func (t *Transport) Waiting() int { return int(t.waiting.Load()) }

// RoundTrip checks robots.txt, takes the site's permit, and makes the
// request under a context the permit cancels if it is lost. The permit is
// released when the response body is closed, or at once if the request
// fails. A request whose context carries a Reservation for its URL
// (WithReservation) uses that permit instead, unchecked (Reserve checked
// it: one check per fetch), and leaves its release to the Reservation's
// owner once the body has been read to its end and closed. A 429 or 503
// with Retry-After holds every worker of the fleet off the site until then.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	site := t.site(req.URL)
	r := reservationFrom(ctx)
	p := r.take(req.URL)
	if p == nil {
		rule, checked := r.ruleFor(req.URL) // a reserved permit lost: retake under its rule
		if !checked {
			pol, rr, err := t.rule(ctx, req)
			if err != nil {
				return nil, err
			}
			if !t.allowed(pol, req.URL) {
				return nil, &DisallowedError{URL: req.URL.String(), Policy: pol}
			}
			rule = rr
		}
		var err error
		if p, err = t.acquire(ctx, site, rule); err != nil {
			return nil, err
		}
		r = nil // this request's own permit: released here
	}
	return t.send(req, p, r, 0, true)
}

// send makes req under p. With r, p is r's: on success the caller releases
// it through r; otherwise it is released here. timeout, when set, bounds
// the request from now (robots.txt). With health, the fetch's outcome goes
// to the site's health with the release (adaptive politeness): not a
// robots.txt fetch's, whose permit has limit 1, which the controller would
// take for the site's rule (a cap reduced to 1 would count as not reduced,
// a failure as a cap of 1 to slow down from).
func (t *Transport) send(req *http.Request, p *limiter.Permit, r *Reservation, timeout time.Duration, health bool) (*http.Response, error) {
	ctx := req.Context()
	site := p.Site()
	kctx, stopKeep := context.WithCancel(context.WithoutCancel(ctx))
	p.KeepAlive(kctx) // ends at Release, at loss, or when the body is done
	rctx, cancel := t.requestContext(ctx, p, timeout)
	stop := func() { cancel(); stopKeep() }
	rctx, clk := trace(rctx)
	resp, err := t.base().RoundTrip(req.WithContext(rctx))
	if err != nil {
		stop()
		if health {
			p.SetOutcome(limiter.Outcome{Class: failure(ctx, p, err)})
		}
		t.releaseNow(p, r)
		if p.Err() != nil {
			return nil, fmt.Errorf("fetch: %s: %w (%w; %v)", req.URL, limiter.ErrPermitLost, robots.ErrNotFetched, err)
		}
		return nil, err
	}
	clk.gotHeaders()
	t.observe(func(o Observer) { o.Response(site, resp.StatusCode) })
	var retry time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if retry = RetryAfter(resp.Header, clock.Now()); retry > 0 {
			if err := t.Limiter.Backoff(context.WithoutCancel(ctx), site, retry); err != nil {
				t.warn("could not record the site's Retry-After; its permits follow their own delay", "site", site, "retry_after", retry, "err", err)
			}
		}
	}
	// The site's health hears of the fetch with the permit's release: its
	// class and, for a page (2xx, not robots.txt: those are quick and would
	// make a site's best time one its pages never reach), its time to first
	// byte, and to last byte if the body ended.
	out := limiter.Outcome{Class: classify(resp, retry)}
	sample := resp.StatusCode/100 == 2 && req.URL.Path != "/robots.txt"
	if sample {
		out.TTFB = clk.ttfb()
	}
	resp.Body = t.heldBody(ctx, resp, p, r, clk, out, sample, health, stop)
	return resp, nil
}

// requestContext is the context a request under p runs in: ended when p is
// lost (cancel ends it too), and bounded by timeout when it is set. Through
// an AddrTransport the timeout starts once the request holds its address
// permit too: a wait for the address is the crawler's, not the server's.
func (t *Transport) requestContext(ctx context.Context, p *limiter.Permit, timeout time.Duration) (context.Context, context.CancelFunc) {
	rctx, cancel := p.Context(ctx)
	if _, ok := t.base().(*AddrTransport); ok && timeout > 0 {
		rctx = WithAddrTimeout(rctx, timeout)
	} else if timeout > 0 {
		pcancel := cancel
		tctx, tcancel := context.WithTimeout(rctx, timeout)
		rctx, cancel = tctx, func() { tcancel(); pcancel() }
	}
	return rctx, cancel
}

// heldBody wraps resp's body so that, when it is done, the request's
// context ends (stop), the fetch is observed, p's outcome is set with
// health (out, with the body's failure class, or its time to last byte
// when sample and the body was read to its end), and p is released:
// after AbortGrace if the body was closed early, as the site sends on
// until it notices; by its owner with its settlement when p is r's
// (Reservation.ReleaseOn).
func (t *Transport) heldBody(ctx context.Context, resp *http.Response, p *limiter.Permit, r *Reservation, clk *timing, out limiter.Outcome, sample, health bool, stop func()) *permitBody {
	site := p.Site()
	empty := resp.ContentLength == 0 // nothing the site could still be sending
	body := &permitBody{ReadCloser: resp.Body}
	body.done = func(early bool) {
		stop()
		t.observe(func(o Observer) { o.Fetched(site, resp.StatusCode, body.n.Load(), time.Since(clk.start)) })
		if err := body.failed(); err != nil {
			if c := failure(ctx, p, err); c != limiter.OutcomeNone {
				out.Class = c
			}
		} else if sample && (!early || empty) {
			out.TTLB = clk.ttlb()
		}
		if health {
			p.SetOutcome(out)
		}
		if early && !empty {
			// Hung up before the end: the site goes on sending until it
			// notices, so its slot is not free yet.
			time.Sleep(AbortGrace)
			t.releaseNow(p, r)
			return
		}
		if r == nil {
			t.release(p)
		}
		// Reserved: the owner releases it, with its settlement (Reservation.ReleaseOn).
	}
	return body
}

// releaseNow releases p, through r when p is r's.
func (t *Transport) releaseNow(p *limiter.Permit, r *Reservation) {
	if r != nil {
		r.release()
		return
	}
	t.release(p)
}

// AbortGrace is how long a permit is kept after its body is closed before
// the end (over the size cap, cancelled, or left unread), so that the site
// notices the dropped connection and stops before the next request to it
// starts. A body read to its end is released at once.
const AbortGrace = 50 * time.Millisecond

func (t *Transport) acquire(ctx context.Context, site string, rule limiter.Rule) (*limiter.Permit, error) {
	p, err := t.wait(ctx, site, rule)
	if err != nil {
		return nil, err
	}
	t.observe(func(o Observer) { o.PermitHeld(1) })
	return p, nil
}

// wait takes a permit in the site's line, counted in Waiting meanwhile and
// reported to the Observer.
func (t *Transport) wait(ctx context.Context, site string, rule limiter.Rule) (*limiter.Permit, error) {
	t.waiting.Add(1)
	start := time.Now()
	p, err := t.Limiter.AcquireRule(ctx, site, rule)
	t.waiting.Add(-1)
	t.observe(func(o Observer) { o.PermitWait(site, time.Since(start), err) })
	if err != nil {
		// Not the site's doing: for robots.txt, no verdict on it.
		return nil, fmt.Errorf("fetch: permit for %s: %w (%w)", site, err, robots.ErrNotFetched)
	}
	return p, nil
}

func (t *Transport) release(p *limiter.Permit) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t.released(p, p.Release(ctx))
}

// released reports a release, and its outcome, to the Observer.
func (t *Transport) released(p *limiter.Permit, err error) {
	if errors.Is(err, limiter.ErrPermitLost) {
		t.observe(func(o Observer) { o.PermitLost(p.Site()) })
	}
	t.observe(func(o Observer) { o.PermitHeld(-1) })
}

// newRequest is a GET of u, for a robots check outside a request.
func newRequest(u *url.URL) *http.Request {
	return &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

func (t *Transport) warn(msg string, args ...any) {
	if t.Log != nil {
		t.Log.Warn(msg, args...)
	}
}

func (t *Transport) observe(f func(Observer)) {
	if t.Observer != nil {
		f(t.Observer)
	}
}

// RetryAfter reads a Retry-After header (seconds or an HTTP date) as a
// duration; 0 if absent or unreadable. At most an hour. A date is counted
// from the response's Date, the site's own clock, so that neither clock
// needs to be right; from now only when there is no Date.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.Atoi(v); err == nil {
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		if sent, err := http.ParseTime(h.Get("Date")); err == nil {
			now = sent
		}
		d = at.Sub(now)
	}
	return min(max(d, 0), time.Hour)
}
