package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redisacl"
	"github.com/polite-crawler/polite/limiter"
	"github.com/redis/go-redis/v9"
)

// fullSiteRecheck is how long a worker waits in a full site's fair line
// before it puts the URL back for later. The frontier hands a site out only
// below its cap, so a full site is rare: another crawl or program shares
// it, or its robots.txt asked for less than the frontier knew yet.
const fullSiteRecheck = 250 * time.Millisecond

// turn is Next's answer.
type turn struct {
	it    frontier.Item
	err   error
	spare *fetch.Spare // nil: none asked for
}

// turn takes one item through its three steps: reserve the site's permit,
// fetch, and settle. The settlement releases the permit, settles the item,
// queues its links and takes the next item in one round trip, and turn
// returns that next item (nil when there is none to hand on).
func (c *Crawler) turn(ctx context.Context, w *worker, it frontier.Item, spare *fetch.Spare) *turn {
	// After maxStays turns in a row, yield at the first turn whose item
	// said a site of its shard is ready (it.More: another one, or this one
	// below its cap): with none, the round robin would give this site
	// back, for a permit's round trip.
	stay := w.stays < maxStays || !it.More
	if stay {
		w.stays++
	} else {
		w.stays = 0
	}
	defer c.holdItem(it)()
	res, e := c.reserve(ctx, it, spare)
	if res == nil {
		if e == nil {
			return nil
		}
		return c.settleTurn(ctx, *e, nil, false)
	}
	err := c.fetch(ctx, w, it, res)
	if ctx.Err() != nil && (w.cur.status == 0 || errors.Is(err, context.Canceled)) {
		c.releasePermit(ctx, res)
		c.giveBack(it) // stopped before or during its fetch: leave it to the others
		return nil
	}
	// The site has answered: settle the URL even if the stop comes now (see
	// StopGrace), or another worker fetches it again.
	return c.settleTurn(ctx, c.outcome(ctx, it, &w.cur, err), res, stay)
}

// holdItem keeps it with this worker while its turn lasts: every half
// visibility timeout it extends the item's hold (frontier.Extend), so that a
// turn longer than the timeout (a robots.txt fetch, up to twice --timeout,
// then the page, up to --timeout) is not handed to another worker, which
// would fetch the page again. It stops once the item is no longer held, or
// when the function it returns is called, which waits for an Extend under
// way.
func (c *Crawler) holdItem(it frontier.Item) (stop func()) {
	every := c.fr.Visibility() / 2
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock() // t is set before its function reads it
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), frontierTimeout)
		err := c.fr.Extend(ctx, it)
		cancel()
		switch {
		case errors.Is(err, frontier.ErrLost), errors.Is(err, frontier.ErrCrawlGone):
			return // its settlement says so; a crawl gone ends Run
		case err != nil:
			c.o.Log.Warn("could not extend a URL's hold; it is handed to another worker if this turn outlasts --visibility", "url", it.URL, "err", err)
		}
		t.Reset(every)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// reserve checks robots.txt and takes the permit for it, spare's if it
// fits (fetch.Transport.ReserveSpare). When there is no permit to be had it
// returns instead how the turn ends (nil when the item was given back).
func (c *Crawler) reserve(ctx context.Context, it frontier.Item, spare *fetch.Spare) (*fetch.Reservation, *ending) {
	u, err := fetch.RequestURL(it.URL) // the URL colly will send
	if err != nil {
		spare.Release()
		e := judged(frontier.Settlement{Item: it, Outcome: frontier.Skipped, Next: true}, verdict{o: OutcomeSkipped}, &page{}, err)
		return nil, &e
	}
	res, err := c.tr.ReserveSpare(ctx, u, spare)
	var busy *limiter.BusyError
	if errors.As(err, &busy) && busy.Full {
		// Wait in the site's fair line, where a released slot is handed
		// over at once, rather than poll (see fullSiteRecheck). Failing
		// that, come back when the limiter expects a slot: the oldest
		// holder's lease can run out then (a worker that died), unless one
		// of the site's fetches settles first and brings it back sooner.
		hint, start := busy.Wait, time.Now()
		if res, err = c.tr.Reserve(ctx, u, fullSiteRecheck); errors.As(err, &busy) {
			busy.Wait = hint - time.Since(start)
		}
	}
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &busy):
		// Full, or in its crawl delay, whose end is known exactly.
		delay := min(max(busy.Wait, time.Millisecond), 2*time.Second)
		return nil, &ending{s: frontier.Settlement{Item: it, Outcome: frontier.Deferred, Delay: delay, Next: true}}
	case errors.Is(err, fetch.ErrDisallowed): // or robots.txt unreachable
		v := judge(&page{}, err, false)
		s := c.settlement(it, v, nil, nil)
		s.Next = true
		e := judged(s, v, &page{}, err)
		return nil, &e
	default:
		if redisacl.Refused(err) {
			c.refuse(fmt.Errorf("permit for %s: %w", it.Site, err)) // the stop gives the item back
		} else if ctx.Err() == nil {
			c.o.Log.Warn("no permit; the URL goes back", "url", it.URL, "err", err)
		}
		c.giveBack(it)
		sleep(ctx, 200*time.Millisecond)
		return nil, nil
	}
}

