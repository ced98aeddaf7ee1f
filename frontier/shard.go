package frontier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/luafn"
	"github.com/polite-crawler/polite/internal/luanums"
	"github.com/polite-crawler/polite/internal/siphash"
)

// layout is a crawl's shards, as stored when the crawl was created.
type layout struct {
	shards []*shard
	// key is the key of the crawl's fingerprints (its seen key, keyHex as
	// stored); nil ("") for a crawl created before crawls had one, whose
	// fingerprints are FNV-1a.
	key    *siphash.Key
	keyHex string
}

// shard is one hash tag's keys: common.lua names them. Its tag is
// "s<n>/crawl:<crawl>", which can equal neither another shard's tag (the
// digits end at the first '/') nor a crawl's own tag "crawl:<crawl>"; a
// crawl name has no braces, so the tag is the whole text between them.
type shard struct {
	n    int
	base string   // prefix of the shard's keys: queues, seen buckets
	keys []string // ready, inflight, counts, fly, rules, after (common.lua KEY_NAMES)
	// kept is when (unix ms) this process last had the shard's keys' TTLs
	// refreshed (common.lua keep).
	kept atomic.Int64
	// takes counts this process's takes on the shard (takeID).
	takes atomic.Uint64
	// instance is the last instance its scripts answered from (common.lua
	// instance_id; "" none yet, or as scripts).
	instance atomic.Pointer[string]
}

// seenBuckets is how many seen SETs a shard splits its fingerprints over,
// so each stays a compact intset (set-max-intset-entries, 512 by default)
// up to about 131,000 URLs a shard (CompactSeen). Past it a set is a hash
// table: some 77 bytes a URL rather than 9.
const seenBuckets = 256

// CompactSeen is how many URLs one shard can have seen before its seen
// sets stop being compact intsets, when Redis keeps an intset up to
// intsetEntries members (set-max-intset-entries): a crawl's sites spread
// over its shards, but each site's URLs all go to one.
func CompactSeen(intsetEntries int) int64 {
	return seenBuckets * int64(intsetEntries)
}

func newShard(o Options, n int) *shard {
	base := o.Prefix + ":{s" + strconv.Itoa(n) + "/crawl:" + o.Crawl + "}:"
	sh := &shard{n: n, base: base}
	for _, k := range []string{"ready", "inflight", "counts", "fly", "rules", "after"} {
		sh.keys = append(sh.keys, base+k)
	}
	return sh
}

// of is site's shard: FNV-1a 32 of its name modulo the shard count.
func (l *layout) of(site string) *shard {
	h := fnv.New32a()
	h.Write([]byte(site))
	return l.shards[h.Sum32()%uint32(len(l.shards))]
}

// fingerprint is what the seen sets keep of a normalised URL: SipHash-2-4
// under the crawl's seen key, so that nobody without the key (kept in the
// crawl's meta, made at random by the process that created the crawl) can
// make URLs whose fingerprints collide with others', and so keep them out
// of the crawl; FNV-1a 64 in a crawl created before crawls had a key. It
// is given to Redis as a decimal int64 (an intset member), with the bucket
// it goes in.
func (l *layout) fingerprint(norm string) (fp uint64, member, bucket string) {
	var v uint64
	if l.key != nil {
		v = l.key.Sum64(norm)
	} else {
		h := fnv.New64a()
		h.Write([]byte(norm))
		v = h.Sum64()
	}
	return v, strconv.FormatInt(int64(v), 10), strconv.Itoa(int(v >> 56))
}

