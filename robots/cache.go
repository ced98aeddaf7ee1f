package robots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/polite-crawler/polite/internal/keyname"
	"github.com/polite-crawler/polite/internal/netcause"
	"github.com/polite-crawler/polite/internal/ownedkey"
	"github.com/polite-crawler/polite/internal/rtkind"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

// CacheOptions configure a Cache. A nil *CacheOptions, and every zero field,
// means the default named on the field.
type CacheOptions struct {
	// Prefix starts every Redis key (default "polite", as in the limiter).
	// It must pass keyname.Check: braces, whitespace or control characters
	// make every Policy and Cached call fail with a keyname.ErrInvalid.
	Prefix string
	// UserAgent is sent with each fetch; its product token picks the robots
	// group (default "politebot/0.1").
	UserAgent string
	// TTL is how long a fetched policy is reused (default and maximum 24h).
	TTL time.Duration
	// StaleFor is how long the last good policy stands in for a robots.txt
	// that has become unreachable (default 30 days).
	StaleFor time.Duration
	// RetryMin and RetryMax bound the backoff before an unreachable
	// robots.txt is fetched again: RetryMin, doubling per failure, up to
	// RetryMax (defaults 1m and 1h).
	RetryMin, RetryMax time.Duration
	// FetchTimeout bounds the wait for the site's permit and, timed from the
	// permit, each request of a robots.txt fetch; twice it bounds the whole
	// fetch, redirects included (default 30s). The wait and the request are
	// the client's transport to bound (fetch.RobotsTransport).
	FetchTimeout time.Duration
	// LocalSize bounds the in-process layer (default 10000 robots.txt
	// policies).
	LocalSize int
	// LocalBytes bounds the in-process layer's memory: the policies'
	// approximate size in bytes, rules and their compiled form (default 256
	// MiB; a 500 KiB robots.txt of short rules compiles to about 5 MiB). A
	// policy larger than LocalBytes is not kept in-process: it is read from
	// Redis each time.
	LocalBytes int
	// Parse tunes parsing (the maximum crawl delay).
	Parse Options
	// Fetched, if set, is called with each policy this process has just
	// fetched (not with ones found cached), e.g. to start its crawl delay
	// from the robots.txt request itself; before the policy is stored, so
	// that no worker of the fleet can read it (and request a page) before
	// the delay has started. site is the permits' site (Site), which the
	// http and https robots.txt of a host share.
	Fetched func(ctx context.Context, site string, p Policy)
	// Log hears, as warnings, what the cache failed to do but went on
	// without: a fetch lease it could not give back (other workers wait
	// for it to expire) or an unreachable count it could not give a TTL
	// (nil: nothing is logged). crawl.NewRobotsCacheOn gives it to its
	// robots.txt transport and crawl-delay hook too.
	Log *slog.Logger
}

func (o *CacheOptions) prefix() string {
	if o == nil || o.Prefix == "" {
		return "polite"
	}
	return o.Prefix
}

func (o *CacheOptions) userAgent() string {
	if o == nil || o.UserAgent == "" {
		return "politebot/0.1"
	}
	return o.UserAgent
}

func (o *CacheOptions) ttl() time.Duration {
	if o == nil || o.TTL <= 0 || o.TTL > 24*time.Hour {
		return 24 * time.Hour
	}
	return o.TTL
}

func (o *CacheOptions) staleFor() time.Duration {
	if o == nil || o.StaleFor <= 0 {
		return 30 * 24 * time.Hour
	}
	return o.StaleFor
}

