// Package crawl is one crawler process's workers: each takes a URL from the
// shared frontier, fetches it through the permit-taking transport with colly,
// queues the links it finds, and settles the URL. A worker never waits on a
// full site while others have free slots: it defers the URL and takes one of
// another site.
package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"golang.org/x/sync/errgroup"
)

// Options configure a Crawler. Zero fields take the default named.
type Options struct {
	Workers     int           // concurrent fetches in this process (default 8)
	Name        string        // this worker process's name in results (default host-pid)
	Cap         int           // requests at once per site unless robots.txt says less (default 3)
	UserAgent   string        // sent with every request (default "politebot/0.1")
	MaxBodySize int           // bytes read of a body (default 10 MiB)
	Timeout     time.Duration // one request, waiting for its permit included (default 60s)
	Forever     bool          // keep polling after the crawl is done
	// MaxURLLength drops the links found on pages that are longer than this
	// many bytes (absolute, before normalisation): they are never queued or
	// fetched, only counted (Progress.TooLong). Seeds longer than it are
	// refused. Default 8192, as common crawlers and servers allow.
	MaxURLLength int
	// StopGrace is how long, once Run's ctx ends, the downloads under way may
	// go on: each that finishes in time is settled like any other, rather
	// than given back half-done and fetched again by another worker. No new
	// request starts meanwhile. 0 cancels them at once.
	StopGrace time.Duration
	Out       io.Writer    // results as JSON lines; nil for none
	Log       *slog.Logger // default: discard
	Observer  fetch.Observer
}

// Crawler runs one process's workers on a shared crawl.
type Crawler struct {
	fr  *frontier.Frontier
	lim *limiter.Limiter
	rob *robots.Cache
	o   Options
	// base makes every worker's requests: one connection pool for the
	// process, keeping a site's connections open between its requests.
	base *http.Transport

	scope scope // this process's copy of the crawl's scope

	outMu sync.Mutex
	enc   *json.Encoder

	// tr takes the permits of every worker's requests.
	tr *fetch.Transport

	pages, failed, skipped, inflight, tooLong atomic.Int64
	tooLongSeen                               atomic.Bool // the first such link is logged at Info
}

