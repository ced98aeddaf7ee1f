// Package fetch makes every HTTP request of the crawler polite: Transport
// checks the site's robots policy, takes a permit from the site's semaphore
// for each request (redirect hops and robots.txt included), keeps it alive
// while the body streams, stops the request if the permit is lost, and gives
// it back when the body is closed. NewCollector sets colly up on it.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/internal/clock"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// ErrDisallowed is returned (wrapped in a *DisallowedError) for a URL the
// site's robots.txt closes to us.
var ErrDisallowed = errors.New("fetch: disallowed by robots.txt")

// DisallowedError names the URL robots.txt closed.
type DisallowedError struct{ URL string }

func (e *DisallowedError) Error() string { return "fetch: " + e.URL + " is disallowed by robots.txt" }
func (e *DisallowedError) Unwrap() error { return ErrDisallowed }

// Observer hears what the transport does, for metrics. All methods must be
// safe for concurrent use; a nil Observer is fine.
type Observer interface {
	PermitWait(site string, waited time.Duration, err error)
	PermitHeld(delta int)
	PermitLost(site string)
	Response(site string, status int)
}

// Transport is an http.RoundTripper that takes a permit per request. It is
// safe for concurrent use, except Handover, which belongs to one worker.
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

	mu      sync.Mutex
	handed  handed // a permit a worker took ahead (see Handover)
	waiting int

	checks atomic.Int64 // robots checks made (Policy.Allowed), for tests
}

// handed is a permit handed over for the next request to its site, with the
// request it was taken for when robots.txt was checked first (TryHandover,
// WaitHandover): that request is not checked again.
type handed struct {
	p       *limiter.Permit
	checked string       // checkKey of the URL checked; "" if none was
	rule    limiter.Rule // the rule robots.txt gave the checked URL
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

// Rule returns the policy of a URL's robots.txt (its scheme, host and port)
// and the permit rule for its site: robots Concurrency lowers Cap, a crawl
// delay makes it one at a time.
func (t *Transport) Rule(ctx context.Context, req *http.Request) (robots.Policy, limiter.Rule, error) {
	pol, err := t.Robots.Policy(ctx, req.URL)
	if err != nil {
		return pol, limiter.Rule{}, fmt.Errorf("fetch: robots.txt of %s://%s: %w", req.URL.Scheme, robots.Site(req.URL), err)
	}
	return pol, limiter.Rule{Limit: pol.Cap(t.cap()), Delay: pol.CrawlDelay}, nil
}

func (t *Transport) cap() int {
	if t.Cap <= 0 {
		return 3
	}
	return t.Cap
}

// Handover gives the transport a permit the caller already holds, to be used
// by the next request to the permit's site instead of acquiring one. The
// caller must call Reclaim after that request, to release the permit if no
// request used it.
func (t *Transport) Handover(p *limiter.Permit) { t.handOver(handed{p: p}) }

func (t *Transport) handOver(h handed) {
	t.mu.Lock()
	t.handed = h
	t.mu.Unlock()
}

// TryHandover prepares a request to u without waiting: it checks robots.txt
// (a *DisallowedError if u is closed), then tries to take the site's permit
// and hand it over (see Handover). The request to u that takes the permit is
// not checked again; any other request (a redirect hop, another URL) is. lastSlot reports whether that permit took
// the site's last free slot (limiter.Permit.TookLastSlot). If the site is
// full it returns limiter.ErrBusy (a *limiter.BusyError with a wait hint):
// the caller should do other work and come back.
func (t *Transport) TryHandover(ctx context.Context, u *url.URL) (lastSlot bool, err error) {
	return t.handover(ctx, u, t.Limiter.TryAcquireRule)
}

// WaitHandover is TryHandover that waits, in the site's fair line, up to
// maxWait for a permit: a released slot is handed to the first in line at
// once, with no polling. When maxWait runs out first it returns a
// *limiter.BusyError (Full) and leaves nothing in the line. Wait only when
// there is no other work: the wait holds this worker, not the site.
func (t *Transport) WaitHandover(ctx context.Context, u *url.URL, maxWait time.Duration) (lastSlot bool, err error) {
	return t.handover(ctx, u, func(ctx context.Context, site string, rule limiter.Rule) (*limiter.Permit, error) {
		wctx, cancel := context.WithTimeout(ctx, maxWait)
		defer cancel()
		p, err := t.wait(wctx, site, rule)
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, &limiter.BusyError{Site: site, Full: true}
		}
		return p, err
	})
}

func (t *Transport) handover(ctx context.Context, u *url.URL, acquire func(context.Context, string, limiter.Rule) (*limiter.Permit, error)) (bool, error) {
	pol, rule, err := t.Rule(ctx, &http.Request{URL: u})
	if err != nil {
		return false, err
	}
	if !t.allowed(pol, u) {
		return false, &DisallowedError{URL: u.String()}
	}
	p, err := acquire(ctx, robots.Site(u), rule)
	if err != nil {
		return false, err
	}
	t.observe(func(o Observer) { o.PermitHeld(1) })
	t.handOver(handed{p: p, checked: checkKey(u), rule: rule})
	return p.TookLastSlot(), nil
}