func (o *CacheOptions) retry(failures int64) time.Duration {
	lo, hi := time.Minute, time.Hour
	if o != nil && o.RetryMin > 0 {
		lo = o.RetryMin
	}
	if o != nil && o.RetryMax > 0 {
		hi = max(o.RetryMax, lo)
	}
	d := lo
	for i := int64(1); i < failures && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

func (o *CacheOptions) fetchTimeout() time.Duration {
	if o == nil || o.FetchTimeout <= 0 {
		return 30 * time.Second
	}
	return o.FetchTimeout
}

func (o *CacheOptions) localSize() int {
	if o == nil || o.LocalSize <= 0 {
		return 10000
	}
	return o.LocalSize
}

func (o *CacheOptions) localBytes() int {
	if o == nil || o.LocalBytes <= 0 {
		return 256 << 20
	}
	return o.LocalBytes
}

func (o *CacheOptions) parse() Options {
	if o == nil {
		return Options{}
	}
	return o.Parse
}

// Cache gives each robots.txt's policy to every worker of a fleet while
// fetching the file once. A robots.txt covers one scheme, host and port (RFC
// 9309 §2.3): http://h/ and https://h/ have a policy each, though they share
// one site (Site) and so one set of permits. The policy lives in Redis under
// the site's hash tag, <prefix>:{<site>}:robots:<scheme> (the site carries
// the port whenever it is not the scheme's default, so site and scheme name
// exactly one scheme+host+port, and every key of a site stays in one Redis
// Cluster slot), expiring with the policy. One worker at a time holds a short
// fetch lease (SET NX PX) while the others wait for its result, calls in one
// process for one robots.txt share one load, and a bounded in-process layer
// answers repeat questions without Redis.
//
// An unreachable robots.txt (429, 5xx, network error, or a redirect that is
// not followed: see fetch) is fetched again after a backoff; until then the
// last good policy stands in if it is younger than StaleFor, else everything
// is disallowed.
type Cache struct {
	rdb       redis.Cmdable
	client    *http.Client
	o         *CacheOptions
	local     *lru
	flight    singleflight.Group
	badPrefix error // from keyname.Check, returned by every lookup

	// stop ends the loads under way when the cache is closed (Close);
	// loads counts them, and closed refuses new ones (both under mu).
	stop    context.Context
	stopNow context.CancelFunc
	mu      sync.Mutex
	closed  bool
	loads   sync.WaitGroup

	hitsLocal, hitsRedis, fetches atomic.Int64
}

// Counts says how policies were found: in the process, in Redis, or by
// fetching robots.txt.
func (c *Cache) Counts() (local, redis, fetched int64) {
	return c.hitsLocal.Load(), c.hitsRedis.Load(), c.fetches.Load()
}

// NewCache returns a Cache. It does not fail: an invalid prefix is returned
// by every Policy and Cached call instead. client fetches robots.txt: give it the crawler's
// permit-taking transport for robots.txt (fetch.RobotsTransport), since a
// robots.txt fetch is a request to the site too. A nil client
// means http.DefaultClient. opts may be nil.
func NewCache(rdb redis.Cmdable, client *http.Client, opts *CacheOptions) *Cache {
	if client == nil {
		client = http.DefaultClient
	}
	if opts != nil {
		o := *opts
		opts = &o
	}
	c := &Cache{rdb: rdb, client: client, o: opts, local: newLRU(opts.localSize(), opts.localBytes())}
	c.stop, c.stopNow = context.WithCancel(context.Background())
	if err := keyname.Check("prefix", opts.prefix()); err != nil {
		c.badPrefix = fmt.Errorf("robots: %w", err)
	}
	return c
}

// entry is what Redis holds for a site.
type entry struct {
	Policy Policy `json:"policy"`
	// Stale is true when the site's robots.txt is unreachable and this is the
	// last good policy standing in.
	Stale bool `json:"stale,omitempty"`
}

// origin names one robots.txt: a scheme and a site (Site), which together
// are exactly one scheme+host+port.
type origin struct{ scheme, site string }

func (o origin) String() string { return o.scheme + "://" + o.site }

// robotsURL is the origin's /robots.txt, escaped: an IPv6 zone's '%' is
// "%25" in a URL ("[fe80::1%25eth0]").
func (o origin) robotsURL() string {
	return (&url.URL{Scheme: o.scheme, Host: o.site, Path: "/robots.txt"}).String()
}

// origin returns u's robots.txt origin, or an error if u is not an http(s)
// URL or the prefix or site cannot go into a Redis key (keyname.Check).
func (c *Cache) origin(u *url.URL) (origin, error) {
	if c.badPrefix != nil {
		return origin{}, c.badPrefix
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return origin{}, fmt.Errorf("robots: %q is not an http(s) URL", u)
	}
	o := origin{scheme: u.Scheme, site: Site(u)}
	if err := keyname.Check("site", o.site); err != nil {
		return origin{}, fmt.Errorf("robots: %w", err)
	}
	return o, nil
}

type originKeys struct{ policy, good, fails, lease string }

func (c *Cache) keys(o origin) originKeys {
	base := c.o.prefix() + ":{" + o.site + "}:robots:" + o.scheme
	return originKeys{policy: base, good: base + ":good", fails: base + ":fails", lease: base + ":lease"}
}

// Local returns the policy of u's robots.txt if this process holds it
// (fresh) in memory, without asking Redis or the site; ok is false
// otherwise. A crawler uses it to drop links robots.txt already closes
// before it queues them; the fetch is still checked (Policy).
func (c *Cache) Local(u *url.URL) (p Policy, ok bool) {
	o, err := c.origin(u)
	if err != nil {
		return Policy{}, false
	}
	return c.local.get(o.String(), time.Now())
}

// Policy returns the policy of u's robots.txt: the one of u's scheme, host
// and port, for any URL there. It blocks while another worker fetches that
// robots.txt, until ctx ends. Errors come from Redis, ctx, a fetch the
// transport could not make (ErrNotFetched), a load the Cache's Close ended
// or refused (ErrClosed and ErrNotFetched), a URL that is not http(s), or a
// prefix or site that fails keyname.Check (keyname.ErrInvalid); a robots.txt
// that cannot be fetched is not an error but a policy (see Cache).
func (c *Cache) Policy(ctx context.Context, u *url.URL) (Policy, error) {
	o, err := c.origin(u)
	if err != nil {
		return Policy{}, err
	}
	if p, ok := c.local.get(o.String(), time.Now()); ok {
		c.hitsLocal.Add(1)
		return p, nil
	}
	// One load per robots.txt in this process. It runs detached from the
	// first caller's ctx, so that caller giving up does not fail the others.
	// Close ends it.
	ch := c.flight.DoChan(o.String(), func() (any, error) {
		if !c.begin() {
			return nil, fmt.Errorf("robots: %s: %w: %w", o, ErrNotFetched, ErrClosed)
		}
		defer c.loads.Done()
		lctx, cancel := context.WithTimeout(rtkind.With(context.WithoutCancel(ctx), rtkind.Robots), 3*c.o.fetchTimeout()+5*time.Second)
		defer cancel()
		unhook := context.AfterFunc(c.stop, cancel)
		defer unhook()
		p, err := c.load(lctx, o)
		if err != nil && c.stop.Err() != nil && !errors.Is(err, ErrClosed) {
			err = fmt.Errorf("%w: %w: %w", ErrNotFetched, ErrClosed, err) // ended by Close, wherever it was
		}
		return p, err
	})
	select {
	case <-ctx.Done():
		return Policy{}, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return Policy{}, r.Err
		}
		return r.Val.(Policy), nil
	}
}

