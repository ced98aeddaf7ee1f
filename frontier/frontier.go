// Package frontier is the crawl queue a fleet of workers shares in Redis.
//
// Every URL is admitted once per crawl (normalised, then de-duplicated) and
// delivered at least once: a worker takes an item for a visibility timeout,
// and an item whose worker dies is handed to another when it runs out. URLs
// wait in per-site queues behind a "ready" set scored by when each site may
// next be tried, so a worker that finds a site full defers the URL and
// takes one of another site instead of waiting. The crawl is over, for every
// worker, when nothing is queued and nothing is in flight.
//
// All of a crawl's keys share one hash tag, so its scripts run on Redis
// Cluster too (on one node).
package frontier

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/internal/keyname"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed common.lua
	commonLua string
	//go:embed next.lua
	nextLua string
	//go:embed add.lua
	addLua string
	//go:embed settle.lua
	settleLua string
	//go:embed hold.lua
	holdLua string

	nextScript   = redis.NewScript(commonLua + nextLua)
	addScript    = redis.NewScript(addLua)
	settleScript = redis.NewScript(commonLua + settleLua)
	holdScript   = redis.NewScript(commonLua + holdLua)
)

var (
	// ErrDone means the crawl is over: nothing queued, nothing in flight.
	ErrDone = errors.New("frontier: crawl done")
	// ErrLost means an item was handed to another worker (its visibility
	// timeout ran out) before this one settled it.
	ErrLost = errors.New("frontier: item no longer held")
)

// Options configure a Frontier. A nil *Options, and every zero field, means
// the default named on the field.
type Options struct {
	// Prefix starts every key (default "polite"). Like Crawl, it must pass
	// keyname.Check: no braces, whitespace or control characters.
	Prefix string
	// Crawl names the crawl; workers with the same name share it (default
	// "default").
	Crawl string
	// Visibility is how long a worker holds an item before it is handed out
	// again (default 2m). Make it longer than the slowest fetch.
	Visibility time.Duration
	// MaxAttempts bounds how often a failing URL is tried (default 3).
	MaxAttempts int
	// MaxDepth drops links deeper than this many hops from a seed (0 = no
	// limit).
	MaxDepth int
	// MaxPages stops admitting URLs after this many (0 = no limit).
	MaxPages int
	// TTL is how long an idle crawl's keys stay (default 24h).
	TTL time.Duration
}

func (o *Options) get() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Prefix == "" {
		v.Prefix = "polite"
	}
	if v.Crawl == "" {
		v.Crawl = "default"
	}
	if v.Visibility <= 0 {
		v.Visibility = 2 * time.Minute
	}
	if v.MaxAttempts <= 0 {
		v.MaxAttempts = 3
	}
	if v.TTL <= 0 {
		v.TTL = 24 * time.Hour
	}
	return v
}

// Item is one URL handed to a worker.
type Item struct {
	ID       string `json:"-"`
	Site     string `json:"-"`
	URL      string `json:"u"`
	Depth    int    `json:"d"`
	Attempts int    `json:"a,omitempty"` // failed tries so far
}

// Frontier is a crawl's shared queue. It is safe for concurrent use.
type Frontier struct {
	rdb redis.UniversalClient
	o   Options
	err error // invalid Options: every call fails with it
	k   struct{ ready, inflight, items, counts, seen, queue, scope string }
	// scopeLen is the size of the crawl's scope as Redis last told (see
	// ScopeLen).
	scopeLen atomic.Int64
}

// New returns the Frontier of crawl opts.Crawl on rdb. If opts.Prefix or
// opts.Crawl is not a valid key name (keyname.Check), every method of the
// Frontier fails with that error, which Err returns.
func New(rdb redis.UniversalClient, opts *Options) *Frontier {
	f := &Frontier{rdb: rdb, o: opts.get()}
	if err := keyname.Check("prefix", f.o.Prefix); err != nil {
		f.err = fmt.Errorf("frontier: options: %w", err)
	} else if err := keyname.Check("crawl name", f.o.Crawl); err != nil {
		f.err = fmt.Errorf("frontier: options: %w", err)
	}
	base := f.o.Prefix + ":{crawl:" + f.o.Crawl + "}:"
	f.k.ready, f.k.inflight, f.k.items, f.k.counts = base+"ready", base+"inflight", base+"items", base+"counts"
	f.k.seen, f.k.queue, f.k.scope = base+"seen", base+"q:", base+"scope"
	return f
}

// Err is nil when the Frontier's Options are valid, or else the error,
// wrapping keyname.ErrInvalid, that all its methods return.
func (f *Frontier) Err() error { return f.err }

