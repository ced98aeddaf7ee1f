package frontier

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/polite-crawler/polite/internal/keyname"
	"github.com/polite-crawler/polite/robots"
	"github.com/redis/go-redis/v9"
)

// A crawl's life: the first process to use it creates it (its meta key,
// see Meta) and notes it in the prefix's registry, a ZSET
// "<prefix>:crawls" of crawl name -> server ms when its keys expire unless
// a process refreshes them (each does every quarter of the TTL, at most
// once a minute). Entries of expired crawls are dropped whenever a process
// registers. List reads the registry, and finds crawls created before it
// existed by a bounded SCAN of meta keys; Delete removes a crawl's keys.
// Permits, robots.txt policies and site health are keyed by site and
// shared by crawls: they are no crawl's keys.

// registryKey is the prefix's registry of crawls (register.lua).
func registryKey(prefix string) string { return prefix + ":crawls" }

// ScanBudget bounds the keys a SCAN of List or Delete walks over (per
// Redis master), in calls of scanCount: a keyspace larger than that is
// not walked to its end, and the answer says so.
const ScanBudget = 1_000_000

const scanCount = 1000

// Meta is what a crawl's meta key records.
type Meta struct {
	Shards int
	// Created is when the crawl was created (server time); zero for a
	// crawl created before it was recorded.
	Created time.Time
	// The rest are the last joining process's Options (a crawl's
	// processes should all give the same).
	//
	// MaxPerSite is its frontier's default cap (Options.Cap, which
	// `crawler run` gives its --max-per-site): the per-site limit unless
	// robots.txt asks for fewer (0: not recorded).
	MaxPerSite int
	// SiteKey is what one cap covers, "host" or "domain" ("": not
	// recorded).
	SiteKey string
	// MaxPages is its page limit (0: none; -1: not recorded).
	MaxPages int
	// TTL is its key TTL (0: not recorded); ExpiresIn is how long until the
	// crawl's keys expire unless a process refreshes them.
	TTL, ExpiresIn time.Duration
	// Scope is the crawl's scope rules, as the process that created it
	// gave them (Options.Scope; zero for a crawl created before they were
	// stored).
	Scope ScopeRules
}

// Idle is how long ago a process last refreshed the crawl's keys (TTL −
// ExpiresIn), or -1 when the TTL is not recorded. A process working on
// the crawl refreshes them every refresh interval (a minute, or a quarter
// of the TTL when that is shorter), on its way to or from a fetch.
func (m Meta) Idle() time.Duration {
	if m.TTL <= 0 {
		return -1
	}
	return max(m.TTL-m.ExpiresIn, 0)
}

// stalledRefreshes is how many refresh intervals a crawl goes without a
// refresh before it counts as stalled (Meta.Stalled).
const stalledRefreshes = 5

// Stalled reports whether no process has refreshed the crawl's keys for
// five refresh intervals (five minutes by default): its processes stopped
// or died, or every worker of every one has sat that long in a fetch or a
// wait for a permit, far past --timeout. A crawl with URLs queued or in
// flight is then StateStalled: `crawler run --crawl NAME` carries it on.
func (m Meta) Stalled() bool {
	return m.Idle() > stalledRefreshes*refreshInterval(m.TTL) // Idle is -1 without a TTL
}

// siteKeyName is "host" or "domain", told apart by what k makes of a host
// with a subdomain, or "custom".
func siteKeyName(k robots.SiteKey) string {
	if k == nil {
		return robots.SiteKeyHost
	}
	probe := &url.URL{Scheme: "http", Host: "a.b.example.com"}
	switch k(probe) {
	case robots.Site(probe):
		return robots.SiteKeyHost
	case robots.Domain(probe):
		return robots.SiteKeyDomain
	}
	return "custom"
}

func parseMeta(h map[string]string, pttl time.Duration) (Meta, error) {
	m := Meta{MaxPages: -1, ExpiresIn: max(pttl, 0)}
	var err error
	if m.Shards, err = strconv.Atoi(h["shards"]); err != nil || m.Shards < 1 || m.Shards > MaxShards {
		return m, fmt.Errorf("bad shard count %q", h["shards"])
	}
	if ms, err := strconv.ParseInt(h["created"], 10, 64); err == nil {
		m.Created = time.UnixMilli(ms)
	}
	m.MaxPerSite, _ = strconv.Atoi(h["max_per_site"])
	m.SiteKey = h["site_key"]
	if n, err := strconv.Atoi(h["max_pages"]); err == nil {
		m.MaxPages = n
	}
	if ms, err := strconv.ParseInt(h["ttl"], 10, 64); err == nil {
		m.TTL = time.Duration(ms) * time.Millisecond
	}
	if m.Scope, err = decodeRules(h["scope_rules"]); err != nil {
		return m, err
	}
	return m, nil
}