// storeTimeout bounds the recording of a fetched robots.txt's verdict in
// Redis, which Close does not cut short.
const storeTimeout = 5 * time.Second

// ErrClosed is the error of a Policy call that needed a load after the
// Cache was closed (Close), or whose load Close ended.
var ErrClosed = errors.New("robots: cache closed")

// begin counts a load in, unless the cache is closed.
func (c *Cache) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.loads.Add(1)
	return true
}

// Close ends the robots.txt loads under way, and waits until they have
// given their fetch leases back, or ctx ends: call it before closing the
// Redis client, or a load cut off by the closed client leaves its lease,
// and other processes wait it out (up to twice the fetch timeout) before
// they fetch that robots.txt. A fetch that Close cuts short stores
// nothing: it is no verdict on the site (ErrNotFetched). Later loads fail
// with ErrClosed; policies the process holds are still served. Close
// returns ctx's error if the loads did not end in time. It is safe to
// call more than once.
func (c *Cache) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stopNow()
	done := make(chan struct{})
	go func() { // ends when the loads do: each is bounded by its own timeout
		c.loads.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("robots: close: loads still under way: %w", ctx.Err())
	}
}

// load reads o's policy from Redis, or takes the fetch lease and fetches
// it, or waits for whoever holds the lease.
func (c *Cache) load(ctx context.Context, o origin) (Policy, error) {
	k := c.keys(o)
	for {
		pipe := c.rdb.Pipeline()
		get := pipe.Get(ctx, k.policy)
		ttl := pipe.PTTL(ctx, k.policy)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return Policy{}, fmt.Errorf("robots: %s: %w", o, err)
		}
		if raw, err := get.Bytes(); err == nil {
			var e entry
			if err := json.Unmarshal(raw, &e); err == nil {
				c.local.put(o.String(), e.Policy, time.Now().Add(max(ttl.Val(), 0)))
				c.hitsRedis.Add(1)
				return e.Policy, nil
			}
		}
		token := uuid.NewString()
		ok, err := c.rdb.SetNX(ctx, k.lease, token, 2*c.o.fetchTimeout()+5*time.Second).Result() // outlasts a fetch
		if err != nil {
			return Policy{}, fmt.Errorf("robots: %s: lease: %w", o, err)
		}
		if ok {
			// A fetcher stores the policy before it gives the lease back: if
			// one did so since our read above, use its policy, not a second
			// fetch.
			if n, err := c.rdb.Exists(ctx, k.policy).Result(); err == nil && n == 1 {
				c.giveBack(ctx, o, k, token)
				continue
			}
			p, err := c.fetchAndStore(ctx, o, k)
			c.giveBack(ctx, o, k, token)
			return p, err
		}
		// Someone else is fetching: look again shortly.
		select {
		case <-ctx.Done():
			return Policy{}, fmt.Errorf("robots: %s: waiting for another worker's fetch: %w", o, ctx.Err())
		case <-time.After(25*time.Millisecond + rand.N(50*time.Millisecond)):
		}
	}
}