// Options are the frontier's settings, defaults filled in.
func (f *Frontier) Options() Options { return f.o }

// Add admits the URLs found at depth (0 for seeds), each once per crawl:
// they are normalised (see Normalize), and those deeper than MaxDepth, past
// MaxPages, already seen, or not http(s) are dropped. It returns how many
// were admitted.
func (f *Frontier) Add(ctx context.Context, depth int, urls ...string) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	c := f.addCall(depth, urls, false)
	if c == nil {
		return 0, nil
	}
	c.run(ctx, f.rdb)
	return c.added()
}

// addCall is Add's script call, or nil when there is nothing to admit. With
// seed, the URLs' sites join the crawl's scope.
func (f *Frontier) addCall(depth int, urls []string, seed bool) *call {
	if f.o.MaxDepth > 0 && depth > f.o.MaxDepth {
		return nil
	}
	flag := "0"
	if seed {
		flag = "1"
	}
	args := []any{f.k.queue, f.o.MaxPages, f.o.TTL.Milliseconds(), flag}
	for _, raw := range urls {
		norm, site, err := Normalize(raw)
		if err != nil {
			continue
		}
		item, _ := json.Marshal(Item{URL: norm, Depth: depth})
		args = append(args, norm, site, item)
	}
	if len(args) == 4 {
		return nil
	}
	return &call{script: addScript, keys: []string{f.k.ready, f.k.seen, f.k.counts, f.k.scope}, args: args}
}

func (c *call) added() (int, error) {
	n, err := c.cmd.Int()
	if err != nil {
		return 0, fmt.Errorf("frontier: add: %w", err)
	}
	return n, nil
}

// Next takes the next URL of a ready site. When none is ready it returns
// ErrDone if the crawl is over, or else an *EmptyError saying how long until
// something may be (a deferred site comes back, or an item in flight could
// be handed out again).
func (f *Frontier) Next(ctx context.Context) (Item, error) {
	if f.err != nil {
		return Item{}, f.err
	}
	c := f.nextCall()
	c.run(ctx, f.rdb)
	return f.next(c)
}

func (f *Frontier) nextCall() *call {
	return &call{script: nextScript, keys: []string{f.k.ready, f.k.inflight, f.k.items, f.k.counts, f.k.scope},
		args: []any{f.k.queue, f.o.Visibility.Milliseconds(), f.o.TTL.Milliseconds()}}
}

// next reads Next's answer, and notes the size of the crawl's scope that
// came with it.
func (f *Frontier) next(c *call) (Item, error) {
	v, err := c.cmd.Slice()
	if err != nil {
		return Item{}, fmt.Errorf("frontier: next: %w", err)
	}
	if len(v) != 5 {
		return Item{}, fmt.Errorf("frontier: next: script returned %d values", len(v))
	}
	if n, _ := v[4].(int64); n > 0 {
		f.noteScopeLen(n)
	}
	if n, _ := v[0].(int64); n == 1 {
		var it Item
		raw, _ := v[3].(string)
		if err := json.Unmarshal([]byte(raw), &it); err != nil {
			return Item{}, fmt.Errorf("frontier: next: bad item %q: %w", raw, err)
		}
		it.ID, _ = v[1].(string)
		it.Site, _ = v[2].(string)
		return it, nil
	}
	queued, _ := v[1].(int64)
	inflight, _ := v[2].(int64)
	wait, _ := v[3].(int64)
	if queued <= 0 && inflight == 0 {
		return Item{}, ErrDone
	}
	e := &EmptyError{Queued: queued, InFlight: inflight, Wait: time.Second}
	if wait >= 0 {
		e.Wait = time.Duration(wait) * time.Millisecond
	}
	return Item{}, e
}

// EmptyError is Next's answer when no site is ready but the crawl is not over.
type EmptyError struct {
	Queued, InFlight int64
	Wait             time.Duration // until something may be ready
}

func (e *EmptyError) Error() string {
	return fmt.Sprintf("frontier: nothing ready (%d queued, %d in flight; retry in %s)", e.Queued, e.InFlight, e.Wait)
}

// Done settles an item as fetched. Its fetch has given a slot of its site
// back, so a site that Defer kept out as full takes its turn again at once. It
// returns ErrLost if the item had been handed to another worker meanwhile.
func (f *Frontier) Done(ctx context.Context, it Item) error {
	return f.settle(ctx, it, "done", "", 0, false)
}