// New returns a Crawler. rob must be built on an http.Client whose transport
// takes permits (see NewRobotsClient).
func New(fr *frontier.Frontier, lim *limiter.Limiter, rob *robots.Cache, o Options) *Crawler {
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Name == "" {
		host, _ := os.Hostname()
		o.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if o.UserAgent == "" {
		o.UserAgent = "politebot/0.1"
	}
	if o.MaxURLLength <= 0 {
		o.MaxURLLength = DefaultMaxURLLength
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Crawler{fr: fr, lim: lim, rob: rob, o: o, base: pool(o.Cap)}
	c.tr = &fetch.Transport{Base: c.base, Limiter: lim, Robots: rob, Cap: o.Cap, Observer: o.Observer}
	if o.Out != nil {
		c.enc = json.NewEncoder(o.Out)
	}
	return c
}

// Seed queues the seed URLs (once for the whole fleet, however many
// processes give them) and adds their sites to the crawl's scope, which it
// keeps in Redis: every process of the crawl, seeded or not, follows links
// to those sites, and to no other. It queues nothing when a seed is not an
// absolute http(s) URL or is longer than Options.MaxURLLength
// (ErrURLTooLong).
func (c *Crawler) Seed(ctx context.Context, seeds []string) (int, error) {
	var bad []error
	for _, s := range seeds {
		if len(s) > c.o.MaxURLLength {
			bad = append(bad, fmt.Errorf("%w: seed %.60q... is %d bytes long (at most %d)", ErrURLTooLong, s, len(s), c.o.MaxURLLength))
		}
	}
	if len(bad) > 0 {
		return 0, errors.Join(bad...)
	}
	n, err := c.fr.Seed(ctx, seeds...)
	if err != nil {
		return 0, err
	}
	if _, _, err := c.loadScope(ctx); err != nil {
		return n, fmt.Errorf("crawl: seeded, but: %w", err)
	}
	return n, nil
}

// Progress is what this process has done so far.
type Progress struct {
	Pages, Failed, Skipped, InFlight, Waiting int64
	// TooLong counts the links found that were longer than
	// Options.MaxURLLength, and dropped.
	TooLong int64
}

// Progress reads the process's counters.
func (c *Crawler) Progress() Progress {
	return Progress{Pages: c.pages.Load(), Failed: c.failed.Load(), Skipped: c.skipped.Load(), InFlight: c.inflight.Load(),
		TooLong: c.tooLong.Load(), Waiting: int64(c.tr.Waiting())}
}

// Run works until the crawl is done for the whole fleet (or forever with
// Options.Forever) or ctx ends. On ctx's end no new request starts; the
// downloads under way get Options.StopGrace to finish and be settled, and
// those that do not are cancelled and given back to the frontier; then Run
// returns nil. It fails at once if the frontier's options are invalid
// (frontier.Frontier.Err).
func (c *Crawler) Run(ctx context.Context) error {
	if err := c.fr.Err(); err != nil {
		return fmt.Errorf("crawl: %w", err)
	}
	defer c.base.CloseIdleConnections() // and so their goroutines
	c.startScope(ctx)
	g, ctx := errgroup.WithContext(ctx)
	// Requests run under fetching, which outlives ctx by StopGrace.
	fetching, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	ended := make(chan struct{})
	defer close(ended)
	go func() { // owned by Run: ends with it
		select {
		case <-ended:
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(c.o.StopGrace)
		defer t.Stop()
		select {
		case <-ended:
		case <-t.C:
			abort()
		}
	}()
	for i := 0; i < c.o.Workers; i++ {
		g.Go(func() error { return c.work(ctx, fetching, i) })
	}
	return g.Wait()
}

// fullSiteRecheck is how long a full site is left alone at most. Polling
// it more often only costs Redis: a crawl of 20 sites × 3 slots with 72
// workers made 5 permit attempts a page at 15-35 ms, and reached less of
// the sites' capacity than with this bound.
const fullSiteRecheck = 250 * time.Millisecond

// recheckFull is fullSiteRecheck with jitter, so that workers deferring
// the same site do not come back together.
func recheckFull() time.Duration { return fullSiteRecheck + rand.N(fullSiteRecheck/4) }

// work is one worker: it takes URLs and fetches them until ctx ends; its
// requests run under fetching (see Run).
func (c *Crawler) work(ctx, fetching context.Context, n int) error {
	col := fetch.NewCollector(c.tr, fetch.CollectorOptions{UserAgent: c.o.UserAgent, MaxBodySize: c.o.MaxBodySize, Timeout: c.o.Timeout, Context: fetching})
	var cur page
	col.OnResponse(func(r *colly.Response) { cur.status, cur.bytes = r.StatusCode, len(r.Body) })
	col.OnError(func(r *colly.Response, err error) {
		if r == nil {
			return
		}
		cur.status, cur.bytes = r.StatusCode, len(r.Body)
		if r.Headers == nil { // the request failed before any response (colly leaves Headers nil)
			return
		}
		if loc := r.Headers.Get("Location"); r.StatusCode >= 300 && r.StatusCode < 400 && loc != "" {
			cur.link(r.Request.AbsoluteURL(loc), c.o.MaxURLLength) // a redirect is a link
		}
	})
	col.OnHTML("a[href]", func(e *colly.HTMLElement) {
		cur.link(e.Request.AbsoluteURL(e.Attr("href")), c.o.MaxURLLength)
	})
	idle := 0
	var taken *turn // Next's answer, when the last fetch took it (frontier.DoneNext)
	for {
		var it frontier.Item
		var err error
		if taken != nil {
			it, err, taken = taken.it, taken.err, nil
		} else {
			it, err = c.next(ctx)
		}
		var empty *frontier.EmptyError
		switch {
		case ctx.Err() != nil:
			if err == nil {
				c.giveBack(it) // taken as the stop came
			}
			return nil
		case errors.Is(err, frontier.ErrDone) && !c.o.Forever:
			return nil
		case errors.Is(err, frontier.ErrDone), errors.As(err, &empty):
			wait := time.Second
			if empty != nil {
				wait = min(max(empty.Wait, time.Millisecond), 250*time.Millisecond)
			}
			sleep(ctx, wait+rand.N(wait/4+1))
			continue
		case err != nil:
			idle = min(idle+1, 6)
			c.o.Log.Warn("frontier unavailable; retrying", "worker", n, "err", err, "backoff", time.Duration(1<<idle)*100*time.Millisecond)
			sleep(ctx, time.Duration(1<<idle)*100*time.Millisecond)
			continue
		}
		idle = 0
		cur.reset()
		taken = c.fetchOne(ctx, col, it, &cur)
	}
}

// frontierTimeout bounds a frontier call that a stop does not cut.
const frontierTimeout = 5 * time.Second

// next takes the next item. A stop does not cut it: once its script may
// have run in Redis, an answer lost to the stop would leave the item taken
// until the visibility timeout. The caller sees the stop after Next returns
// and gives the item back (work).
func (c *Crawler) next(ctx context.Context) (frontier.Item, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), frontierTimeout)
	defer cancel()
	return c.fr.Next(ctx)
}

// turn is Next's answer.
type turn struct {
	it  frontier.Item
	err error
}

// fetchOne fetches one item and settles it in the frontier. After a fetch
// it takes the next item in the same round trip and returns Next's answer;
// otherwise nil.
func (c *Crawler) fetchOne(ctx context.Context, col *colly.Collector, it frontier.Item, pg *page) *turn {
	u, err := url.Parse(it.URL)
	if err != nil {
		c.settle(ctx, it, c.fr.Done(ctx, it))
		return nil
	}
	res, err := c.tr.Reserve(ctx, u, 0)
	var busy *limiter.BusyError
	if errors.As(err, &busy) && busy.Full {
		// Full. Other work first: a worker never sits on a full site
		// while another site is ready.
		other, oerr := c.next(ctx)
		if oerr == nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), frontierTimeout)
			defer cancel()
			c.settle(ctx, it, c.fr.Defer(dctx, it, recheckFull()))
			return &turn{other, nil}
		}
		if errors.As(oerr, new(*frontier.EmptyError)) {
			// Nothing else is ready: wait in the site's fair line, where a
			// released slot is handed over at once, instead of polling.
			res, err = c.tr.Reserve(ctx, u, fullSiteRecheck)
		}
	}
	switch {
	case errors.As(err, &busy):
		// A crawl delay's end is known exactly. A full site is brought back
		// the moment one of its fetches ends (frontier.Done), so it need not
		// be polled: fullSiteRecheck only bounds the wait for a slot freed
		// otherwise (a lease run out, another crawl sharing the site).
		wait := busy.Wait
		if busy.Full {
			wait = min(wait, recheckFull())
		}
		c.settle(ctx, it, c.fr.Defer(ctx, it, min(max(wait, time.Millisecond), 2*time.Second)))
		return nil
	case errors.Is(err, fetch.ErrDisallowed):
		c.skipped.Add(1)
		c.record(it, 0, 0, err)
		c.settle(ctx, it, c.fr.Done(ctx, it))
		return nil
	case err != nil:
		c.giveBack(it)
		sleep(ctx, 200*time.Millisecond)
		return nil
	}
	if res.LastSlot() {
		// The site is full now: let other workers try other sites rather
		// than find it so. The first fetch of it that ends brings it back.
		if err := c.fr.Hold(ctx, it.Site, fullSiteRecheck); err != nil && ctx.Err() == nil {
			c.o.Log.Warn("frontier", "site", it.Site, "err", err)
		}
	}
	if ctx.Err() == nil {
		c.inflight.Add(1)
		fetching := col.Context // the worker's (see Run): the request carries its permit
		col.Context = fetch.WithReservation(fetching, res)
		err = col.Request(http.MethodGet, it.URL, nil, nil, nil)
		col.Context = fetching
		c.inflight.Add(-1)
	}
	c.releasePermit(ctx, res)
	stopping := ctx.Err() != nil
	if stopping && (pg.status == 0 || errors.Is(err, context.Canceled)) {
		c.giveBack(it) // stopped before or during its fetch: leave it to the others
		return nil
	}
	// The site has answered: settle the URL even if the stop comes now (see
	// StopGrace), or another worker fetches it again; and a stop must not
	// cut DoneNext once its script may have run (see next).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), frontierTimeout)
	defer cancel()
	c.record(it, pg.status, pg.bytes, err)
	c.countTooLong(it, pg.tooLong)
	switch {
	case err == nil || (pg.status >= 300 && pg.status < 400):
		if err == nil {
			c.pages.Add(1)
		}
		if stopping {
			_, aerr := c.fr.Add(ctx, it.Depth+1, c.inScope(ctx, pg.links)...)
			c.settle(ctx, it, errors.Join(aerr, c.fr.Done(ctx, it)))
			return nil
		}
		next, settled, err := c.fr.DoneNext(ctx, it, c.inScope(ctx, pg.links))
		c.settle(ctx, it, settled)
		return &turn{next, err}
	case errors.Is(err, fetch.ErrDisallowed) || (pg.status >= 400 && pg.status < 500 && pg.status != http.StatusTooManyRequests):
		c.skipped.Add(1)
		c.settle(ctx, it, c.fr.Done(ctx, it))
	default: // 429, 5xx, network error, lost permit: try again later
		if errors.Is(err, limiter.ErrPermitLost) {
			c.o.Log.Warn("permit lost mid-request (not refreshed in time): request stopped, to be tried again", "url", it.URL, "err", err)
		}
		delay := time.Duration(it.Attempts+1) * time.Second
		again, serr := c.fr.Retry(ctx, it, delay)
		if !again && serr == nil {
			c.failed.Add(1)
		}
		c.settle(ctx, it, serr)
	}
	return nil
}

// releasePermit gives a reserved permit back (nothing if the transport did).
func (c *Crawler) releasePermit(ctx context.Context, res *fetch.Reservation) {
	if err := res.Release(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, limiter.ErrPermitLost) {
		c.o.Log.Warn("could not release a permit; it frees itself when its lease runs out", "site", res.Permit().Site(), "err", err)
	}
}

func (c *Crawler) settle(ctx context.Context, it frontier.Item, err error) {
	if err != nil && ctx.Err() == nil {
		c.o.Log.Warn("frontier", "url", it.URL, "err", err)
	}
}

// giveBack returns an item to the frontier for another worker, even while
// this one is stopping.
func (c *Crawler) giveBack(it frontier.Item) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.fr.Release(ctx, it); err != nil && !errors.Is(err, frontier.ErrLost) {
		c.o.Log.Warn("could not give a URL back; it returns after the visibility timeout", "url", it.URL, "err", err)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
