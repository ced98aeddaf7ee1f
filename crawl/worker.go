package crawl

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redisacl"
)

// worker is one worker's colly collector, the page it is on, and the
// context its requests run under (see Run).
type worker struct {
	n        int
	col      *colly.Collector
	cur      page
	fetching context.Context
	stays    int           // turns in a row that asked to stay on their site
	watch    time.Duration // while the process's watcher (see watchFirst): its next wait
	handed   bool          // roused by a hand-over (see watchFirst)
}

// maxStays is how many turns in a row a worker asks to stay on its site
// (the frontier prefers the site for its next item, and a permit for it is
// asked for ahead, in the settlement's round trip: see settleTurn) before
// one turn lets the shard's round robin pick its next site, the first
// whose item said a site of the shard was ready (Item.More): so that the
// shard's other sites do not starve when workers are fewer than the sites'
// slots. Sites of other shards wait for this one's queue to empty then
// (the settlement takes from the settled item's shard).
const maxStays = 16

// work is one worker: it takes URLs and fetches them until ctx ends; its
// requests run under fetching (see Run).
func (c *Crawler) work(ctx, fetching context.Context, n int) error {
	w := &worker{n: n, fetching: fetching}
	defer c.unwatch(w)
	w.col = fetch.NewCollector(c.tr, fetch.CollectorOptions{UserAgent: c.o.UserAgent, MaxBodySize: c.o.MaxBodySize, Timeout: c.o.Timeout, Context: fetching})
	c.listen(w)
	idle := 0
	var taken *turn // Next's answer, when the last settlement took it
	near := ""      // a site whose shard has another site ready (rouse)
	for {
		var it frontier.Item
		var err error
		var spare *fetch.Spare // the next item's site's permit, asked for ahead
		// Sitemaps still being read, as known before the frontier's
		// answer: one that queues its last URLs and ends after the answer
		// said done must not end the crawl (done needs a fresh Next).
		reading := c.maps.running.Load() > 0
		fresh := taken == nil
		if taken != nil {
			it, err, spare, taken = taken.it, taken.err, taken.spare, nil
		} else {
			it, err = c.next(ctx, near)
		}
		near = ""
		if err != nil || ctx.Err() != nil {
			spare.Release() // no item to use it for
		}
		var empty *frontier.EmptyError
		switch {
		case ctx.Err() != nil:
			if err == nil {
				c.giveBack(it) // taken as the stop came
			}
			return nil
		case errors.Is(err, frontier.ErrDone) && !c.o.Forever && !reading && !fresh:
			continue // the settlement's look: look again, reading after
		case errors.Is(err, frontier.ErrDone) && !c.o.Forever && !reading:
			c.doneOnce.Do(func() { close(c.done) })
			return nil
		case errors.Is(err, frontier.ErrDone) && c.deletedWhileIdle(ctx):
			continue // c.end: ctx ends, the loop returns
		case errors.Is(err, frontier.ErrDone), errors.As(err, &empty):
			wait := time.Second
			switch {
			case empty != nil:
				wait = min(max(empty.Wait, time.Millisecond), idlePoll, c.watchFor(w))
			case c.maps.running.Load() > 0:
				wait = 100 * time.Millisecond // sitemaps being read may queue URLs any moment
			}
			if empty == nil {
				c.unwatch(w) // done for now: nothing to watch for
			}
			var over bool
			if near, w.handed, over = c.idle(ctx, wait+rand.N(wait/4+1)); over {
				return nil
			}
			continue
		case redisacl.Refused(err):
			c.refuse(err) // ctx ends: the loop returns
			continue
		case errors.Is(err, frontier.ErrCrawlGone):
			c.end(err) // ctx ends: the loop returns
			continue
		case err != nil:
			c.unwatch(w) // another idle worker may watch meanwhile
			idle = min(idle+1, 6)
			c.o.Log.Warn("frontier unavailable; retrying", "worker", n, "err", err, "backoff", time.Duration(1<<idle)*100*time.Millisecond)
			sleep(ctx, time.Duration(1<<idle)*100*time.Millisecond)
			continue
		}
		idle = 0
		if c.unwatch(w) || w.handed { // found an item: hand over
			c.handOver()
		}
		w.handed = false
		if it.More {
			c.rouse(it.Site)
		}
		taken = c.turn(ctx, w, it, spare)
	}
}