// fetch requests it under its reserved permit, into w.cur.
func (c *Crawler) fetch(ctx context.Context, w *worker, it frontier.Item, res *fetch.Reservation) error {
	w.cur.reset()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	c.inflight.Add(1)
	defer c.inflight.Add(-1)
	w.col.Context = fetch.WithReservation(w.fetching, res) // the request carries its permit
	defer func() { w.col.Context = w.fetching }()
	w.cur.start = time.Now()
	err := w.col.Request(http.MethodGet, it.URL, nil, nil, nil)
	if w.cur.took == 0 { // no response (colly's callbacks time one)
		w.cur.took = time.Since(w.cur.start)
	}
	return err
}

// settleTurn sends a turn's settlement, with res's release in the same
// round trip and res's rule for the frontier, records the turn (as not
// settled when the settlement did not take), and returns the next item when
// it took one. With stay, it also asks in that round trip for a spare permit of
// res's site (fetch.Reservation.ReleaseSpareOn) and has the frontier prefer that
// site for the next item, so that the next item's permit costs no round
// trip of its own. A stop does not cut it once its script may have run
// (see next).
func (c *Crawler) settleTurn(ctx context.Context, e ending, res *fetch.Reservation, stay bool) *turn {
	s := e.s
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), frontierTimeout)
	defer cancel()
	stay = stay && s.Next && res.Spares()
	var spare *fetch.Spare
	if res != nil {
		rule := res.Rule()
		s.Rule = frontier.SiteRule{Cap: rule.Limit, Delay: rule.Delay}
		s.Also = func(pipe redis.Pipeliner) func() error {
			if stay && ctx.Err() == nil {
				var after func() error
				after, spare = res.ReleaseSpareOn(sctx, pipe)
				return after
			}
			return res.ReleaseOn(sctx, pipe)
		}
	}
	if stay {
		s.Prefer = s.Item.Site
	}
	// A turn that does not finish its URL is recorded first, so that its
	// line comes before the next turn's; a final one once the settlement
	// says it took (unsettled: the URL comes back, so it is not final).
	early := e.v != nil && !e.v.o.Final()
	if early {
		c.record(s.Item, e.pg, *e.v, e.err)
	}
	r := c.fr.Settle(sctx, s)
	if e.v != nil && !early {
		v, err := *e.v, e.err
		if r.Unsettled {
			v, err = unsettled(v, err, r.Settled)
		}
		c.record(s.Item, e.pg, v, err)
	}
	c.settle(ctx, s.Item, withoutLost(r.Settled))
	if r.SiteFull > 0 {
		c.warnSiteFull(s.Item, r.SiteFull)
	}
	if !s.Next {
		spare.Release()
		return nil
	}
	return &turn{r.Next, r.NextErr, spare}
}

// warnSiteFull says, at most once a minute, that a page's links were
// dropped at their site's queue bound: a very big site, or a spider trap.
func (c *Crawler) warnSiteFull(it frontier.Item, n int64) {
	now, last := time.Now().UnixNano(), c.fullWarned.Load()
	if now-last < int64(time.Minute) || !c.fullWarned.CompareAndSwap(last, now) {
		return
	}
	c.o.Log.Warn("links dropped: their site has --max-queued-per-site URLs queued (a very big site, or a spider trap); "+
		"they are queued if a page fetched later links to them again (crawler status counts them; this warning comes at most once a minute)",
		"page", it.URL, "dropped", n)
}

// withoutLost is err less its limiter.ErrPermitLost parts: a permit lost
// during its fetch is counted by the transport's observer, and its fetch
// retried; it is no frontier trouble.
func withoutLost(err error) error {
	var rest []error
	for _, e := range flatten(err) {
		if !errors.Is(e, limiter.ErrPermitLost) {
			rest = append(rest, e)
		}
	}
	return errors.Join(rest...)
}

// flatten lists the errors joined in err (errors.Join), err itself if none.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// releasePermit gives a reserved permit back (nothing if the transport did).
func (c *Crawler) releasePermit(ctx context.Context, res *fetch.Reservation) {
	if err := res.Release(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, limiter.ErrPermitLost) {
		c.o.Log.Warn("could not release a permit; it frees itself when its lease runs out", "site", res.Permit().Site(), "err", err)
	}
}

func (c *Crawler) settle(ctx context.Context, it frontier.Item, err error) {
	if err != nil && ctx.Err() == nil && !errors.Is(err, frontier.ErrCrawlGone) { // a crawl gone ends Run, which says so
		c.o.Log.Warn("frontier", "url", it.URL, "err", err)
	}
}

// giveBack returns an item to the frontier for another worker, even while
// this one is stopping.
func (c *Crawler) giveBack(it frontier.Item) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.fr.Release(ctx, it); err != nil && !errors.Is(err, frontier.ErrLost) && !errors.Is(err, frontier.ErrCrawlGone) {
		c.o.Log.Warn("could not give a URL back; it returns after the visibility timeout", "url", it.URL, "err", err)
	}
}
