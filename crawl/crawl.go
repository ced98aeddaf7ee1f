// Package crawl is one crawler process's workers: each takes a URL from the
// shared frontier, which hands out only URLs of sites below their cap whose
// turn has come; reserves the site's permit (checking robots.txt); fetches
// it with colly through the permit-taking transport; and settles it: the
// permit's release, the URL's outcome, its links and the next URL go to
// Redis in one round trip. The semaphore still guards every request: a
// site found full (another crawl sharing it) is waited for briefly in its
// fair line, then put back for later.
//
// Run one Crawler per process, on the frontier, limiter and robots cache
// its workers share; Progress and Outcomes may be read while Run runs. Run
// returns nil when the crawl is done or ctx ends, and an error only when
// it cannot start (invalid frontier options, scope rules that differ from
// the crawl's). A URL that fails is an outcome in the results, not an
// error; SeedsFailed says, after Run, whether no seed could be fetched
// (ErrNoSeedReached).
package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

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
	// watching is set while one idle worker is the process's watcher, and
	// handOff rouses an idle worker for a watcher that found an item
	// (watchFirst).
	watching atomic.Bool
	handOff  chan struct{}
	// done is closed when a worker has learnt that the crawl is done for the
	// whole fleet (frontier.ErrDone): the process's other workers need not
	// each ask again.
	done     chan struct{}
	doneOnce sync.Once
	// refuse ends Run with ErrRefused and err (set by Run).
	refuse func(err error)
	// end ends Run with err, which wraps frontier.ErrCrawlGone (set by
	// Run).
	end func(err error)
	// goneLooked is when (Unix ms) an idle worker last asked whether the
	// crawl was deleted (deletedWhileIdle).
	goneLooked atomic.Int64

	maps sitemaps

	crawl       string // the crawl's name, in each result
	maxAttempts int    // the frontier's: a retryable failure on the last is final
	seeds       seedFates

	counts                         [numOutcomes]atomic.Int64 // turns recorded, by outcome
	bytes                          atomic.Int64              // body bytes read
	inflight, tooLong, linksClosed atomic.Int64
	tooLongSeen                    atomic.Bool  // the first such link is logged at Info
	fullWarned                     atomic.Int64 // unix ns of the last warning of links dropped at a site's bound
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
	c := &Crawler{fr: fr, lim: lim, rob: rob, o: o, net: o.Net, wake: make(chan string, 1), handOff: make(chan struct{}, 1), done: make(chan struct{}),
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

// ErrRefused is wrapped by Run's error, with Redis's, when Redis's ACL
// refuses the crawl a key or command it needs for a permit or for the
// frontier (a NOPERM, redisacl): no retry helps until the user's ACL
// changes, so the crawl stops as on ctx's end (URLs in flight are given
// back, or, when the frontier's own keys are refused, handed out again
// after the visibility timeout). A refusal met while ctx's end stops the
// crawl anyway is not reported.
var ErrRefused = errors.New("crawl: Redis refused the crawl's user")

// Run works until the crawl is done for the whole fleet (or forever with
// Options.Forever) or ctx ends. On ctx's end no new request starts; the
// downloads under way get Options.StopGrace to finish and be settled, and
// those that do not are cancelled and given back to the frontier; then Run
// returns nil. It fails at once if the frontier's options are invalid
// (frontier.Frontier.Err), and stops the same way as on ctx's end, then
// returns an error wrapping ErrRefused, when Redis refuses a permit or the
// frontier by its ACL, or one wrapping frontier.ErrCrawlGone, when the
// crawl is deleted (or deleted and made anew) under it.
func (c *Crawler) Run(ctx context.Context) error {
	if err := c.fr.Err(); err != nil {
		return fmt.Errorf("crawl: %w", err)
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	refused := ctx
	c.refuse = func(err error) { stop(fmt.Errorf("%w: %w", ErrRefused, err)) }
	c.end = func(err error) { stop(fmt.Errorf("crawl: %w", err)) }
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
	err := g.Wait()
	if cause := context.Cause(refused); errors.Is(cause, ErrRefused) || errors.Is(cause, frontier.ErrCrawlGone) {
		return cause
	}
	return err
}