// Open is the Frontier of an existing crawl, and its Meta, read in one
// round trip; it writes nothing, and the Frontier's readers (Stats, Sites)
// write nothing either. It returns an error wrapping ErrNoCrawl when the
// crawl has no meta key under the prefix.
func Open(ctx context.Context, rdb redis.Cmdable, opts *Options) (*Frontier, Meta, error) {
	f := New(rdb, opts)
	if f.err != nil {
		return nil, Meta{}, f.err
	}
	pipe := rdb.Pipeline()
	h := pipe.HGetAll(ctx, f.meta)
	ttl := pipe.PTTL(ctx, f.meta)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, Meta{}, fmt.Errorf("frontier: open crawl %s: %w", f.o.Crawl, err)
	}
	if len(h.Val()) == 0 {
		return nil, Meta{}, fmt.Errorf("%w: %s under prefix %s", ErrNoCrawl, f.o.Crawl, f.o.Prefix)
	}
	m, err := parseMeta(h.Val(), ttl.Val())
	if err != nil {
		return nil, Meta{}, fmt.Errorf("frontier: open crawl %s: %w", f.o.Crawl, err)
	}
	l, err := f.newLayout(strconv.Itoa(m.Shards), h.Val()["seen_key"])
	if err != nil {
		return nil, Meta{}, err
	}
	f.rulesMu.Lock()
	f.rules, f.rulesSet = m.Scope, true
	f.rulesMu.Unlock()
	f.lay.Store(l)
	f.keptAt.Store(time.Now().UnixMilli()) // a reader refreshes nothing
	for _, sh := range l.shards {
		sh.kept.Store(time.Now().UnixMilli())
	}
	return f, m, nil
}

// Crawl states (CrawlInfo.State).
const (
	StateRunning = "running" // URLs queued or in flight
	StateStalled = "stalled" // URLs queued or in flight, but no process has worked on it lately (Meta.Stalled)
	StateLimit   = "limit"   // nothing queued or in flight; URLs wait past the page limit
	StateDone    = "done"    // nothing queued, in flight or waiting
	StateExpired = "expired" // in the registry, but its keys are gone
	// StateLost: its meta is gone but its shards' keys are not (Redis lost
	// the meta, or it expired first): a process cannot join it
	// (ErrMetaLost) until a running one puts the meta back, or it is
	// deleted.
	StateLost = "lost"
)

// CrawlInfo is one crawl as List finds it.
type CrawlInfo struct {
	Name  string
	State string
	Meta  Meta
	Stats Stats
}

// List reads every crawl under prefix, sorted by name: those in the
// registry and, by a SCAN of meta keys bounded by ScanBudget, those created
// before it. complete is false when the SCAN stopped at its budget (crawls
// created before the registry may be missing). It takes three round trips
// (on a Cluster, the SCAN takes one a master per scanCount keys).
func List(ctx context.Context, rdb redis.Cmdable, prefix string) (crawls []CrawlInfo, complete bool, err error) {
	if err := keyname.Check("prefix", prefix); err != nil {
		return nil, false, fmt.Errorf("frontier: list: %w", err)
	}
	names, complete, err := crawlNames(ctx, rdb, prefix)
	if err != nil {
		return nil, false, fmt.Errorf("frontier: list: %w", err)
	}
	crawls, reads, err := readCrawls(ctx, rdb, prefix, names)
	if err != nil {
		return nil, false, fmt.Errorf("frontier: list: %w", err)
	}
	for i := range crawls {
		if reads[i] == nil {
			continue
		}
		st := reads[i]()
		crawls[i].Stats = st
		crawls[i].State = StateOf(st, crawls[i].Meta)
	}
	return crawls, complete, nil
}

