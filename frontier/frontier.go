// Package frontier is the crawl queue a fleet of workers shares in Redis.
//
// Every URL is admitted at most once per crawl (normalised, then
// de-duplicated by a 64-bit fingerprint; a link past its site's queue bound,
// Options.MaxQueuedPerSite, is dropped and may be admitted when found
// again) and delivered at least once: a worker takes an item
// for a visibility timeout, and an item whose worker dies is handed to
// another when it runs out. The crawl is over, for every worker, when
// nothing is queued and nothing is in flight.
//
// # Scheduling
//
// The frontier hands out only URLs that can be fetched now. URLs wait in
// per-site queues behind a ready set of the sites that may be tried, scored
// by when each may next start; among ready sites, workers take turns round
// robin. The frontier counts each site's items in flight: a site leaves the
// ready set when they reach its cap (Options.Cap, until a settlement reports
// the site's own, SiteRule) and comes back the moment one of them settles,
// or, when its rule has a Delay, that long after. An item handed out again
// after its visibility timeout frees its slot too. A worker that finds a
// site full anyway (another crawl, a lease) defers the URL and takes another
// site's instead of waiting.
//
// # Shards
//
// A crawl's frontier is split by site over Options.Shards hash tags, fixed
// when the crawl is created (the first process stores the count in the
// crawl's meta key; later ones use it). A site's shard is FNV-1a 32 of its
// name modulo the count. Each shard has its own ready set, items in flight,
// counts, seen sets and queues, so each script touches one slot and the
// shards spread over a Redis Cluster's nodes. A worker tries one shard
// (rotating), and when it has nothing ready, reads all shards at once in
// one pipelined probe and takes from one that has. Settling an item, queuing
// the links found on it and taking the next item is one script call of the
// item's shard (see Settle); links of other shards go in the same round
// trip.
//
// Every key has the crawl's TTL: a key is created with it, and all of a
// shard's keys' TTLs are refreshed about once a minute by whichever process
// asks first (each asks once a minute, for every shard, whether its workers
// called it or not), not on every call. Seen URLs are kept as 64-bit
// fingerprints of the normalised URL in 256 intsets per shard: SipHash-2-4
// under a random key that the process creating the crawl stores in its
// meta, so that a site cannot make its URLs collide with other sites' and
// keep them out of the crawl (FNV-1a in a crawl created before crawls had
// a key). That is about 13 bytes a URL up to CompactSeen a shard (some
// 131,000 URLs with Redis's default set-max-intset-entries). Each process
// also remembers, in 1 MiB, fingerprints its calls have had admitted or
// found seen, and does not send those links again (without MaxPages
// only); so a crawl whose keys are deleted under a running process is not
// fully re-admitted by that process: start it again. Processes built
// before crawls had a key use FNV-1a in any crawl: run with them, a newer
// crawl may admit a URL once for each kind of process.
//
// # A crawl's life
//
// The first process on a crawl creates it: its meta key records the shard
// count and when, its scope rules (ScopeRules, which every later process
// follows), and each joining process its limits (Meta), and the
// prefix's registry of crawls notes it. List reads every crawl with its
// state, Open reads one without writing, and Delete removes one's keys.
// URLs found past MaxPages wait in a bounded overflow for a process with a
// higher limit.
//
// # Use
//
// A Frontier is safe for concurrent use: one per process serves all its
// workers. A worker loops on Next (or Settle with Next) until ErrDone; an
// *EmptyError says how long to wait before asking again. Each item it takes
// must be settled (Settle, Done, Retry, Defer) or given back (Release)
// before its visibility timeout, or it is handed to another worker and the
// late settlement returns ErrLost. ErrNoCrawl means a crawl has no keys,
// and ErrScopeConflict that this process's scope rules differ from the
// crawl's; a call that fails on Redis's error may be retried.
package frontier

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/internal/keyname"
	"github.com/polite-crawler/polite/internal/luafn"
	"github.com/polite-crawler/polite/internal/luanums"
	"github.com/polite-crawler/polite/internal/servertime"
	"github.com/polite-crawler/polite/robots"
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
	//go:embed touch.lua
	touchLua string
	//go:embed meta.lua
	metaLua string
	//go:embed register.lua
	registerLua string

	// lib is the scripts, run as one library of Redis Functions where the
	// server has them (internal/luafn), each after the server's clock, the
	// numbers argument (internal/luanums) and common.lua.
	lib = luafn.NewLibrary("polite_frontier", servertime.Lua+luanums.Lua+commonLua, map[string]string{
		"next": nextLua, "add": addLua, "settle": settleLua, "hold": holdLua, "touch": touchLua, "meta": metaLua, "register": registerLua,
	})

	nextScript   = lib.Script("next")
	addScript    = lib.Script("add")
	settleScript = lib.Script("settle")
	holdScript   = lib.Script("hold")
	touchScript  = lib.Script("touch")
	// meta.lua and register.lua are on keys of their own, not a shard's
	// (they use none of common.lua).
	metaScript     = lib.Script("meta")
	registerScript = lib.Script("register")
	// registerEval is register.lua whole, for a pipeline that does not look
	// at its answer (keepCrawl).
	registerEval = redis.NewScript(servertime.Lua + registerLua)
)