// newSeenKey is a fresh random seen key, as meta.lua stores it: 32 hex
// digits.
func newSeenKey() string {
	b := make([]byte, siphash.KeySize)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// parseSeenKey is the key of a stored seen key, nil for "" (a crawl
// created before crawls had one).
func parseSeenKey(stored string) (*siphash.Key, error) {
	if stored == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(stored)
	if err != nil || len(b) != siphash.KeySize {
		return nil, fmt.Errorf("bad seen key (%d characters): want %d hex digits", len(stored), 2*siphash.KeySize)
	}
	k := siphash.NewKey(b)
	return &k, nil
}

// layout is the crawl's shards. The first call of a process records it
// in the crawl's meta (meta.lua: the shard count, Options.Shards or 1 with
// MaxPages, and a fresh seen key, if the crawl has none yet; its cap, site
// key, page limit and TTL in any case: see Meta) and in the prefix's
// registry of crawls (register.lua), and reads the crawl's shard count and
// seen key; they are then fixed for the Frontier's life.
//
// A crawl whose meta is gone while its shards' keys remain (the meta
// expired first, or Redis lost it: a restart without its data, a failover)
// cannot be joined: its seen sets hold fingerprints under a key nobody
// can read any more, and a new one would admit every URL seen before once
// more. Its running processes put the meta back (keepCrawl) within a
// refresh interval; a process that would create the meta over such shards
// takes its new meta away again and fails with ErrMetaLost.
func (f *Frontier) layout(ctx context.Context) (*layout, error) {
	if f.err != nil {
		return nil, f.err
	}
	if err := f.goneErr(); err != nil {
		return nil, err
	}
	if l := f.lay.Load(); l != nil {
		return l, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.lay.Load(); l != nil {
		return l, nil
	}
	n := f.o.Shards
	if f.o.MaxPages > 0 {
		n = 1
	}
	given := "0"
	if !f.o.Scope.IsZero() {
		given = "1"
	}
	key := newSeenKey()
	rec := &call{script: metaScript, keys: []string{f.meta},
		args: []any{n, f.o.Cap, siteKeyName(f.o.SiteKey), f.o.MaxPages, f.o.TTL.Milliseconds(), f.o.Scope.encode(), given, key}}
	reg := f.registerCall()
	// Whether the shards this call would create have keys already: read
	// before meta.lua runs, in the same round trip, and looked at only if
	// it created the meta (then no process had it to make them since).
	var there []*redis.IntCmd
	look := func(pipe redis.Pipeliner) func() error {
		there = lookShards(ctx, pipe, f.o, n)
		return nil
	}
	f.keptAt.Store(time.Now().UnixMilli()) // these calls keep meta and the registry entry
	f.pipelined(ctx, look, rec, reg)
	if err := rec.cmd.Err(); err != nil {
		return nil, fmt.Errorf("frontier: crawl %s: shard count: %w", f.o.Crawl, err)
	}
	if err := reg.cmd.Err(); err != nil {
		return nil, fmt.Errorf("frontier: crawl %s: register: %w", f.o.Crawl, err)
	}
	reply, _ := rec.cmd.StringSlice()
	if len(reply) != 4 {
		return nil, fmt.Errorf("frontier: crawl %s: meta: %d values", f.o.Crawl, len(reply))
	}
	if reply[3] == "1" {
		if found, err := anyThere(there); found || err != nil {
			// Take the meta this call made away (only it: its key), so
			// that the next process to try meets the same shards.
			undo := unmakeEval.Run(ctx, f.rdb, []string{f.meta}, key).Err()
			if err != nil {
				return nil, fmt.Errorf("frontier: crawl %s: shard keys: %w", f.o.Crawl, errors.Join(err, undo))
			}
			return nil, fmt.Errorf("%w: crawl %s under prefix %s. If processes still run on it, they put it back within %s: start this one then; "+
				"if none do, or it was deleted under them, `crawler delete --crawl %s` removes what is left (or it expires, its TTL after the last process left it)%s",
				ErrMetaLost, f.o.Crawl, f.o.Prefix, f.refreshEvery(), f.o.Crawl, undoNote(undo))
		}
		// A crawl made anew: the tombstone of one deleted under the name
		// (Delete) goes, now that no orphaned shard of it is in the way
		// (taken away sooner, a process of the deleted crawl would put
		// it back over its orphans), and the meta is marked confirmed: a
		// process of the old crawl stops at once at the sight of it, not
		// replacedAge later (keepMetaEval). Best effort: a tombstone left
		// expires, and an unconfirmed meta counts once replacedAge old.
		confirmEval.Run(ctx, f.rdb, []string{f.meta, f.tomb}, key)
	}
	if err := f.adopt(reply[1]); err != nil {
		return nil, err
	}
	l, err := f.newLayout(reply[0], reply[2])
	if err != nil {
		return nil, err
	}
	f.lay.Store(l)
	return l, nil
}

// lookShards queues on pipe an EXISTS of the ready set of each of the
// first n shards of o's crawl: a shard that has any keys has it (its
// sentinel, from its first refresh on), so they tell whether the crawl's
// shards outlived its meta (layout, List).
func lookShards(ctx context.Context, pipe redis.Pipeliner, o Options, n int) []*redis.IntCmd {
	looks := make([]*redis.IntCmd, n)
	for i := range n {
		looks[i] = pipe.Exists(ctx, newShard(o, i).keys[0])
	}
	return looks
}

// anyThere reports whether one of looks (lookShards, run) found its key,
// in order, or the error of the first that failed before one did.
func anyThere(looks []*redis.IntCmd) (bool, error) {
	for _, c := range looks {
		if err := c.Err(); err != nil {
			return false, err
		}
		if c.Val() > 0 {
			return true, nil
		}
	}
	return false, nil
}

// confirmEval takes a deleted crawl's tombstone (KEYS[2]) away and marks
// the meta (KEYS[1]) confirmed, if it holds the seen key ARGV[1]: the
// crawl made anew, once layout found no orphan in its way.
var confirmEval = redis.NewScript(`redis.call('DEL', KEYS[2])
if redis.call('HGET', KEYS[1], 'seen_key') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'confirmed', '1')
end
return 1`)

// unmakeEval deletes a crawl's meta (KEYS[1]) if its seen key is ARGV[1]:
// the one a process made over a lost meta's shards (layout).
var unmakeEval = redis.NewScript(`if redis.call('HGET', KEYS[1], 'seen_key') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

func undoNote(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf(" (and the meta this process made could not be taken away: %v)", err)
}

// adopt takes the crawl's stored scope rules ("": none stored yet, the
// zero rules meanwhile), or fails with ErrScopeConflict when this process
// gave others.
func (f *Frontier) adopt(stored string) error {
	rules, err := decodeRules(stored)
	if err != nil {
		return fmt.Errorf("frontier: crawl %s: %w", f.o.Crawl, err)
	}
	if stored != "" && !f.o.Scope.IsZero() && !f.o.Scope.Equal(rules) {
		return fmt.Errorf("%w: crawl %s follows %s; this process was given %s. "+
			"Give the same scope options, or none to follow the crawl's, or start another --crawl",
			ErrScopeConflict, f.o.Crawl, rules, f.o.Scope.Canonical())
	}
	f.rulesMu.Lock()
	f.rules, f.rulesSet = rules, stored != ""
	f.rulesMu.Unlock()
	return nil
}

// newLayout is the layout of a stored shard count and seen key.
func (f *Frontier) newLayout(stored, seenKey string) (*layout, error) {
	n, err := strconv.Atoi(stored)
	if err != nil || n < 1 || n > MaxShards {
		return nil, fmt.Errorf("frontier: crawl %s: bad shard count %q", f.o.Crawl, stored)
	}
	key, err := parseSeenKey(seenKey)
	if err != nil {
		return nil, fmt.Errorf("frontier: crawl %s: %w", f.o.Crawl, err)
	}
	l := &layout{key: key, keyHex: seenKey}
	for i := range n {
		l.shards = append(l.shards, newShard(f.o, i))
	}
	return l, nil
}

// registerCall notes the crawl in the registry (register.lua).
func (f *Frontier) registerCall() *call {
	return &call{script: registerScript, keys: []string{registryKey(f.o.Prefix)}, args: []any{f.o.Crawl, f.o.TTL.Milliseconds()}}
}

// args are a shard script's ARGV: the key base, common.lua's numbers and
// then the script's own (own) packed in one argument (luanums), then more;
// and whether the call asks for the shard's keys' TTLs to be refreshed.
// Each process asks for that with its first call on a shard and then at
// most once a minute (or a quarter of the TTL): not on every call. The
// script refreshes them unless a process gave them this process's TTL
// within the last half of that (common.lua keep), so a fleet pays for it
// about once.
// A quiet call (makeCall) never asks.
func (f *Frontier) args(sh *shard, own []float64, quiet bool, more ...any) ([]any, bool) {
	refresh := int64(0)
	now, last := time.Now().UnixMilli(), sh.kept.Load()
	if every := f.refreshEvery().Milliseconds(); !quiet && now-last >= every && sh.kept.CompareAndSwap(last, now) {
		refresh = max(every/2, 1)
	}
	n := append([]float64{float64(f.o.TTL.Milliseconds()), float64(f.o.Visibility.Milliseconds()), float64(f.o.Cap),
		float64(f.o.MaxPages), float64(refresh), float64(f.o.Park.Milliseconds())}, own...)
	return append([]any{sh.base, luanums.Pack(n...)}, more...), refresh != 0
}

func (f *Frontier) refreshEvery() time.Duration { return refreshInterval(f.o.TTL) }

// refreshInterval is how often a process refreshes the TTLs of a crawl
// whose keys live ttl: once a minute, or every quarter of ttl if shorter.
func refreshInterval(ttl time.Duration) time.Duration { return min(time.Minute, ttl/4) }

// keepCrawl refreshes the TTLs of the crawl's own keys (meta, scope) and of
// its registry entry, at most once a minute per process: the shards'
// scripts keep their own keys, but cannot reach these (other slots). The
// meta goes first, in a round trip of its own (once a minute: no burden),
// so that a crawl found deleted or made anew (keepMeta) gets nothing more
// from this process: keepCrawl then returns the error (wrapping
// ErrCrawlGone) and queues nothing. Else the scope and registry refreshes
// are queued on pipe, and it returns, to go in the same round trip, a call
// that only refreshes (add.lua with nothing to add) for each shard this
// process has not asked to refresh within two minutes: one no worker
// calls, while every worker stays on shards with sites ready, would
// otherwise expire with its queues and seen sets in the middle of the
// crawl, and its URLs be lost. A shard another process refreshed in the
// last half minute is left as it is (common.lua keep), so that costs a
// fleet little.
func (f *Frontier) keepCrawl(ctx context.Context, pipe redis.Pipeliner) ([]*call, error) {
	lay := f.lay.Load()
	if lay == nil { // not joined yet (or invalid Options): layout records the crawl
		return nil, nil
	}
	every := f.refreshEvery().Milliseconds()
	now, last := time.Now().UnixMilli(), f.keptAt.Load()
	if !f.keepDue(now, last) || !f.keptAt.CompareAndSwap(last, now) {
		return nil, nil
	}
	if err := f.keepMeta(ctx, lay); err != nil {
		return nil, err
	}
	pipe.PExpire(ctx, f.scope, f.o.TTL)
	reg := f.registerCall()
	registerEval.Eval(ctx, pipe, reg.keys, reg.args...) // once a minute: the script's text is no burden
	// Twice the interval: a shard this process calls asks itself (args),
	// and its refresh is not all moved into this round trip.
	return f.refreshes(lay, now, 2*every), nil
}

// keepMeta refreshes the TTL of the crawl's meta, which puts the meta back
// as this process knows it (shard count, seen key, scope rules, limits) if
// it is gone while the process works on the crawl: Redis lost it (a
// restart without its data, a failover) or it expired first. Else a
// process joining would make another seen key, and admit every URL seen
// before once more (layout refuses to). A meta gone because Delete deleted
// the crawl (its tombstone is there) is not put back, and a meta with
// another seen key than this process's is another crawl of the same name,
// made since (confirmed by its maker's layout, or replacedAge old: an
// unconfirmed younger one is looked at again then): either way keepMeta
// returns an error wrapping ErrCrawlGone, and every later call of the
// Frontier fails with it. A refresh that fails otherwise is let be: the
// next one looks again.
func (f *Frontier) keepMeta(ctx context.Context, lay *layout) error {
	f.rulesMu.Lock()
	rules := ""
	if f.rulesSet {
		rules = f.rules.encode()
	}
	f.rulesMu.Unlock()
	n, err := keepMetaEval.Eval(ctx, f.rdb, []string{f.meta, f.tomb}, f.o.TTL.Milliseconds(), len(lay.shards), lay.keyHex,
		rules, f.o.Cap, siteKeyName(f.o.SiteKey), f.o.MaxPages, replacedAge.Milliseconds()).Int()
	var why string
	switch {
	case err != nil:
		return nil
	case n == keptDeleted:
		why = "deleted (crawler delete)"
	case n == keptReplaced:
		why = "deleted and made anew by another process (it has another seen key)"
	case n == keptYoung:
		// Look again once it is old enough to tell (or at the next refresh
		// if that is sooner).
		f.keptAt.Store(time.Now().Add(min(replacedAge, f.refreshEvery()) - f.refreshEvery()).UnixMilli())
		return nil
	default:
		return nil
	}
	err = f.GoneError(why + " while this process worked on it")
	if f.gone.CompareAndSwap(nil, &err) {
		f.leftovers.Store(true) // pipelined expires them once no call is on its way
	}
	return f.goneErr()
}

// goneErr is the error every call fails with once keepMeta found the
// crawl gone (wrapping ErrCrawlGone), or nil.
func (f *Frontier) goneErr() error {
	if err := f.gone.Load(); err != nil {
		return *err
	}
	return nil
}

// expireLeftovers gives every key of lay's shards that exists and has no
// TTL the crawl's TTL, once this process found its crawl gone (keepMeta):
// what its calls made again after a delete, before it knew (a
// settlement's links, its shard's counts), would else live for good, as
// shard scripts set TTLs only on a refresh. It first waits for the calls
// of the process on their way (sending): none is sent after gone is set.
// Keys with a TTL (those of a crawl of the name made anew) keep theirs.
// Best effort, bounded by leftoversTimeout.
func (f *Frontier) expireLeftovers(ctx context.Context, lay *layout) {
	f.sending.Lock() // a barrier: every sender that passed the gone check is done
	f.sending.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leftoversTimeout)
	defer cancel()
	keys := slotKeys{}
	if _, _, err := addShardKeys(ctx, f.rdb, lay, keys); err != nil {
		return
	}
	pipe := f.rdb.Pipeline()
	for _, ks := range keys {
		for _, k := range ks {
			pipe.ExpireNX(ctx, k, f.o.TTL)
		}
	}
	_, _ = pipe.Exec(ctx)
}

// leftoversTimeout bounds expireLeftovers.
const leftoversTimeout = 10 * time.Second

// keepMetaEval's replies besides 0 (refreshed) and 1 (put back).
const (
	keptDeleted  = 2
	keptReplaced = 3
	keptYoung    = 4
)

// replacedAge is how old a meta with another seen key than the process's
// must be before keepMeta takes it for a crawl made anew, unless its maker
// confirmed it (confirmEval): an unconfirmed younger one may be that of a
// process that has just joined a crawl whose meta was lost, and is about
// to take it away again (layout's ErrMetaLost), after which this process
// puts the crawl's own back.
const replacedAge = 10 * time.Second

// keepMetaEval is keepMeta's script, once a minute: its text is no
// burden. KEYS[1] meta, KEYS[2] the tombstone Delete leaves; ARGV[1] TTL
// ms, ARGV[2] shard count, ARGV[3] seen key (empty: none), ARGV[4] scope
// rules (empty: none known), then the limits as meta.lua records them.
// ARGV[8] how old (ms) a meta with another seen key must be to count as
// another crawl unless confirmed (layout's confirmEval; a meta put back
// here is too). Returns 0 if it refreshed the meta, 1 if it put the meta
// back, keptDeleted if the crawl was deleted (the tombstone there, with no
// meta or a meta of another seen key), keptReplaced if the meta has
// another seen key and is confirmed or older than ARGV[8], and keptYoung
// otherwise (left as it is).
var keepMetaEval = redis.NewScript(`local key = redis.call('HGET', KEYS[1], 'seen_key') or ''
if key ~= '' or redis.call('EXISTS', KEYS[1]) == 1 then
  if key ~= ARGV[3] then
    if redis.call('EXISTS', KEYS[2]) == 1 then
      return 2 -- this process's crawl was deleted, whoever made the meta since
    end
    if redis.call('HEXISTS', KEYS[1], 'confirmed') == 1 then
      return 3
    end
    local t = redis.call('TIME')
    local made = tonumber(redis.call('HGET', KEYS[1], 'created') or '0') or 0
    if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - made < tonumber(ARGV[8]) then
      return 4
    end
    return 3
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return 0
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 2
end
redis.call('HSET', KEYS[1], 'shards', ARGV[2], 'max_per_site', ARGV[5], 'site_key', ARGV[6], 'max_pages', ARGV[7], 'ttl', ARGV[1], 'confirmed', '1')
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'seen_key', ARGV[3])
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'scope_rules', ARGV[4])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1`)

// refreshes are calls that only refresh (add.lua with nothing to add)
// lay's shards whose TTLs this process last asked to refresh age ms or
// more before now (unix ms): those this caller is the one to ask for
// (args; another caller may have just asked).
func (f *Frontier) refreshes(lay *layout, now, age int64) []*call {
	var calls []*call
	for _, sh := range lay.shards {
		if now-sh.kept.Load() < age {
			continue
		}
		if c := f.newCall(addScript, sh, []float64{0, 0}); c.keeps {
			calls = append(calls, c)
		}
	}
	return calls
}

// keepDue reports whether a round trip at now (unix ms) refreshes the
// crawl's TTLs (keepCrawl), the last refresh having been at last.
func (f *Frontier) keepDue(now, last int64) bool {
	return now-last >= f.refreshEvery().Milliseconds()
}

// batch is the add.lua quadruples of one shard's new URLs, and their
// fingerprints, remembered (seenCache) once the call that sent them
// answers, unless the cache was emptied after it was sent.
type batch struct {
	quads []any
	fps   []uint64
}

// admission adds to by (nil: none yet) the batches of urls, found at depth
// and hops on page from ("" for seeds; kept in each item, Item.From), by
// shard, and returns it. A URL this process knows seen is left out.
func (f *Frontier) admission(lay *layout, by map[*shard]*batch, depth, hops int, from string, urls []string) map[*shard]*batch {
	if f.o.MaxDepth > 0 && depth > f.o.MaxDepth {
		return by
	}
	for _, raw := range urls {
		norm, site, err := f.normalize(raw)
		if err != nil {
			continue
		}
		fp, member, b := lay.fingerprint(norm)
		if f.seen.has(fp) {
			continue
		}
		item, _ := json.Marshal(Item{URL: norm, Depth: depth, Hops: hops, From: from})
		if by == nil {
			by = map[*shard]*batch{}
		}
		sh := lay.of(site)
		bt := by[sh]
		if bt == nil {
			bt = &batch{}
			by[sh] = bt
		}
		bt.quads = append(bt.quads, member, b, site, string(item))
		bt.fps = append(bt.fps, fp)
	}
	return by
}

// args are the batch's quadruples as script arguments (none for nil).
func (bt *batch) args() []any {
	if bt == nil {
		return nil
	}
	return bt.quads
}

// sent remembers the batch's fingerprints as seen once c, the call that
// sent them, answered without error (err), unless the cache was emptied
// since c was sent (c may have run before Redis lost the seen sets), or c
// dropped some of them at their site's queue bound (not seen: sent again).
func (f *Frontier) sent(bt *batch, c *call, err error) {
	if err == nil && bt != nil && c.full == 0 {
		f.seen.add(bt.fps, c.gen)
	}
}

// call is one script call, run on its own or queued on a pipeline.
type call struct {
	script *luafn.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	sh     *shard
	gen    uint64 // the seen cache's generation when it was sent (pipelined)
	keeps  bool   // it asks for the shard's TTLs to be refreshed (args)
	quiet  bool   // it asks for no refresh of anything (makeCall)
	full   int64  // links it dropped at their site's queue bound (answer)
}

// newCall is a call of script on sh with ARGV args(sh, own, more...).
func (f *Frontier) newCall(script *luafn.Script, sh *shard, own []float64, more ...any) *call {
	return f.makeCall(script, sh, own, false, more...)
}

// makeCall is newCall, quiet or not. A quiet call refreshes nothing:
// neither its shard's TTLs (args) nor, when a round trip carries only
// quiet calls, the crawl's (keepCrawl). An idle process's take on a
// one-shard crawl (Next) is one: on a crawl deleted under the process, a
// refresh would make the keys again.
func (f *Frontier) makeCall(script *luafn.Script, sh *shard, own []float64, quiet bool, more ...any) *call {
	args, keeps := f.args(sh, own, quiet, more...)
	// Where keys never move, only the ready set: common.lua makes the
	// others' names (begin). On a Cluster every one (luafn.Slotless).
	keys := sh.keys
	if f.oneKey {
		keys = keys[:1]
	}
	return &call{script: script, keys: keys, args: args, sh: sh, keeps: keeps, quiet: quiet}
}

// failed notes that c did not run (or its answer was lost): if it was to
// refresh its shard's TTLs, the next call of the process will. The seen
// cache is emptied too: the call's node may have failed over, losing writes
// not yet on its replica (the new master's instance tells that too, at
// its first answer: noteInstance).
func (f *Frontier) failed(c *call) {
	f.seen.clear()
	c.unkeep()
}

// withhold gives c, not sent, err for its outcome, as if Redis had
// answered it so (unanswered then tells it apart from a lost reply).
func (c *call) withhold(ctx context.Context, err error) {
	c.cmd = redis.NewCmd(ctx)
	c.cmd.SetErr(err)
}

// unkeep has the next call on c's shard ask for the refresh c asked for,
// if any: c did not do it.
func (c *call) unkeep() {
	if c.sh != nil && c.keeps {
		c.sh.kept.Store(0)
	}
}

// run runs the call on its own: FCALL (the library loaded again where
// Redis lost it), or, where Redis has no Functions, EVALSHA, or EVAL when
// Redis does not know the script.
func (c *call) run(ctx context.Context, fn *luafn.Conn) {
	c.cmd = c.script.Run(ctx, fn, c.keys, c.args...)
}

// pipelined runs, in one round trip, the commands also queues (if not nil)
// and then calls: combined with other callers' of the process that come
// while all its lanes are taken (combiner). On a Cluster the pipeline goes to
// each node at once, in order within a node. A call that finds Redis without its script
// (restarted without its data, FUNCTION FLUSH) did nothing, and runs again
// on its own, in order, after the others; the process's seen cache is
// emptied then, and when a call fails (see seenCache). It returns what
// also returned.
func (f *Frontier) pipelined(ctx context.Context, also func(redis.Pipeliner) func() error, calls ...*call) (after func() error) {
	pipe := f.rdb.Pipeline()
	if also != nil {
		after = also(pipe)
	}
	f.sending.RLock()
	gone := f.goneErr()
	if gone == nil && !allQuiet(calls) {
		var refresh []*call
		refresh, gone = f.keepCrawl(ctx, pipe)
		calls = append(calls[:len(calls):len(calls)], refresh...) // a copy: the caller's slice is left as it was
	}
	if gone != nil {
		f.sending.RUnlock()
		// The crawl is gone (keepCrawl): nothing more of this process goes
		// to its keys; also's commands (a permit's release) still do.
		for _, c := range calls {
			c.withhold(ctx, gone)
		}
		f.comb.exec(ctx, f.rdb, pipe.Cmds())
		if lay := f.lay.Load(); lay != nil && f.leftovers.CompareAndSwap(true, false) {
			f.expireLeftovers(ctx, lay)
		}
		return after
	}
	for _, c := range calls {
		c.gen = f.seen.generation()
		c.cmd = c.script.Queue(ctx, f.fn, pipe, c.keys, c.args...)
	}
	f.comb.exec(ctx, f.rdb, pipe.Cmds()) // each command's outcome is in its cmd
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil && luafn.Missing(err) {
			f.seen.clear() // Redis restarted without its data or was flushed: the seen sets may be gone too
			c.gen = f.seen.generation()
			c.cmd = c.script.Rerun(ctx, f.fn, c.keys, c.args...)
		}
		if c.cmd.Err() != nil {
			f.failed(c)
		}
	}
	f.sending.RUnlock()
	return after
}

// allQuiet reports whether calls are all quiet (makeCall), and some.
func allQuiet(calls []*call) bool {
	for _, c := range calls {
		if !c.quiet {
			return false
		}
	}
	return len(calls) > 0
}

// noteInstance notes the instance a script of sh answered from: another
// than the last (Redis restarted, or a replica took over, since) empties
// the seen cache, before the answer's own batch is remembered, which then
// is not (sent).
func (f *Frontier) noteInstance(sh *shard, inst string) {
	if sh == nil || inst == "" {
		return
	}
	if old := sh.instance.Swap(&inst); old != nil && *old != inst {
		f.seen.clear()
	}
}

// answer is a shard script's reply (see settle.lua).
type answer struct {
	settled bool
	repeat  bool // the answer to an earlier send of the call (common.lua answered)
	added   int
	took    int64 // 1: it, 0: empty, -1: not asked
	it      Item
	empty   *EmptyError
}

func (f *Frontier) answer(c *call) (answer, error) {
	v, err := c.cmd.Text()
	if err != nil {
		return answer{}, err
	}
	const head = 8 * 8 // common.lua reply: 8 numbers, the instance, the member
	if len(v) < head {
		return answer{}, fmt.Errorf("script returned %d bytes, want %d and more", len(v), head)
	}
	n, err := luanums.Ints(v[:head])
	if err != nil {
		return answer{}, fmt.Errorf("script reply: %w", err)
	}
	inst, member, _ := strings.Cut(v[head:], "\n")
	f.noteInstance(c.sh, inst)
	// settled is 1 or 0; plus 2 in an answer common.lua remembered (repeat).
	a := answer{settled: n[0]%2 == 1, repeat: n[0] >= 2, added: int(n[1]), took: n[3]}
	c.full = n[7]
	f.noteScopeLen(n[2])
	switch a.took {
	case 1:
		_, rest, ok1 := strings.Cut(member, "\n") // past the take's id
		site, raw, ok2 := strings.Cut(rest, "\n")
		if !ok1 || !ok2 {
			return a, fmt.Errorf("bad in-flight member %q", member)
		}
		if err := json.Unmarshal([]byte(raw), &a.it); err != nil {
			return a, fmt.Errorf("bad item %q: %w", raw, err)
		}
		a.it.Site = site
		a.it.ID = member // its in-flight member (common.lua)
		a.it.More = n[4] == 1
	case 0:
		a.empty = &EmptyError{Queued: n[4], InFlight: n[5], Wait: time.Second}
		if n[6] >= 0 {
			a.empty.Wait = time.Duration(n[6]) * time.Millisecond
		}
	}
	return a, nil
}
