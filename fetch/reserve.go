package fetch

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/redis/go-redis/v9"
)

// Reservation is a permit a worker took ahead for one request, after
// robots.txt allowed the request's URL (Reserve). It travels with the
// request's context (WithReservation); the request to that URL uses it
// without checking robots.txt again, and a request to any other URL (a
// redirect hop) is checked and takes a permit of its own.
//
// The worker owns the permit: it releases it with Release, or with
// ReleaseOn in the same round trip as its other Redis work, once the
// request is over. The transport releases it itself only when the request
// fails or its body is closed before its end; then Release and ReleaseOn do
// nothing. A reservation never released is lost when its lease runs out:
// the transport refreshes it only while the body streams.
type Reservation struct {
	t       *Transport
	p       *limiter.Permit
	checked string       // checkKey of the URL robots.txt allowed
	rule    limiter.Rule // the rule robots.txt gave it

	mu       sync.Mutex
	used     bool // a request took the permit
	released bool
}

type reservationKey struct{}

// WithReservation returns ctx carrying r, for the request r was taken for.
func WithReservation(ctx context.Context, r *Reservation) context.Context {
	return context.WithValue(ctx, reservationKey{}, r)
}

func reservationFrom(ctx context.Context) *Reservation {
	r, _ := ctx.Value(reservationKey{}).(*Reservation)
	return r
}

// Reserve prepares a request to u: it checks robots.txt (a
// *DisallowedError if u is closed to us) and takes the site's permit under
// the rule robots.txt gives. With wait 0 it does not wait: if the site is
// full or in its crawl delay it returns a *limiter.BusyError with a wait
// hint, so the caller can do other work and come back. With wait > 0 it
// waits in the site's fair line up to wait (a released slot is handed to
// the first in line at once), then returns a *limiter.BusyError (Full) and
// leaves nothing in the line. Wait only when there is no other work: the
// wait holds the worker, not the site.
func (t *Transport) Reserve(ctx context.Context, u *url.URL, wait time.Duration) (*Reservation, error) {
	pol, rule, err := t.rule(ctx, newRequest(u))
	if err != nil {
		return nil, err
	}
	if !t.allowed(pol, u) {
		return nil, &DisallowedError{URL: u.String(), Policy: pol}
	}
	site := t.site(u)
	var p *limiter.Permit
	if wait <= 0 {
		p, err = t.Limiter.TryAcquireRule(ctx, site, rule)
	} else {
		wctx, cancel := context.WithTimeout(ctx, wait)
		p, err = t.wait(wctx, site, rule)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = &limiter.BusyError{Site: site, Full: true}
		}
	}
	if err != nil {
		return nil, err
	}
	t.observe(func(o Observer) { o.PermitHeld(1) })
	return &Reservation{t: t, p: p, checked: checkKey(u), rule: rule}, nil
}

// Permit is the reserved permit.
func (r *Reservation) Permit() *limiter.Permit {
	if r == nil {
		return nil
	}
	return r.p
}

// Rule is the rule the permit was granted under: robots.txt's for the
// reserved URL's site, as the limiter applies it (a crawl delay makes it one
// at a time; with a SiteKey that gathers hosts, the strictest rule of the
// key's hosts, limiter.Rule.From).
func (r *Reservation) Rule() limiter.Rule { return r.Permit().Rule() }

// LastSlot reports whether the permit took the site's last free slot
// (limiter.Permit.TookLastSlot).
func (r *Reservation) LastSlot() bool { return r.Permit().TookLastSlot() }

// take hands the permit to the request for u, once: only the request for
// the URL it was reserved for, and only while the permit is valid.
func (r *Reservation) take(u *url.URL) *limiter.Permit {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.used || r.released || r.p.Err() != nil || r.checked != checkKey(u) {
		return nil
	}
	r.used = true
	return r.p
}

// ruleFor reports whether robots.txt was checked for u by Reserve, and the
// rule it gave: a request that finds its reserved permit lost takes a new
// one under the same rule (its crawl delay included) without checking again.
func (r *Reservation) ruleFor(u *url.URL) (limiter.Rule, bool) {
	if r == nil || r.checked != checkKey(u) {
		return limiter.Rule{}, false
	}
	return r.rule, true
}

// claim marks the permit released and reports whether the caller is the
// one to release it in Redis.
func (r *Reservation) claim() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return false
	}
	r.released = true
	return true
}

func (r *Reservation) release() {
	if r.claim() {
		r.t.release(r.p)
	}
}

// Release gives the permit back unless the transport already did. It
// returns what limiter.Permit.Release does (ErrPermitLost when the permit
// had been lost meanwhile).
func (r *Reservation) Release(ctx context.Context) error {
	if r == nil || !r.claim() {
		return nil
	}
	err := r.p.Release(ctx)
	r.t.released(r.p, err)
	return err
}

// ReleaseOn is Release sent on pipe, in the round trip of whoever executes
// it (limiter.Permit.ReleaseOn); call after once pipe has run. It queues
// nothing if the transport already released the permit.
func (r *Reservation) ReleaseOn(ctx context.Context, pipe redis.Pipeliner) (after func() error) {
	if r == nil || !r.claim() {
		return func() error { return nil }
	}
	return r.observed(r.p.ReleaseOn(ctx, pipe))
}

// observed is a pipelined release's after that also tells the transport's
// observers the permit was released (and whether it had been lost).
func (r *Reservation) observed(done func() error) func() error {
	return func() error {
		err := done()
		r.t.released(r.p, err)
		return err
	}
}