var (
	// ErrDone means the crawl is over: nothing queued, nothing in flight.
	ErrDone = errors.New("frontier: crawl done")
	// ErrNoCrawl means the crawl has no keys under the prefix: it was never
	// created, or has expired or been deleted.
	ErrNoCrawl = errors.New("frontier: no such crawl")
	// ErrMetaLost means a crawl's meta key is gone while its shards' keys
	// remain, so a process cannot join it (see Frontier's layout): the
	// seen key its URLs were fingerprinted with is gone with the meta.
	ErrMetaLost = errors.New("frontier: crawl's meta is gone while its queues and seen sets remain")
	// ErrLost means an item was handed to another worker (its visibility
	// timeout ran out) before this one settled it.
	ErrLost = errors.New("frontier: item no longer held")
	// ErrCrawlGone means the crawl this process works on was deleted
	// (Delete), or deleted and made anew by another process, since it
	// joined: found at its next refresh of the crawl's meta (keepCrawl).
	// That comes at the next call after a settlement or Extend finds its
	// item no longer in flight, as a delete leaves every item (at most
	// one such look a second), else within a refresh interval; a meta
	// made anew counts once its maker confirmed it, or replacedAge after.
	// Every call fails with it from then on. The process must stop: its
	// items and its seen key belong to a crawl that no longer exists.
	ErrCrawlGone = errors.New("frontier: crawl gone")
)

// MaxShards bounds Options.Shards.
const MaxShards = 1024

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
	// MaxPages stops admitting URLs after this many (0 = no limit). A crawl
	// created by a process with a limit has one shard, where the limit is
	// kept exactly (its processes should all pass the same limit: on a crawl
	// created without one, each shard would admit up to the limit). New
	// URLs past the limit are kept, seen, in an overflow of up to 10,000 a
	// shard (past that, dropped and not remembered as seen); a later
	// process with a higher limit, or none, admits them as far as its
	// limit allows when it seeds (Seed, with or without URLs, once the
	// crawl has a scope). The last process's limit is in the crawl's Meta.
	MaxPages int
	// MaxQueuedPerSite bounds how many of the links Settle admits one
	// site's queue takes (default DefaultMaxQueuedPerSite; negative: no
	// bound), so that a site that makes up new links without end (a
	// spider trap, a calendar) cannot queue them without end. A new link
	// past it is dropped and not remembered as seen: a page fetched once
	// the queue has room that links to it admits it, but one linked only
	// from pages fetched meanwhile is lost. Links dropped so are counted
	// in Stats.SiteFull and Result.SiteFull. Seed and Add are not bound by
	// it (their callers bound what they admit: the crawler's sitemaps
	// 200,000 URLs a site). Each process's own bound applies to the links
	// its settlements admit.
	MaxQueuedPerSite int
	// TTL is how long a crawl's keys stay once no process works on it
	// (default 24h): each process refreshes them every quarter of it, at
	// most once a minute.
	TTL time.Duration
	// Shards is how many hash tags the crawl's frontier spreads over
	// (default 16, at most MaxShards). It is fixed when the crawl is
	// created: a later process uses the crawl's stored count, whatever it
	// passes.
	Shards int
	// Cap is how many items of one site are handed out at once until a
	// settlement reports the site's own cap (default 3).
	Cap int
	// Park is how long a site at its cap is kept out at most (default
	// 10s). An item whose worker died counts against its site's cap until
	// the visibility timeout; after Park the site is handed out again, and
	// the semaphore decides: its permits run out after their lease. Give
	// it half the permit lease: a worker handed the site while the dead
	// holder's permit lives waits for it in the site's line.
	Park time.Duration
	// SiteKey names the site the frontier schedules a URL under (its cap,
	// its turn, its shard, Item.Site): robots.Site (nil, the default: by
	// host) or robots.Domain (by registered domain). Give it the permits'
	// (fetch.Transport.SiteKey), so the frontier counts what the semaphore
	// guards. Every process of a crawl must give the same. The crawl's
	// scope stays a set of hosts (Normalize's site) whatever it is.
	SiteKey robots.SiteKey
	// Scope is this process's scope rules. The process that creates the
	// crawl stores them with it; every later one follows the stored rules
	// (Rules): with none given (the zero ScopeRules) it adopts them, and
	// with others it joins nothing, every call failing with
	// ErrScopeConflict.
	Scope ScopeRules
	// Referrers keeps in each link's item the page it was found on
	// (Item.From), for a record of the crawl; it costs each queued item
	// that URL's length in Redis. A page URL longer than MaxReferrer is
	// not kept.
	Referrers bool
}

