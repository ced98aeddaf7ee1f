// Package crawl is one crawler process's workers: each takes a URL from the
// shared frontier, which hands out only URLs of sites below their cap whose
// turn has come; reserves the site's permit (checking robots.txt); fetches
// it with colly through the permit-taking transport; and settles it: the
// permit's release, the URL's outcome, its links and the next URL go to
// Redis in one round trip. The semaphore still guards every request: a
// site found full (another crawl sharing it) is waited for briefly in its
// fair line, then put back for later.
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
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/redis/go-redis/v9"
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
	// SiteKey is what one cap covers (fetch.Transport.SiteKey): nil or
	// robots.Site by host, robots.Domain by registered domain. Give the
	// frontier (frontier.Options.SiteKey) and the robots cache
	// (NewRobotsCacheOn) the same.
	SiteKey robots.SiteKey
	// Sitemaps has the seeds' sites read from their sitemaps too: those
	// their robots.txt names, or /sitemap.xml (see package sitemap). Only
	// the process whose Seed admitted seeds reads them.
	Sitemaps bool
	// Net is how requests reach servers (NewNet); give the robots cache
	// (NewRobotsCacheOn) the same. nil: a pool of the crawl's own, no
	// pins, no address permits.
	Net      *Net
	Out      io.Writer    // results as JSON lines; nil for none
	Log      *slog.Logger // default: discard
	Observer fetch.Observer
}

// Crawler runs one process's workers on a shared crawl.
type Crawler struct {
	fr  *frontier.Frontier
	lim *limiter.Limiter
	rob *robots.Cache
	o   Options
	// net makes every worker's requests: one connection pool for the
	// process, keeping a site's connections open between its requests.
	net *Net

	scope scope // this process's copy of the crawl's scope

	outMu sync.Mutex
	enc   *json.Encoder

	// tr takes the permits of every worker's requests.
	tr *fetch.Transport
	// wake rouses one idle worker: the frontier said, handing out an item of
	// the site sent, that another site of its shard is ready too
	// (frontier.Item.More).
	wake chan string
	// done is closed when a worker has learnt that the crawl is done for the
	// whole fleet (frontier.ErrDone): the process's other workers need not
	// each ask again.
	done     chan struct{}
	doneOnce sync.Once

	maps sitemaps

	crawl       string // the crawl's name, in each result
	maxAttempts int    // the frontier's: a retryable failure on the last is final
	seeds       seedFates

	counts                         [numOutcomes]atomic.Int64 // turns recorded, by outcome
	bytes                          atomic.Int64              // body bytes read
	inflight, tooLong, linksClosed atomic.Int64
	tooLongSeen                    atomic.Bool // the first such link is logged at Info
}

// New returns a Crawler. rob must fetch robots.txt under permits too (see
// NewRobotsCache).
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
	if o.MaxBodySize <= 0 {
		o.MaxBodySize = 10 << 20
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Net == nil {
		o.Net, _ = NewNet(lim, &NetOptions{Cap: o.Cap}) // no pins, no address cap: cannot fail
	}
	fo := fr.Options()
	c := &Crawler{fr: fr, lim: lim, rob: rob, o: o, net: o.Net, wake: make(chan string, 1), done: make(chan struct{}),
		crawl: fo.Crawl, maxAttempts: fo.MaxAttempts}
	c.tr = &fetch.Transport{Base: o.Net.rt, Limiter: lim, Robots: rob, Cap: o.Cap, Observer: o.Observer, SiteKey: o.SiteKey, Log: o.Log}
	if o.Out != nil {
		c.enc = json.NewEncoder(o.Out)
	}
	return c
}

// Seed queues the seed URLs (once for the whole fleet, however many
// processes give them) and adds their sites to the crawl's scope, which it
// keeps in Redis: every process of the crawl, seeded or not, follows links
// to those sites, and to others only as the crawl's scope rules say
// (frontier.ScopeRules, which never drop a seed). It queues nothing when a
// seed is not an absolute http(s) URL or is longer than
// Options.MaxURLLength (ErrURLTooLong).
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
	c.seeds.gave(seeds)
	if n > 0 && c.o.Sitemaps {
		c.maps.noteSeeds(seeds)
	}
	// Seeded: a stop that comes now must not turn that into an error.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), frontierTimeout)
	defer cancel()
	if _, _, err := c.loadScope(sctx); err != nil {
		return n, fmt.Errorf("crawl: seeded, but: %w", err)
	}
	return n, nil
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
	defer c.net.CloseIdleConnections()
	if err := c.startRules(ctx); err != nil {
		return err
	}
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
	if len(c.maps.origins) > 0 {
		c.maps.running.Add(1)
		g.Go(func() error { c.discoverSitemaps(ctx); return nil })
	}
	for i := 0; i < c.o.Workers; i++ {
		g.Go(func() error { return c.work(ctx, fetching, i) })
	}
	return g.Wait()
}