// crawlNames lists, sorted and without repeats, the crawls under prefix:
// those in the registry and those whose meta key a SCAN bounded by
// ScanBudget finds. complete is false when the SCAN stopped at its budget.
func crawlNames(ctx context.Context, rdb redis.Cmdable, prefix string) (names []string, complete bool, err error) {
	names, err = rdb.ZRange(ctx, registryKey(prefix), 0, -1).Result()
	if err != nil {
		return nil, false, err
	}
	start := prefix + ":{crawl:"
	metas, complete, err := scanKeys(ctx, rdb, globEscape(start)+"*}:meta", ScanBudget)
	if err != nil {
		return nil, false, err
	}
	for _, k := range metas {
		name := strings.TrimSuffix(strings.TrimPrefix(k, start), "}:meta")
		if keyname.Check("crawl", name) == nil && start+name+"}:meta" == k {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	return names, complete, nil
}

// readCrawls reads each named crawl's meta, in one round trip, and then its
// queue statistics, in another. A crawl whose meta is gone is
// StateExpired, or StateLost when keys of its first lostShards shards
// remain (read in the second round trip), and its read is nil; the others'
// reads give their Stats.
func readCrawls(ctx context.Context, rdb redis.Cmdable, prefix string, names []string) ([]CrawlInfo, []func() Stats, error) {
	start := prefix + ":{crawl:"
	pipe := rdb.Pipeline()
	hs := make([]*redis.MapStringStringCmd, len(names))
	ttls := make([]*redis.DurationCmd, len(names))
	for i, name := range names {
		k := start + name + "}:meta"
		hs[i], ttls[i] = pipe.HGetAll(ctx, k), pipe.PTTL(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, err
	}
	pipe = rdb.Pipeline()
	var crawls []CrawlInfo
	var reads []func() Stats
	left := map[int][]*redis.IntCmd{} // a meta-less crawl's shards' ready sets
	for i, name := range names {
		c := CrawlInfo{Name: name, State: StateExpired}
		if len(hs[i].Val()) == 0 {
			left[i] = lookShards(ctx, pipe, Options{Prefix: prefix, Crawl: name}, lostShards)
		}
		var l *layout
		if len(hs[i].Val()) > 0 {
			m, err := parseMeta(hs[i].Val(), ttls[i].Val())
			f := New(rdb, &Options{Prefix: prefix, Crawl: name})
			if err == nil && f.err == nil {
				c.Meta = m
				l, err = f.newLayout(strconv.Itoa(m.Shards), "") // no seen key: List only counts, it never hashes a URL
			}
			if err != nil {
				return nil, nil, fmt.Errorf("crawl %s: %w", name, err)
			}
		}
		crawls = append(crawls, c)
		if l != nil {
			reads = append(reads, queueStats(ctx, pipe, l))
		} else {
			reads = append(reads, nil)
		}
	}
	if len(reads) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, err
		}
	}
	for i, looks := range left {
		if found, _ := anyThere(looks); found { // an error: Exec's, returned above
			crawls[i].State = StateLost
		}
	}
	return crawls, reads, nil
}

// defaultShards is Options.Shards's default.
const defaultShards = 16

// lostShards is how many shards List looks at for keys of a crawl whose
// meta is gone (its shard count went with it): the default count. Every
// shard of a live crawl has its ready set once its processes' first
// refresh has run.
const lostShards = defaultShards

// StateOf is the state (StateRunning, StateStalled, StateLimit or
// StateDone) of a crawl whose meta m exists, with stats st.
func StateOf(st Stats, m Meta) string {
	switch {
	case (st.Queued > 0 || st.InFlight > 0) && m.Stalled():
		return StateStalled
	case st.Queued > 0 || st.InFlight > 0:
		return StateRunning
	case st.Over > 0:
		return StateLimit
	default:
		return StateDone
	}
}

// scanKeys is SCAN MATCH match over every master (one, but for a
// Cluster), walking at most budget keys a master; complete is false when
// it stopped there.
func scanKeys(ctx context.Context, rdb redis.Cmdable, match string, budget int) (keys []string, complete bool, err error) {
	scan := func(ctx context.Context, c redis.Cmdable) ([]string, bool, error) {
		var out []string
		var cursor uint64
		for walked := 0; walked < budget; walked += scanCount {
			ks, next, err := c.Scan(ctx, cursor, match, scanCount).Result()
			if err != nil {
				return nil, false, err
			}
			out = append(out, ks...)
			if cursor = next; cursor == 0 {
				return out, true, nil
			}
		}
		return out, false, nil
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return scan(ctx, rdb)
	}
	type part struct {
		keys     []string
		complete bool
	}
	parts := make(chan part, 64)
	done := make(chan struct{})
	complete = true
	go func() { // owned here: ends when parts is closed, below
		defer close(done)
		for p := range parts {
			keys = append(keys, p.keys...)
			complete = complete && p.complete
		}
	}()
	err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		ks, whole, err := scan(ctx, c)
		parts <- part{ks, whole}
		return err
	})
	close(parts)
	<-done
	if err != nil {
		return nil, false, err
	}
	return keys, complete, nil
}

// globEscape quotes s's glob characters for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