// DefaultMaxQueuedPerSite is Options.MaxQueuedPerSite's default: a
// site's queue of 1,000,000 URLs of 70 characters takes some 87 MB of Redis
// memory (more with Referrers; 8.7 MB measured at 100,000).
const DefaultMaxQueuedPerSite = 1_000_000

// MaxReferrer bounds the page URL a link's item keeps (Options.Referrers).
const MaxReferrer = 1024

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
	if v.MaxQueuedPerSite == 0 {
		v.MaxQueuedPerSite = DefaultMaxQueuedPerSite
	}
	if v.Shards <= 0 {
		v.Shards = defaultShards
	}
	v.Shards = min(v.Shards, MaxShards)
	if v.Cap <= 0 {
		v.Cap = 3
	}
	if v.Park <= 0 {
		v.Park = 10 * time.Second
	}
	return v
}

// Item is one URL handed to a worker.
type Item struct {
	ID    string `json:"-"`
	Site  string `json:"-"`
	URL   string `json:"u"`
	Depth int    `json:"d"`
	// Hops is how many links in a row off the crawl's in-scope sites led
	// here (ScopeRules.FollowExternal): 0 for a URL of a site in scope.
	Hops     int `json:"h,omitempty"`
	Attempts int `json:"a,omitempty"` // failed tries so far
	// From is the page the URL was found on (a link's or a redirect's,
	// Settlement.Links) with Options.Referrers; "" for a seed, a URL given
	// to Add, or without them. It costs the queued item its length in
	// Redis, not the seen set.
	From string `json:"r,omitempty"`
	// More reports that when the item was handed out its shard still had a
	// site ready (below its cap, its turn come): a worker that is idle
	// could take an item now. Not kept in Redis.
	More bool `json:"-"`
}

// Frontier is a crawl's shared queue. It is safe for concurrent use.
type Frontier struct {
	rdb redis.Cmdable
	fn  *luafn.Conn // the scripts on rdb's servers
	o   Options
	err error // invalid Options: every call fails with it
	// meta (the shard count) and scope live in the crawl's own hash tag,
	// with tomb, which Delete leaves for the crawl's running processes
	// (keepMeta).
	meta, scope, tomb string

	mu  sync.Mutex // resolving lay
	lay atomic.Pointer[layout]
	// rules are the crawl's scope rules, read when lay is resolved;
	// rulesSet once the crawl had stored rules (see Rules).
	rulesMu  sync.Mutex
	rules    ScopeRules
	rulesSet bool
	// cursor rotates Next over the shards, from a place of the process's
	// own (New), so that processes started together do not all begin on
	// the same shard.
	cursor atomic.Uint32
	// idle is set when the last look at all shards found nothing ready.
	// overLeft is set when the last such look (probe) found URLs past the
	// page limit waiting, or (one shard) when the shard's counts last said
	// so, at overAt (unix ms): an idle process then keeps the crawl's keys.
	idle, overLeft atomic.Bool
	overAt         atomic.Int64
	// scopeLen is the size of the crawl's scope as Redis last told (see
	// ScopeLen).
	scopeLen atomic.Int64
	// keptAt is when (unix ms) this process last refreshed the TTLs of meta
	// and scope (see keepCrawl).
	keptAt atomic.Int64
	// lookedAt is when (unix ms) lookSoon last asked for a look.
	lookedAt atomic.Int64
	// gone is the error (wrapping ErrCrawlGone) every call returns once a
	// refresh of the meta found the crawl deleted or made anew (keepMeta).
	gone atomic.Pointer[error]
	// leftovers is set with gone: the first call to see it gives the
	// shard keys this process may have made again a TTL (expireLeftovers).
	leftovers atomic.Bool
	// sending is read-held by each call of pipelined from its look at
	// gone until its commands have been answered (and sent again alone
	// where Redis lacked the script), and by again: expireLeftovers takes
	// it to wait for those already on their way.
	sending sync.RWMutex
	// seen is the fingerprints this process knows seen (nil with a page
	// limit: see seenCache).
	seen *seenCache
	// comb combines the pipelines of the process's callers (pipelined).
	comb combiner
	// nonce is the process's part of its takes' ids (takeID).
	nonce string
	// oneKey: a shard call names only the ready set (luafn.Slotless).
	oneKey bool
}