// fullSiteRecheck is how long a worker waits in a full site's fair line
// before it puts the URL back for later. The frontier hands a site out only
// below its cap, so a full site is rare: another crawl or program shares
// it, or its robots.txt asked for less than the frontier knew yet.
const fullSiteRecheck = 250 * time.Millisecond

// worker is one worker's colly collector, the page it is on, and the
// context its requests run under (see Run).
type worker struct {
	n        int
	col      *colly.Collector
	cur      page
	fetching context.Context
}

// work is one worker: it takes URLs and fetches them until ctx ends; its
// requests run under fetching (see Run).
func (c *Crawler) work(ctx, fetching context.Context, n int) error {
	w := &worker{n: n, fetching: fetching}
	w.col = fetch.NewCollector(c.tr, fetch.CollectorOptions{UserAgent: c.o.UserAgent, MaxBodySize: c.o.MaxBodySize, Timeout: c.o.Timeout, Context: fetching})
	c.listen(w)
	idle := 0
	var taken *turn // Next's answer, when the last settlement took it
	near := ""      // a site whose shard has another site ready (rouse)
	for {
		var it frontier.Item
		var err error
		if taken != nil {
			it, err, taken = taken.it, taken.err, nil
		} else {
			it, err = c.next(ctx, near)
		}
		near = ""
		var empty *frontier.EmptyError
		switch {
		case ctx.Err() != nil:
			if err == nil {
				c.giveBack(it) // taken as the stop came
			}
			return nil
		case errors.Is(err, frontier.ErrDone) && !c.o.Forever && c.maps.running.Load() == 0:
			c.doneOnce.Do(func() { close(c.done) })
			return nil
		case errors.Is(err, frontier.ErrDone), errors.As(err, &empty):
			wait := time.Second
			switch {
			case empty != nil:
				wait = min(max(empty.Wait, time.Millisecond), idlePoll)
			case c.maps.running.Load() > 0:
				wait = 100 * time.Millisecond // sitemaps being read may queue URLs any moment
			}
			var over bool
			if near, over = c.idle(ctx, wait+rand.N(wait/4+1)); over {
				return nil
			}
			continue
		case err != nil:
			idle = min(idle+1, 6)
			c.o.Log.Warn("frontier unavailable; retrying", "worker", n, "err", err, "backoff", time.Duration(1<<idle)*100*time.Millisecond)
			sleep(ctx, time.Duration(1<<idle)*100*time.Millisecond)
			continue
		}
		idle = 0
		if it.More {
			c.rouse(it.Site)
		}
		taken = c.turn(ctx, w, it)
	}
}

// idlePoll is the longest an idle worker waits before it asks the frontier
// again, unless the frontier said when something may be ready: a slot that
// a settlement frees goes to the settling worker, or rouses an idle one.
const idlePoll = time.Second

// idle waits d, or less if another worker rouses this one (see rouse): then
// it returns the site the rousing worker was handed, whose shard has
// another site ready. It reports over when the crawl is done (see done).
func (c *Crawler) idle(ctx context.Context, d time.Duration) (near string, over bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case near = <-c.wake:
	case <-c.done:
		return "", true
	}
	return near, false
}

// rouse wakes one idle worker, if any, to take a ready site's item at once
// instead of at its next poll: a site whose slot a settlement freed, while
// the settling worker took another site's item (of site, whose shard the
// roused worker then tries first). Without it, such a slot stayed idle up
// to a poll interval (idlePoll), twenty pages' time on a 50 ms site.
func (c *Crawler) rouse(site string) {
	select {
	case c.wake <- site:
	default:
	}
}