// giveBack gives o's fetch lease back if it is still ours (token).
func (c *Cache) giveBack(ctx context.Context, o origin, k originKeys, token string) {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout) // also after Close ended the load
	defer cancel()
	if _, err := ownedkey.Delete(gctx, c.rdb, k.lease, token); err != nil {
		c.warn("could not give back the robots.txt fetch lease; other workers wait for it to expire", "origin", o.String(), "err", err)
	}
}

// warn logs msg as a warning to Options.Log, if set.
func (c *Cache) warn(msg string, args ...any) {
	if c.o != nil && c.o.Log != nil {
		c.o.Log.Warn(msg, args...)
	}
}

func (c *Cache) fetchAndStore(ctx context.Context, o origin, k originKeys) (Policy, error) {
	c.fetches.Add(1)
	status, body, err := c.fetch(ctx, o.robotsURL()) // a failed fetch is status 0: unreachable
	if err != nil && c.stop.Err() != nil {
		err = fmt.Errorf("%w: %w", ErrNotFetched, ErrClosed) // cut short by Close: no verdict on the site
	}
	if errors.Is(err, ErrNotFetched) {
		return Policy{}, fmt.Errorf("robots: %s: %w", o, err) // no verdict on the site
	}
	// The verdict is in: record it whole, even if Close comes now (a
	// failure count without its TTL, or without the policy it backs off,
	// would outlive this process), within a bound of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	p := c.o.parse().Parse(status, body, c.o.userAgent())
	if status == 0 {
		p.Cause = netcause.Of(err) // kept, so the crawl can name it (Policy.Why)
	}
	e := entry{Policy: p}
	ttl := c.o.ttl()
	if p.Unreachable() {
		fails, err := c.rdb.Incr(ctx, k.fails).Result()
		if err != nil {
			return Policy{}, fmt.Errorf("robots: %s: %w", o, err)
		}
		ttl = c.o.retry(fails)
		if err := c.rdb.PExpire(ctx, k.fails, 2*c.o.retry(fails+1)).Err(); err != nil { // outlives the next retry
			c.warn("could not give robots.txt's unreachable count a TTL; it backs off the next fetch until it is reset", "origin", o.String(), "err", err)
		}
		if raw, err := c.rdb.Get(ctx, k.good).Bytes(); err == nil {
			var good entry
			if json.Unmarshal(raw, &good) == nil {
				e = entry{Policy: good.Policy, Stale: true}
			}
		}
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return Policy{}, fmt.Errorf("robots: %s: %w", o, err)
	}
	if c.o != nil && c.o.Fetched != nil {
		c.o.Fetched(ctx, o.site, e.Policy) // before any worker can read the policy
	}
	pipe := c.rdb.Pipeline()
	pipe.Set(ctx, k.policy, raw, ttl)
	if !p.Unreachable() {
		pipe.Set(ctx, k.good, raw, c.o.staleFor())
		pipe.Del(ctx, k.fails)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Policy{}, fmt.Errorf("robots: %s: store: %w", o, err)
	}
	c.local.put(o.String(), e.Policy, time.Now().Add(ttl))
	return e.Policy, nil
}