// New returns the Frontier of crawl opts.Crawl on rdb. If opts.Prefix or
// opts.Crawl is not a valid key name (keyname.Check), or opts.Scope does
// not validate (ScopeRules.Validate), every method of the
// Frontier fails with that error, which Err returns. New makes no call to
// Redis: the first method that needs the crawl's shard count reads it.
// On a Redis Cluster, rdb must be the *redis.ClusterClient itself (not a
// wrapper): the frontier, List and Delete recognise it by its type to
// send each master its part and to SCAN every master.
func New(rdb redis.Cmdable, opts *Options) *Frontier {
	f := &Frontier{rdb: rdb, fn: lib.On(rdb), o: opts.get(), nonce: newNonce(), oneKey: luafn.Slotless(rdb)}
	if err := keyname.Check("prefix", f.o.Prefix); err != nil {
		f.err = fmt.Errorf("frontier: options: %w", err)
	} else if err := keyname.Check("crawl name", f.o.Crawl); err != nil {
		f.err = fmt.Errorf("frontier: options: %w", err)
	} else if err := f.o.Scope.Validate(); err != nil {
		f.err = fmt.Errorf("frontier: options: %w", err)
	}
	base := f.o.Prefix + ":{crawl:" + f.o.Crawl + "}:"
	f.meta, f.scope, f.tomb = base+"meta", base+"scope", base+"deleted"
	if f.o.MaxPages == 0 {
		f.seen = &seenCache{}
	}
	f.cursor.Store(mathrand.Uint32())
	return f
}

// Err is nil when the Frontier's Options are valid, or else the error,
// wrapping keyname.ErrInvalid (a name) or ScopeRules.Validate's (a scope),
// that all its methods return.
func (f *Frontier) Err() error { return f.err }

// Why a crawl's meta went (WhyGone).
const (
	GoneNot      = ""         // the meta is there, or Redis could not be asked
	GoneDeleted  = "deleted"  // crawler delete deleted it with URLs queued or in flight (Force)
	GoneFinished = "finished" // crawler delete deleted it once nothing was queued or in flight
	GoneLost     = "lost"     // no tombstone: Redis lost it (a restart without its data), or it was deleted by hand
)

// WhyGone tells a process that finds its crawl done whether and how its
// keys went from under it, by the crawl's meta and the tombstone Delete
// leaves (whose value says whether the crawl had work left). For
// GoneDeleted it returns an error wrapping ErrCrawlGone, as the process's
// calls would have failed with had they looked in time; else nil.
func (f *Frontier) WhyGone(ctx context.Context) (string, error) {
	if f.err != nil {
		return GoneNot, nil
	}
	pipe := f.rdb.Pipeline()
	meta, tomb := pipe.Exists(ctx, f.meta), pipe.Get(ctx, f.tomb)
	_, err := pipe.Exec(ctx)
	switch {
	case err != nil && !errors.Is(err, redis.Nil), meta.Val() != 0:
		return GoneNot, nil
	case tomb.Err() != nil:
		return GoneLost, nil
	case tomb.Val() == tombDone:
		return GoneFinished, nil
	}
	return GoneDeleted, f.GoneError("deleted (crawler delete) while this process worked on it, with URLs queued or in flight, which went with it")
}

