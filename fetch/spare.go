package fetch

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/redis/go-redis/v9"
)

// Spare is a permit asked for ahead (ReleaseSpareOn), in the script call
// that releases a reservation's permit, for the next request to the same
// site: a worker that goes on with the site it just fetched then needs no
// round trip of its own for the permit. ReserveSpare uses it or gives it back.
type Spare struct {
	t     *Transport
	site  string
	rule  limiter.Rule
	after func() (*limiter.Permit, error)
}

// ReleaseSpareOn is ReleaseOn with, in the same script call, a spare
// permit for the next request to r's site under the rule robots.txt gave r
// (limiter.Permit.KeepOn): the release keeps the slot when the site's
// semaphore would grant it again at once (fewer entries than the limit
// besides it, no hold-off), and the spare is granted; else the slot is
// released and the spare is not. A spare joins no line (in the limiter's ModeLocked it is
// not granted while a caller of this process is entering the site's
// line). spare is nil, and only the release is queued, when the spare
// could not be granted: the site's rule, or its health, asks for a crawl
// delay, which the release starts.
func (r *Reservation) ReleaseSpareOn(ctx context.Context, pipe redis.Pipeliner) (after func() error, spare *Spare) {
	if !r.Spares() {
		return r.ReleaseOn(ctx, pipe), nil
	}
	if !r.claim() {
		return func() error { return nil }, nil
	}
	done, kept := r.p.KeepOn(ctx, pipe, r.rule)
	return r.observed(done), &Spare{t: r.t, site: r.p.Site(), rule: r.rule, after: kept}
}

// Spares reports whether ReleaseSpareOn would ask for a spare permit.
func (r *Reservation) Spares() bool {
	return r != nil && r.rule.Delay == 0 && r.Rule().Delay == 0
}

// Site is the permit key the spare was asked for.
func (s *Spare) Site() string {
	if s == nil {
		return ""
	}
	return s.site
}

// ReserveSpare is Reserve with wait 0 that uses spare (nil: none) when it
// fits: the pipeline it was queued on has run, it was granted, u's permit
// key is the spare's and robots.txt, in this process's memory, allows u
// under the same rule. A granted spare that does not fit is given back in
// the round trip that tries for u's permit (one round trip, as Reserve's
// own), or, when u's robots.txt is not in memory, before Reserve looks it
// up (its fetch may need the very slot the spare holds). Either way spare
// is used up.
func (t *Transport) ReserveSpare(ctx context.Context, u *url.URL, spare *Spare) (*Reservation, error) {
	if spare == nil {
		return t.Reserve(ctx, u, 0)
	}
	p, err := spare.after()
	if err != nil {
		return t.Reserve(ctx, u, 0)
	}
	pol, ok := t.Robots.Local(u)
	if !ok {
		t.drop(p)
		return t.Reserve(ctx, u, 0)
	}
	if !t.allowed(pol, u) {
		t.drop(p)
		return nil, &DisallowedError{URL: u.String(), Policy: pol}
	}
	rule, site := t.ruleOf(pol, u), t.site(u)
	if site == spare.site && rule == spare.rule && p.Err() == nil {
		t.observe(func(o Observer) { o.PermitHeld(1) })
		return &Reservation{t: t, p: p, checked: checkKey(u), rule: rule}, nil
	}
	pipe := t.Limiter.Pipeline()
	released := p.ReleaseOn(ctx, pipe)
	try := t.Limiter.TryAcquireRuleOn(ctx, pipe, site, rule)
	_, _ = pipe.Exec(ctx) // each command's outcome is read from it
	if err := released(); err != nil && !errors.Is(err, limiter.ErrPermitLost) {
		t.warn("a spare permit could not be given back; it frees itself when its lease runs out", "site", p.Site(), "err", err)
	}
	q, err := try()
	if err != nil {
		return nil, err
	}
	t.observe(func(o Observer) { o.PermitHeld(1) })
	return &Reservation{t: t, p: q, checked: checkKey(u), rule: rule}, nil
}

// Release gives the spare's permit back, if it was granted: for a worker
// that did not come to use it (stopping, or no next URL).
func (s *Spare) Release() {
	if s == nil {
		return
	}
	if p, err := s.after(); err == nil {
		s.t.drop(p)
	}
}

// drop releases a permit that served no request, in a round trip of its
// own. (Its release starts a crawl delay only if the site has come to ask
// for one since the grant: a spare is asked for only without one.)
func (t *Transport) drop(p *limiter.Permit) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Release(ctx); err != nil && ctx.Err() == nil {
		t.warn("a spare permit could not be given back; it frees itself when its lease runs out", "site", p.Site(), "err", err)
	}
}