// Retry puts a failed item back for another try after delay, or, past
// MaxAttempts, settles it as failed. It reports whether it was put back.
func (f *Frontier) Retry(ctx context.Context, it Item, delay time.Duration) (bool, error) {
	if f.err != nil {
		return false, f.err
	}
	it.Attempts++
	if it.Attempts >= f.o.MaxAttempts {
		return false, f.settle(ctx, it, "done", "", 0, true)
	}
	raw, _ := json.Marshal(it)
	return true, f.settle(ctx, it, "tail", string(raw), delay, false)
}

// Defer puts an item back at the head of its site's queue and keeps the
// whole site out of Next for delay: the site is full, or asks to wait.
func (f *Frontier) Defer(ctx context.Context, it Item, delay time.Duration) error {
	return f.settle(ctx, it, "head", "", delay, false)
}

// Hold keeps site out of Next for up to d, because its slots are all taken
// (limiter.Permit.TookLastSlot): workers then try other sites rather than
// find it full. The first Done of one of its items brings it back. Hold
// only ever makes a site wait longer, and does nothing to a site with no
// URLs queued.
func (f *Frontier) Hold(ctx context.Context, site string, d time.Duration) error {
	if f.err != nil {
		return f.err
	}
	if err := holdScript.Run(ctx, f.rdb, []string{f.k.ready}, site, d.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("frontier: hold %s: %w", site, err)
	}
	return nil
}

// Release gives an item back untouched, for another worker to take at once
// (a worker shutting down).
func (f *Frontier) Release(ctx context.Context, it Item) error {
	return f.settle(ctx, it, "head", "", 0, false)
}

func (f *Frontier) settle(ctx context.Context, it Item, how, item string, delay time.Duration, failed bool) error {
	if f.err != nil {
		return f.err
	}
	c := f.settleCall(it, how, item, delay, failed)
	c.run(ctx, f.rdb)
	return c.settled(it, how)
}

func (f *Frontier) settleCall(it Item, how, item string, delay time.Duration, failed bool) *call {
	fl := "0"
	if failed {
		fl = "1"
	}
	return &call{script: settleScript, keys: []string{f.k.ready, f.k.inflight, f.k.items, f.k.counts},
		args: []any{f.k.queue, it.ID, how, item, delay.Milliseconds(), fl, f.o.TTL.Milliseconds()}}
}

func (c *call) settled(it Item, how string) error {
	n, err := c.cmd.Int()
	if err != nil {
		return fmt.Errorf("frontier: %s %s: %w", how, it.URL, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", ErrLost, it.URL)
	}
	return nil
}

// Stats are a crawl's counts.
type Stats struct {
	Queued, InFlight, Done, Failed, Admitted, Seen int64
}

// Stats reads the crawl's counts.
func (f *Frontier) Stats(ctx context.Context) (Stats, error) {
	if f.err != nil {
		return Stats{}, f.err
	}
	pipe := f.rdb.Pipeline()
	counts := pipe.HGetAll(ctx, f.k.counts)
	inflight := pipe.ZCard(ctx, f.k.inflight)
	seen := pipe.SCard(ctx, f.k.seen)
	if _, err := pipe.Exec(ctx); err != nil {
		return Stats{}, fmt.Errorf("frontier: stats: %w", err)
	}
	c := counts.Val()
	num := func(k string) int64 { var n int64; fmt.Sscan(c[k], &n); return n }
	return Stats{Queued: num("queued"), InFlight: inflight.Val(), Done: num("done"), Failed: num("failed"),
		Admitted: num("admitted"), Seen: seen.Val()}, nil
}

// SiteQueue is one site's backlog.
type SiteQueue struct {
	Site    string
	Queued  int64
	ReadyIn time.Duration // until the site may be tried (0: now)
}

// Sites lists the sites with queued URLs.
func (f *Frontier) Sites(ctx context.Context) ([]SiteQueue, error) {
	if f.err != nil {
		return nil, f.err
	}
	zs, err := f.rdb.ZRangeWithScores(ctx, f.k.ready, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("frontier: sites: %w", err)
	}
	now, err := f.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("frontier: sites: %w", err)
	}
	pipe := f.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(zs))
	for i, z := range zs {
		lens[i] = pipe.LLen(ctx, f.k.queue+z.Member.(string))
	}
	if len(zs) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("frontier: sites: %w", err)
		}
	}
	out := make([]SiteQueue, len(zs))
	for i, z := range zs {
		in := time.Duration(int64(z.Score)-now.UnixMilli()) * time.Millisecond
		out[i] = SiteQueue{Site: z.Member.(string), Queued: lens[i].Val(), ReadyIn: max(in, 0)}
	}
	return out, nil
}