// listen has w's collector note what each response brings into w.cur.
func (c *Crawler) listen(w *worker) {
	w.col.OnResponse(func(r *colly.Response) { w.cur.response(r, c.o.MaxBodySize) })
	w.col.OnError(func(r *colly.Response, err error) {
		if r == nil {
			return
		}
		w.cur.status, w.cur.bytes = r.StatusCode, len(r.Body)
		if r.Headers == nil { // the request failed before any response (colly leaves Headers nil)
			return
		}
		w.cur.response(r, c.o.MaxBodySize)
		if loc := r.Headers.Get("Location"); r.StatusCode >= 300 && r.StatusCode < 400 && loc != "" {
			w.cur.location = r.Request.AbsoluteURL(loc)
			w.cur.link(w.cur.location, c.o.MaxURLLength) // a redirect is a link, not followed here
		}
	})
	w.col.OnHTML("a[href]", func(e *colly.HTMLElement) {
		w.cur.link(e.Request.AbsoluteURL(e.Attr("href")), c.o.MaxURLLength)
	})
}

// frontierTimeout bounds a frontier call that a stop does not cut.
const frontierTimeout = 5 * time.Second

// next takes the next item. A stop does not cut it: once its script may
// have run in Redis, an answer lost to the stop would leave the item taken
// until the visibility timeout. The caller sees the stop after Next returns
// and gives the item back (work).
// next is the frontier's next item; near (if not "") is a site whose shard
// was said to have another site ready (frontier.Frontier.NextNear).
func (c *Crawler) next(ctx context.Context, near string) (frontier.Item, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), frontierTimeout)
	defer cancel()
	if near != "" {
		return c.fr.NextNear(ctx, near)
	}
	return c.fr.Next(ctx)
}

// turn is Next's answer.
type turn struct {
	it  frontier.Item
	err error
}

// turn takes one item through its three steps: reserve the site's permit,
// fetch, and settle. The settlement releases the permit, settles the item,
// queues its links and takes the next item in one round trip, and turn
// returns that next item (nil when there is none to hand on).
func (c *Crawler) turn(ctx context.Context, w *worker, it frontier.Item) *turn {
	res, s := c.reserve(ctx, it)
	if res == nil {
		if s == nil {
			return nil
		}
		return c.settleTurn(ctx, *s, nil)
	}
	err := c.fetch(ctx, w, it, res)
	if ctx.Err() != nil && (w.cur.status == 0 || errors.Is(err, context.Canceled)) {
		c.releasePermit(ctx, res)
		c.giveBack(it) // stopped before or during its fetch: leave it to the others
		return nil
	}
	// The site has answered: settle the URL even if the stop comes now (see
	// StopGrace), or another worker fetches it again.
	return c.settleTurn(ctx, c.outcome(ctx, it, &w.cur, err), res)
}

// reserve checks robots.txt and takes the permit for it. When there is no
// permit to be had it returns instead what becomes of the item (nil when
// it was given back).
func (c *Crawler) reserve(ctx context.Context, it frontier.Item) (*fetch.Reservation, *frontier.Settlement) {
	u, err := fetch.RequestURL(it.URL) // the URL colly will send
	if err != nil {
		c.record(it, &page{}, verdict{o: OutcomeSkipped}, err)
		return nil, &frontier.Settlement{Item: it, Outcome: frontier.Skipped, Next: true}
	}
	res, err := c.tr.Reserve(ctx, u, 0)
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
		return nil, &frontier.Settlement{Item: it, Outcome: frontier.Deferred, Delay: delay, Next: true}
	case errors.Is(err, fetch.ErrDisallowed): // or robots.txt unreachable
		v := judge(&page{}, err, false)
		c.record(it, &page{}, v, err)
		s := c.settlement(it, v, nil, nil)
		s.Next = true
		return nil, &s
	default:
		if ctx.Err() == nil {
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

// settleTurn sends a settlement, with res's release in the same round trip
// and res's rule for the frontier, and returns the next item when it took
// one. A stop does not cut it once its script may have run (see next).
func (c *Crawler) settleTurn(ctx context.Context, s frontier.Settlement, res *fetch.Reservation) *turn {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), frontierTimeout)
	defer cancel()
	if res != nil {
		rule := res.Rule()
		s.Rule = frontier.SiteRule{Cap: rule.Limit, Delay: rule.Delay}
		s.Also = func(pipe redis.Pipeliner) func() error { return res.ReleaseOn(sctx, pipe) }
	}
	r := c.fr.Settle(sctx, s)
	c.settle(ctx, s.Item, withoutLost(r.Settled))
	if !s.Next {
		return nil
	}
	return &turn{r.Next, r.NextErr}
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