// GoneError is the error, wrapping ErrCrawlGone, that says the crawl was
// how (what happened to it, and while this process did what), and what a
// process started now does: the one text of every way a process learns
// that its crawl went (keepMeta, WhyGone, and the crawl's own look while
// idle).
func (f *Frontier) GoneError(how string) error {
	return fmt.Errorf("%w: crawl %s under prefix %s was %s; a process started now works on the crawl as it is now", ErrCrawlGone, f.o.Crawl, f.o.Prefix, how)
}

// Options are the frontier's settings, defaults filled in. Shards is what
// this process asked for; the crawl's own count is in Stats.
func (f *Frontier) Options() Options { return f.o }

// EmptyError is Next's answer when no site is ready but the crawl is not
// over. Wait is until a deferred or delayed site comes back or an item in
// flight could be handed out again; a settlement can make a site at its cap
// ready sooner.
type EmptyError struct {
	Queued, InFlight int64
	Wait             time.Duration // until something may be ready
}

func (e *EmptyError) Error() string {
	return fmt.Sprintf("frontier: nothing ready (%d queued, %d in flight; retry in %s)", e.Queued, e.InFlight, e.Wait)
}

// Hold keeps site out of Next for up to d, because its slots are all taken:
// workers then try other sites rather than find it full. The first fetch of
// one of its items that settles brings it back. Hold only ever makes a site
// wait longer, and does nothing to a site with no URLs queued. The frontier
// parks a site at its cap by itself, so Hold is rarely needed.
func (f *Frontier) Hold(ctx context.Context, site string, d time.Duration) error {
	lay, err := f.layout(ctx)
	if err != nil {
		return err
	}
	c := f.newCall(holdScript, lay.of(site), []float64{float64(d.Milliseconds())}, site)
	if c.run(ctx, f.fn); c.cmd.Err() != nil {
		f.failed(c)
		return fmt.Errorf("frontier: hold %s: %w", site, c.cmd.Err())
	}
	return nil
}

// Extend keeps it handed to this worker for another visibility timeout
// from now (Redis's clock), so that a turn longer than the timeout is not
// handed to another worker: a worker still at it calls it every half
// timeout or so. It returns ErrLost when it is no longer held: it was
// handed out again, or settled.
func (f *Frontier) Extend(ctx context.Context, it Item) error {
	lay, err := f.layout(ctx)
	if err != nil {
		return err
	}
	c := f.newCall(touchScript, lay.of(it.Site), nil, it.ID)
	c.run(ctx, f.fn)
	held, err := c.cmd.Int()
	if err != nil || held == 0 {
		// Its refresh, if it carried one, is not done (touch.lua): the
		// next call asks again. (It writes no seen set: the process's
		// cache stays.)
		c.unkeep()
	}
	if err != nil {
		return fmt.Errorf("frontier: extend %s: %w", it.URL, err)
	}
	if held == 0 {
		f.lookSoon()
		return fmt.Errorf("%w: %s", ErrLost, it.URL)
	}
	return nil
}

// siteBound is the site bound settle.lua and add.lua take for Settle's
// links (common.lua sitemax): 0 for none.
func (f *Frontier) siteBound() int { return max(f.o.MaxQueuedPerSite, 0) }

// Visibility is how long an item stays handed to its worker without a
// settlement or an Extend (Options.Visibility, or its default).
func (f *Frontier) Visibility() time.Duration { return f.o.Visibility }

// newNonce is 64 random bits, in hex: a process's part of its takes' ids.
func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// takeID is a new take's id on sh, unique in the crawl: the process's
// nonce, the shard and the process's takes on it so far, in octal, so that
// common.lua's take tidies the shard on every 8th take of a process there
// (an id ending in '0') without a counter in Redis. (Counted per shard: a
// count per process would go round the shards in step with Next's
// rotation and tidy only some of them.) An id is never used twice: a call
// with an id the shard's library has answered gets that answer again
// (common.lua answered), as a call go-redis sends again must.
func (f *Frontier) takeID(sh *shard) string {
	return f.nonce + "." + strconv.Itoa(sh.n) + "." + strconv.FormatUint(sh.takes.Add(1), 8)
}