// Reclaim releases a handed-over permit that no request took.
func (t *Transport) Reclaim(ctx context.Context) {
	t.mu.Lock()
	p := t.handed.p
	t.handed = handed{}
	t.mu.Unlock()
	if p != nil {
		p.Release(ctx)
		t.observe(func(o Observer) { o.PermitHeld(-1) })
	}
}

// Waiting is how many requests are waiting for a permit now.
func (t *Transport) Waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waiting
}

// checkedAhead reports whether the handed-over permit was taken after
// robots.txt was checked for u itself, and the rule it was taken under: a
// request that finds that permit lost takes a new one under the same rule
// (its crawl delay included).
func (t *Transport) checkedAhead(u *url.URL) (limiter.Rule, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.handed
	return h.rule, h.p != nil && h.checked != "" && h.checked == checkKey(u)
}

// take returns the handed-over permit if it is for site and not lost.
func (t *Transport) take(site string) *limiter.Permit {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.handed.p; p != nil && p.Site() == site && p.Err() == nil {
		t.handed = handed{}
		return p
	}
	return nil
}

// RoundTrip checks robots.txt (except for robots.txt itself, and for the
// request a TryHandover or WaitHandover checked and took the permit for:
// one check per fetch), takes the site's permit, and makes the request
// under a context the permit cancels if it is lost. The permit is released when the response body is closed, or at
// once if the request fails. A 429 or 503 with Retry-After holds every
// worker of the fleet off the site until then.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	site := robots.Site(req.URL)
	// robots.txt is fetched under limit 1 (no delay): it waits behind every
	// holder, so it is safe whatever the policy it is about to replace.
	rule := limiter.Rule{Limit: 1}
	ahead, checked := t.checkedAhead(req.URL)
	switch {
	case robots.IsFetch(ctx):
	case checked:
		rule = ahead
	default:
		// Checked before the permit is taken: the check may fetch
		// robots.txt, which may take a handed-over permit of this site.
		pol, r, err := t.Rule(ctx, req)
		if err != nil {
			return nil, err
		}
		if !t.allowed(pol, req.URL) {
			return nil, &DisallowedError{URL: req.URL.String()}
		}
		rule = r
	}
	// robots.txt: the wait for the permit and the request are timed apart
	// (robots.FetchTimeout), so that waiting behind others never cuts the
	// time the site has to answer and gets it judged unreachable.
	reqTimeout := robots.FetchTimeout(ctx)
	p := t.take(site)
	if p == nil {
		actx, acancel := ctx, context.CancelFunc(func() {})
		if reqTimeout > 0 {
			actx, acancel = context.WithTimeout(ctx, reqTimeout)
		}
		var err error
		p, err = t.acquire(actx, site, rule)
		acancel()
		if err != nil {
			return nil, err
		}
	}
	p.KeepAlive(context.WithoutCancel(ctx)) // ends at Release or loss
	rctx, cancel := p.Context(ctx)
	if reqTimeout > 0 {
		pcancel := cancel
		tctx, tcancel := context.WithTimeout(rctx, reqTimeout)
		rctx, cancel = tctx, func() { tcancel(); pcancel() }
	}
	resp, err := t.base().RoundTrip(req.WithContext(rctx))
	if err != nil {
		cancel()
		t.release(p)
		if p.Err() != nil {
			return nil, fmt.Errorf("fetch: %s: %w (%w; %v)", req.URL, limiter.ErrPermitLost, robots.ErrNotFetched, err)
		}
		return nil, err
	}
	t.observe(func(o Observer) { o.Response(site, resp.StatusCode) })
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if d := RetryAfter(resp.Header, clock.Now()); d > 0 {
			t.Limiter.Backoff(context.WithoutCancel(ctx), site, d)
		}
	}
	empty := resp.ContentLength == 0 // nothing the site could still be sending
	resp.Body = &permitBody{ReadCloser: resp.Body, done: func(early bool) {
		cancel()
		if early && !empty {
			// Hung up before the end: the site goes on sending until it
			// notices, so its slot is not free yet.
			time.Sleep(AbortGrace)
		}
		t.release(p)
	}}
	return resp, nil
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
	t.mu.Lock()
	t.waiting++
	t.mu.Unlock()
	start := time.Now()
	p, err := t.Limiter.AcquireRule(ctx, site, rule)
	t.mu.Lock()
	t.waiting--
	t.mu.Unlock()
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
	if err := p.Release(ctx); errors.Is(err, limiter.ErrPermitLost) {
		t.observe(func(o Observer) { o.PermitLost(p.Site()) })
	}
	t.observe(func(o Observer) { o.PermitHeld(-1) })
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

func (t *Transport) observe(f func(Observer)) {
	if t.Observer != nil {
		f(t.Observer)
	}
}

// permitBody releases the permit when the body is closed (not at EOF: a
// reader may stop early), once, saying whether it was closed before its end.
type permitBody struct {
	io.ReadCloser
	once sync.Once
	eof  atomic.Bool
	done func(early bool)
}

func (b *permitBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

func (b *permitBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.done(!b.eof.Load()) })
	return err
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
