package frontier

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A crawl's scope is the set of sites whose links it follows: the sites of
// its seeds, given by whichever processes seeded it. It lives in Redis with
// the crawl (a SET in the crawl's own hash tag, kept as long as its other keys),
// not in a process's flags, so a worker that joins a crawl without seeds
// follows the same links as the one that seeded it. It only grows, so its
// size is its version: Seed notes it in every shard's counts, Next reports it at no cost, and ScopeLen tells a
// worker when its copy is out of date.

// Seed admits urls at depth 0, like Add, and adds their sites to the crawl's
// scope, in one step: a worker that takes a seed finds its site in the
// scope. Seeding again with the same URLs (several processes given the same
// seeds) admits nothing twice. Unlike Add, it admits nothing when any URL is
// not an absolute http(s) URL, and says which.
func (f *Frontier) Seed(ctx context.Context, urls ...string) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	var bad []error
	for _, u := range urls {
		if _, _, err := Normalize(u); err != nil {
			bad = append(bad, err)
		}
	}
	if len(bad) > 0 {
		return 0, fmt.Errorf("frontier: seed: %w", errors.Join(bad...))
	}
	lay, err := f.layout(ctx)
	if err != nil {
		return 0, err
	}
	sites := make([]any, 0, len(urls))
	for _, u := range urls {
		_, site, _ := Normalize(u)
		sites = append(sites, site)
	}
	// The scope lives in the crawl's own tag; each shard notes its size in
	// its counts, for Next to report (ScopeLen).
	pipe := f.rdb.Pipeline()
	var rules *redis.StringCmd
	if len(sites) > 0 && !f.RulesStored() {
		// The first to seed a crawl with none stored gives its rules
		// (none, here: a process given some stored them on joining),
		// before the seeds' sites can be seen by anyone.
		pipe.HSetNX(ctx, f.meta, "scope_rules", f.o.Scope.encode())
		rules = pipe.HGet(ctx, f.meta, "scope_rules")
	}
	if len(sites) > 0 {
		pipe.SAdd(ctx, f.scope, sites...)
	}
	size := pipe.SCard(ctx, f.scope)
	pipe.PExpire(ctx, f.scope, f.o.TTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("frontier: seed: %w", err)
	}
	if rules != nil {
		if err := f.adopt(rules.Val()); err != nil {
			return 0, err
		}
	}
	f.noteScopeLen(size.Val())
	by := f.admission(lay, nil, 0, 0, "", urls)
	calls := make([]*call, len(lay.shards))
	batches := make([]*batch, len(lay.shards))
	for i, sh := range lay.shards {
		calls[i], batches[i] = f.addCall(sh, size.Val(), 0, by[sh]), by[sh]
	}
	f.pipelined(ctx, nil, calls...)
	n, err := f.added(calls, batches)
	if err != nil {
		return n, fmt.Errorf("frontier: seed: %w", err)
	}
	return n, nil
}

// Scope reads the crawl's scope: the sites whose links it follows (see
// Seed). It is empty until a process seeds the crawl.
func (f *Frontier) Scope(ctx context.Context) ([]string, error) {
	if f.err != nil {
		return nil, f.err
	}
	sites, err := f.rdb.SMembers(ctx, f.scope).Result()
	if err != nil {
		return nil, fmt.Errorf("frontier: scope: %w", err)
	}
	f.noteScopeLen(int64(len(sites)))
	return sites, nil
}

// ScopeLen is the size of the crawl's scope as Redis last reported it, to
// Next, Scope, or DoneNext (one take in 8 of the process's on a shard, so
// a settlement spends no command on it), without a round trip of its own. The scope
// only grows, so a copy read by Scope is out of date exactly when ScopeLen
// exceeds its length. It is 0 until one of those calls finds a scope.
func (f *Frontier) ScopeLen() int {
	return int(f.scopeLen.Load())
}

// noteScopeLen raises ScopeLen to n; a smaller n (an answer overtaken by a
// later one) leaves it.
func (f *Frontier) noteScopeLen(n int64) {
	for i := 0; i < 100; i++ { // a few tries: a racing caller raised it meanwhile
		cur := f.scopeLen.Load()
		if n <= cur || f.scopeLen.CompareAndSwap(cur, n) {
			return
		}
	}
}

// Claim reports whether this call is the first of the crawl's processes to
// claim task (a name such as "sitemaps http://example.com/"), so that work
// done once per crawl, whoever seeded it, is done once. The claim lasts as
// long as the crawl's keys (Options.TTL); task is hashed into the key, so
// any text will do.
func (f *Frontier) Claim(ctx context.Context, task string) (bool, error) {
	if f.err != nil {
		return false, f.err
	}
	h := fnv.New64a()
	h.Write([]byte(task))
	key := strings.TrimSuffix(f.meta, "meta") + "claim:" + strconv.FormatUint(h.Sum64(), 16)
	ok, err := f.rdb.SetNX(ctx, key, task, f.o.TTL).Result()
	if err != nil {
		return false, fmt.Errorf("frontier: claim %q: %w", task, err)
	}
	return ok, nil
}

// Rules are the crawl's scope rules (ScopeRules) as stored with it: the
// first given, by a process given scope options or by the first to seed
// it (its options or none), which every process applies. The first call
// of a process joins the crawl (one round trip, which Seed, Next or Add
// would make anyway); later ones make none once the crawl has stored
// rules. Until then (a process that joined before the crawl was seeded)
// each call reads them again, and they are the zero rules meanwhile
// (RulesStored reports which). It fails with ErrScopeConflict if
// Options.Scope gives rules that differ.
func (f *Frontier) Rules(ctx context.Context) (ScopeRules, error) {
	if _, err := f.layout(ctx); err != nil {
		return ScopeRules{}, err
	}
	if f.RulesStored() {
		f.rulesMu.Lock()
		defer f.rulesMu.Unlock()
		return f.rules, nil
	}
	stored, err := f.rdb.HGet(ctx, f.meta, "scope_rules").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return ScopeRules{}, fmt.Errorf("frontier: crawl %s: scope rules: %w", f.o.Crawl, err)
	}
	if err := f.adopt(stored); err != nil {
		return ScopeRules{}, err
	}
	f.rulesMu.Lock()
	defer f.rulesMu.Unlock()
	return f.rules, nil
}

// RulesStored reports whether the crawl had stored its scope rules when
// this process last read them (see Rules).
func (f *Frontier) RulesStored() bool {
	f.rulesMu.Lock()
	defer f.rulesMu.Unlock()
	return f.rulesSet
}