// deletedWhileIdle tells a worker that found the crawl done with Forever
// on (it waits for URLs the fleet may queue) whether crawler delete
// deleted the crawl meanwhile, asking Redis at most once per goneLook for
// the process (frontier.Frontier.WhyGone): an idle process sends nothing
// that would tell it so (its probes read and write nothing of the crawl's
// record). When it was deleted, with URLs left or once done, it ends Run
// with an error wrapping frontier.ErrCrawlGone (c.end) and returns true:
// a crawl made anew under the name is another crawl, with another seen
// key. Keys Redis lost (no tombstone), or a crawl that expired, are let
// be, as before: a process waiting for URLs may wait on a crawl of no keys.
func (c *Crawler) deletedWhileIdle(ctx context.Context) bool {
	if !c.o.Forever {
		return false
	}
	now, last := time.Now().UnixMilli(), c.goneLooked.Load()
	if now-last < goneLook.Milliseconds() || !c.goneLooked.CompareAndSwap(last, now) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), frontierTimeout)
	defer cancel()
	why, err := c.fr.WhyGone(ctx)
	switch why {
	case frontier.GoneDeleted:
	case frontier.GoneFinished:
		err = c.fr.GoneError("deleted (crawler delete) while this process waited for more URLs (--forever)")
	default:
		return false
	}
	c.end(err)
	return true
}

// goneLook is how often, at most, a process whose workers wait on a done
// crawl with Forever on asks whether it was deleted (deletedWhileIdle). A
// variable for its test.
var goneLook = 10 * time.Second

// idlePoll is the longest an idle worker waits before it asks the frontier
// again, unless the frontier said when something may be ready: a slot that
// a settlement frees goes to the settling worker, or rouses an idle one.
const idlePoll = time.Second

// An idle worker sleeps up to idlePoll, but URLs that other processes queue
// on sites with free slots are seen sooner: one idle worker of the process,
// its watcher, asks the frontier again after watchFirst, then twice as long
// each time it finds nothing, up to watchMax (whatever EmptyError.Wait
// says: that is when this shard's known sites may be ready, not when
// another process may queue URLs). When it finds an item it stops watching
// and hands over (handOver): it rouses another idle worker, which, if it
// finds an item too, hands over in turn, and if it finds nothing becomes
// the watcher. So a process whose workers all sleep (started after the
// others took every ready site, or left with nothing when a burst ended)
// joins in one poll a worker, whatever shards the new URLs are in; the
// chain ends at the first worker that finds nothing. It costs a process one
// poll every watchFirst at most while the watch is fresh, one every
// watchMax while nothing comes, and one more per hand-over. Only while the
// frontier has work queued or in flight (EmptyError): a watcher told that
// the crawl is done for now (ErrDone) or that the frontier fails stops
// watching.
const (
	watchFirst = 50 * time.Millisecond
	watchMax   = 400 * time.Millisecond
)

// watchFor is how long w may sleep as the process's watcher: its next
// backoff, if it is the watcher or becomes it now; else idlePoll.
func (c *Crawler) watchFor(w *worker) time.Duration {
	if w.watch == 0 {
		if !c.watching.CompareAndSwap(false, true) {
			return idlePoll
		}
		w.watch = watchFirst
	}
	d := w.watch
	w.watch = min(2*w.watch, watchMax)
	return d
}

// unwatch ends w's watch, if it was the process's watcher, and reports
// whether it was (one that found an item hands over: handOver).
func (c *Crawler) unwatch(w *worker) bool {
	if w.watch == 0 {
		return false
	}
	w.watch = 0
	c.watching.Store(false)
	return true
}

// idle waits d, or less if another worker rouses this one (see rouse): then
// it returns the site the rousing worker was handed, whose shard has
// another site ready; or if a worker hands over to it (handOver), handed.
// It reports over when the crawl is done (see done).
func (c *Crawler) idle(ctx context.Context, d time.Duration) (near string, handed, over bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case near = <-c.wake:
	case <-c.handOff:
		return "", true, false
	case <-c.done:
		return "", false, true
	}
	return near, false, false
}

// handOver rouses one idle worker, if any, for a watcher that found an item
// or a worker it handed over to that found one too (see watchFirst).
func (c *Crawler) handOver() {
	select {
	case c.handOff <- struct{}{}:
	default:
	}
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

// frontierTimeout bounds a frontier call that a stop does not cut. A take
// or settlement that gets no answer is sent once more, within a bound of
// its own (frontier.Frontier's againTimeout, as long), so when Redis
// stalls a turn's settlement can take twice this.
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

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
