package frontier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redisacl"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/robots"
	"github.com/redis/go-redis/v9"
)

// join is another process on f's crawl, with its own options.
func join(f *Frontier, o Options) *Frontier {
	o.Prefix, o.Crawl = f.o.Prefix, f.o.Crawl
	return New(f.rdb, &o)
}

// notTomb is keys without the tombstones Delete leaves (tombTTL).
func notTomb(keys []string) []string {
	return slices.DeleteFunc(keys, func(k string) bool { return strings.HasSuffix(k, "}:deleted") })
}

func pages(n int, from int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprintf("http://a.example/%d", i))
	}
	return out
}

// A crawl that reached its page limit keeps the URLs found past it; a
// later process with a higher limit (and then one with none) continues
// with them, oldest first, when it seeds, with or without URLs.
func TestMaxPagesContinues(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxPages: 3})
	if n, err := f.Seed(ctx, "http://a.example/0"); err != nil || n != 1 {
		t.Fatalf("Seed: %d, %v", n, err)
	}
	if n, err := f.Add(ctx, 1, pages(5, 1)...); err != nil || n != 2 {
		t.Fatalf("Add: %d, %v; want 2 (limit 3)", n, err)
	}
	if got := drain(t, ctx, f); !slices.Equal(got, pages(3, 0)) {
		t.Fatalf("first run fetched %v", got)
	}
	st, _ := f.Stats(ctx)
	if st.Admitted != 3 || st.Over != 3 || st.Seen != 6 || st.Dropped != 0 {
		t.Fatalf("stats at the limit %+v; want 3 admitted, 3 over", st)
	}
	if _, err := f.Add(ctx, 1, "http://a.example/3"); err != nil { // found again: still one
		t.Fatal(err)
	}
	if st, _ := f.Stats(ctx); st.Over != 3 {
		t.Fatalf("a URL found again past the limit was kept twice: %+v", st)
	}

	g := join(f, Options{MaxPages: 5})
	if n, err := g.Seed(ctx); err != nil || n != 2 {
		t.Fatalf("Seed with limit 5: %d, %v; want 2 admitted from the overflow", n, err)
	}
	if got := drain(t, ctx, g); !slices.Equal(got, pages(2, 3)) {
		t.Fatalf("second run fetched %v, want %v", got, pages(2, 3))
	}
	if st, _ := g.Stats(ctx); st.Admitted != 5 || st.Over != 1 || st.Done != 5 {
		t.Fatalf("stats after the second run %+v", st)
	}
	h := join(f, Options{})
	if n, err := h.Seed(ctx, "http://a.example/0"); err != nil || n != 1 {
		t.Fatalf("Seed with no limit: %d, %v; want the last one", n, err)
	}
	if got := drain(t, ctx, h); !slices.Equal(got, pages(1, 5)) {
		t.Fatalf("third run fetched %v", got)
	}
	if st, _ := h.Stats(ctx); st.Admitted != 6 || st.Over != 0 || st.Done != 6 || st.Seen != 6 {
		t.Fatalf("stats at the end %+v", st)
	}
}

// Past the overflow's bound, new URLs are dropped, counted, and not kept
// as seen: found again once the limit allows, they are admitted.
func TestOverflowBound(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxPages: 1})
	const bound = 10000 // common.lua OVERFLOW
	if n, err := f.Add(ctx, 0, pages(bound+3, 0)...); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	st, _ := f.Stats(ctx)
	if st.Admitted != 1 || st.Over != bound || st.Dropped != 2 || st.Seen != bound+1 {
		t.Fatalf("stats %+v; want 1 admitted, %d over, 2 dropped", st, bound)
	}
	if ttl := f.rdb.PTTL(ctx, f.lay.Load().shards[0].base+"overflow").Val(); ttl <= 0 {
		t.Fatalf("overflow TTL %v", ttl)
	}
	g := join(f, Options{MaxPages: bound + 10})
	if n, err := g.Seed(ctx, "http://a.example/0"); err != nil || n != bound { // seen: only the refill admits
		t.Fatalf("refill: %d, %v", n, err)
	}
	if n, err := g.Add(ctx, 1, pages(3, bound)...); err != nil || n != 2 {
		t.Fatalf("the dropped URLs found again: %d admitted, %v; want 2", n, err)
	}
}

// Every process notes its crawl in the registry; List finds registered
// crawls, those created before the registry (by SCAN) and registry entries
// whose keys are gone, each with its state and what its meta records.
func TestList(t *testing.T) {
	ctx := ctxT(t)
	prefix := fmt.Sprintf("list%d", crawls.Add(1))
	running := newFrontier(t, Options{Prefix: prefix, Cap: 2, TTL: time.Hour})
	running.Seed(ctx, "http://a.example/", "http://b.example/")
	done := newFrontier(t, Options{Prefix: prefix, Shards: 4})
	done.Seed(ctx, "http://a.example/")
	drain(t, ctx, done)
	limit := newFrontier(t, Options{Prefix: prefix, MaxPages: 1})
	limit.Seed(ctx, "http://a.example/", "http://a.example/2")
	drain(t, ctx, limit)
	old := newFrontier(t, Options{Prefix: prefix})
	old.Seed(ctx, "http://a.example/")
	reg := registryKey(prefix)
	if ttl := old.rdb.PTTL(ctx, reg).Val(); ttl < time.Hour-time.Minute {
		t.Fatalf("registry TTL %v; want the longest crawl's (1h)", ttl)
	}
	old.rdb.ZRem(ctx, reg, old.o.Crawl) // as if created before the registry
	old.rdb.ZAdd(ctx, reg, redis.Z{Score: 1e14, Member: "ghost"})
	newFrontier(t, Options{Prefix: prefix + "x"}).Seed(ctx, "http://a.example/") // another prefix

	got, complete, err := List(ctx, running.rdb, prefix)
	if err != nil || !complete {
		t.Fatalf("List: %v, complete %v", err, complete)
	}
	want := map[string]string{running.o.Crawl: StateRunning, done.o.Crawl: StateDone, limit.o.Crawl: StateLimit,
		old.o.Crawl: StateRunning, "ghost": StateExpired}
	if len(got) != len(want) {
		t.Fatalf("List found %+v; want %v", got, want)
	}
	for _, c := range got {
		if want[c.Name] != c.State {
			t.Errorf("crawl %s: state %q, want %q (%+v)", c.Name, c.State, want[c.Name], c)
		}
	}
	m := got[slices.IndexFunc(got, func(c CrawlInfo) bool { return c.Name == running.o.Crawl })]
	if m.Meta.Shards != 16 || m.Meta.MaxPerSite != 2 || m.Meta.SiteKey != "host" || m.Meta.MaxPages != 0 ||
		m.Meta.TTL != time.Hour || m.Meta.ExpiresIn <= 0 || time.Since(m.Meta.Created) > time.Minute || m.Stats.Queued != 2 {
		t.Errorf("running crawl %+v", m)
	}
	l := got[slices.IndexFunc(got, func(c CrawlInfo) bool { return c.Name == limit.o.Crawl })]
	if l.Meta.Shards != 1 || l.Meta.MaxPages != 1 || l.Stats.Over != 1 || l.Stats.Done != 1 {
		t.Errorf("crawl at its limit %+v", l)
	}
}

// Open reads an existing crawl and writes nothing; its Meta has the limits
// of the last process to join. An unknown crawl is ErrNoCrawl, and stays
// unknown.
func TestOpen(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxPages: 7, Cap: 5, TTL: 2 * time.Hour})
	f.Seed(ctx, "http://a.example/")
	g, m, err := Open(ctx, f.rdb, &Options{Crawl: f.o.Crawl})
	if err != nil || m.Shards != 1 || m.MaxPages != 7 || m.MaxPerSite != 5 || m.TTL != 2*time.Hour {
		t.Fatalf("Open: %+v, %v", m, err)
	}
	if st, err := g.Stats(ctx); err != nil || st.Queued != 1 {
		t.Fatalf("Stats of the opened crawl: %+v, %v", st, err)
	}
	if v := f.rdb.HGet(ctx, f.meta, "max_pages").Val(); v != "7" {
		t.Fatalf("a reader changed the crawl's meta: max_pages %q", v)
	}
	join(f, Options{Cap: 4, MaxPages: 9, SiteKey: robots.Domain}).Seed(ctx, "http://b.example/")
	if _, m, err := Open(ctx, f.rdb, &Options{Crawl: f.o.Crawl}); err != nil || m.MaxPerSite != 4 || m.MaxPages != 9 ||
		m.SiteKey != "domain" || m.Shards != 1 || m.TTL != 24*time.Hour {
		t.Fatalf("Open after another process joined: %+v, %v; want its limits", m, err)
	}
	_, _, err = Open(ctx, f.rdb, &Options{Crawl: f.o.Crawl + "-nosuch"})
	if !errors.Is(err, ErrNoCrawl) {
		t.Fatalf("Open of an unknown crawl: %v", err)
	}
	if n := f.rdb.Exists(ctx, "polite:{crawl:"+f.o.Crawl+"-nosuch}:meta").Val(); n != 0 {
		t.Fatal("Open created the unknown crawl")
	}
}

// Delete refuses a crawl with items in flight, says what it would delete,
// and deletes every key of the crawl (queues whose site left the ready set
// too) and its registry entry, leaving other crawls' and sites' keys.
func TestDelete(t *testing.T) {
	ctx := ctxT(t)
	prefix := fmt.Sprintf("del%d", crawls.Add(1))
	f := newFrontier(t, Options{Prefix: prefix, Shards: 4})
	other := newFrontier(t, Options{Prefix: prefix, Shards: 4})
	var seeds []string
	for i := range 8 {
		seeds = append(seeds, fmt.Sprintf("http://s%d.example/", i), fmt.Sprintf("http://s%d.example/2", i))
	}
	f.Seed(ctx, seeds...)
	other.Seed(ctx, seeds...)
	orphan := f.lay.Load().shards[1].base + "q:orphan.example"
	f.rdb.RPush(ctx, orphan, "{}")
	permit := prefix + ":{s0.example}:holders"
	f.rdb.ZAdd(ctx, permit, redis.Z{Score: 1, Member: "x"})

	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(ctx, f.rdb, prefix, f.o.Crawl, DeleteOptions{}); !errors.Is(err, ErrRunning) {
		t.Fatalf("Delete of a crawl with an item in flight: %v", err)
	}
	f.Done(ctx, it)
	d, err := Delete(ctx, f.rdb, prefix, f.o.Crawl, DeleteOptions{DryRun: true})
	if err != nil || !d.Registered || !d.Complete || d.Shards != 4 || d.Queues != 9 || d.Keys < 2+4*(6+seenBuckets)+9 {
		t.Fatalf("dry run: %+v, %v", d, err)
	}
	keys := func(crawl string) []string {
		ks, _, err := scanKeys(ctx, f.rdb, prefix+":*crawl:"+crawl+"}*", ScanBudget)
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	if n := len(keys(f.o.Crawl)); n != d.Keys {
		t.Fatalf("after a dry run %d keys; Delete counted %d", n, d.Keys)
	}
	if _, err := Delete(ctx, f.rdb, prefix, f.o.Crawl, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ks := notTomb(keys(f.o.Crawl)); len(ks) != 0 {
		t.Fatalf("left %v", ks)
	}
	if ttl := f.rdb.PTTL(ctx, prefix+":{crawl:"+f.o.Crawl+"}:deleted").Val(); ttl < tombTTL-time.Minute {
		t.Fatalf("the tombstone's TTL: %v; want %v at least", ttl, tombTTL)
	}
	if f.rdb.ZScore(ctx, registryKey(prefix), f.o.Crawl).Err() != redis.Nil {
		t.Fatal("registry entry left")
	}
	if f.rdb.Exists(ctx, permit).Val() != 1 || len(keys(other.o.Crawl)) < 4*seenBuckets {
		t.Fatal("Delete removed keys of another crawl or a site's")
	}
	if _, err := Delete(ctx, f.rdb, prefix, f.o.Crawl, DeleteOptions{}); !errors.Is(err, ErrNoCrawl) {
		t.Fatalf("Delete again: %v", err)
	}
	if !strings.Contains(fmt.Sprint(ErrNoCrawl), "no such crawl") {
		t.Fatal(ErrNoCrawl)
	}
}

func TestIsShardKey(t *testing.T) {
	for k, want := range map[string]bool{
		"p:{s0/crawl:a}:q:x":       true,
		"p:{s12/crawl:a}:seen:3":   true,
		"p:{s/crawl:a}:q":          false,
		"p:{sx/crawl:a}:q":         false,
		"p:{s1/crawl:ab}:q":        false,
		"p:{s1/crawl:x/crawl:a}:q": false,
		"q:{s1/crawl:a}:q":         false,
	} {
		if isShardKey(k, "p", "a") != want {
			t.Errorf("isShardKey(%q) = %v", k, !want)
		}
	}
}

// On a 3-master Redis Cluster, List finds crawls by the registry and by a
// SCAN of every master, and Delete removes every key of a crawl spread
// over all of them, one slot per UNLINK.
func TestCrawlsOnRedisCluster(t *testing.T) {
	rc, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	cc := rc.Client()
	defer cc.Close()
	ctx := ctxT(t)
	var names []string
	for i := range 6 {
		f := New(cc, &Options{Crawl: fmt.Sprintf("c%d", i)})
		if _, err := f.Seed(ctx, "http://a.example/", "http://b.example/", "http://c.example/"); err != nil {
			t.Fatal(err)
		}
		names = append(names, f.o.Crawl)
	}
	cc.ZRem(ctx, registryKey("polite"), "c0", "c1") // as if from before the registry
	got, complete, err := List(ctx, cc, "polite")
	if err != nil || !complete || len(got) != len(names) {
		t.Fatalf("List on a cluster: %+v, %v, complete %v", got, err, complete)
	}
	for i, c := range got {
		if c.Name != names[i] || c.State != StateRunning || c.Stats.Queued != 3 || c.Meta.Shards != 16 {
			t.Errorf("crawl %d: %+v", i, c)
		}
	}
	if _, err := Delete(ctx, cc, "polite", "c0", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if left := notTomb(c.Keys(ctx, "*crawl:c0}*").Val()); len(left) > 0 {
			return fmt.Errorf("%s keeps %q", c.Options().Addr, left)
		}
		if len(c.Keys(ctx, "*crawl:c1}*").Val()) == 0 {
			return fmt.Errorf("%s has no key of crawl c1", c.Options().Addr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A Redis user the ACL refuses TIME cannot join a crawl, and its try
// leaves no meta behind (a key without a TTL, which the registry would
// show as a crawl that never expires): the script reads the clock before
// it writes.
func TestRefusedClockLeavesNoMeta(t *testing.T) {
	ctx := ctxT(t)
	narrow, err := srv.ClientAs(ctx, "frontier-notime", "-time")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { narrow.Close() })
	f := New(narrow, &Options{Prefix: "t:notime", Crawl: "notime"})
	if _, err := f.Seed(ctx, "http://notime.example/"); !redisacl.Refused(err) {
		t.Fatalf("Seed as a user without TIME: %v, want Redis's refusal", err)
	}
	admin := srv.Client()
	t.Cleanup(func() { admin.Close() })
	if n, err := admin.Exists(ctx, f.meta).Result(); err != nil || n != 0 {
		t.Errorf("after the refused join, meta exists (%d, %v): want none", n, err)
	}
}

// A crawl with URLs queued whose keys no process has refreshed for five
// refresh intervals is stalled; one refreshed a minute ago runs; a crawl
// done is done however long ago it was touched.
func TestListStalled(t *testing.T) {
	ctx := ctxT(t)
	prefix := fmt.Sprintf("stalled%d", crawls.Add(1))
	ttl := time.Hour
	left := newFrontier(t, Options{Prefix: prefix, TTL: ttl})
	left.Seed(ctx, "http://a.example/")
	working := newFrontier(t, Options{Prefix: prefix, TTL: ttl})
	working.Seed(ctx, "http://a.example/")
	finished := newFrontier(t, Options{Prefix: prefix, TTL: ttl})
	finished.Seed(ctx, "http://a.example/")
	drain(t, ctx, finished)
	for f, ago := range map[*Frontier]time.Duration{left: 6 * time.Minute, working: time.Minute, finished: time.Hour / 2} {
		if err := f.rdb.PExpire(ctx, f.meta, ttl-ago).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := List(ctx, left.rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{left.o.Crawl: StateStalled, working.o.Crawl: StateRunning, finished.o.Crawl: StateDone}
	for _, c := range got {
		if want[c.Name] != c.State {
			t.Errorf("crawl %s, idle %v: state %q, want %q", c.Name, c.Meta.Idle(), c.State, want[c.Name])
		}
	}
	if len(got) != len(want) {
		t.Errorf("List found %d crawls, want %d", len(got), len(want))
	}
	if idle := (Meta{}).Idle(); idle != -1 {
		t.Errorf("a crawl without a recorded TTL: idle %v, want -1 (unknown)", idle)
	}
}

// A process idle on a crawl that reached its page limit (--forever) keeps
// it, as the URLs past the limit wait for a run with a higher one: its
// looks read, and refresh the keys when due.
func TestIdleProcessKeepsLimitCrawl(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxPages: 1, TTL: 2 * time.Second}) // a refresh due every 500 ms
	f.Add(ctx, 0, "http://a.example/0", "http://a.example/1")
	drain(t, ctx, f)
	overflow := f.lay.Load().shards[0].base + "overflow"
	// Polls as a crawl's idle workers make them at their slowest, 1.25 s
	// apart (crawl's worker on ErrDone: a second and up to a quarter more),
	// for longer than the TTL.
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		if _, err := f.Next(ctx); !errors.Is(err, ErrDone) {
			t.Fatalf("Next: %v, want ErrDone", err)
		}
		time.Sleep(1250 * time.Millisecond)
	}
	if n := f.rdb.LLen(ctx, overflow).Val(); n != 1 {
		t.Fatalf("after 5 s of idle looks with a 2 s TTL the overflow holds %d URLs, want 1", n)
	}
}

// The overflow (URLs past the page limit) is kept as long as the crawl's
// other keys: a refresh gives it their TTL again. Its own TTL was set only
// when a URL went in, so a crawl that ran past its TTL after its overflow
// filled (or stopped growing) lost those URLs while it went on.
func TestOverflowKeptByRefresh(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxPages: 1, Shards: 1, TTL: 2 * time.Second})
	f.Add(ctx, 0, "http://a.example/0", "http://a.example/1", "http://b.example/0")
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	overflow := f.lay.Load().shards[0].base + "overflow"
	if n := f.rdb.LLen(ctx, overflow).Val(); n != 2 {
		t.Fatalf("overflow holds %d URLs, want 2", n)
	}
	// A worker on the crawl for longer than the TTL, its calls refreshing
	// the keys (every half second: a quarter of the TTL).
	for range 6 {
		time.Sleep(500 * time.Millisecond)
		if err := f.Hold(ctx, "x.example", time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.rdb.LLen(ctx, overflow).Val(); n != 2 {
		t.Fatalf("after 3 s of refreshes with a 2 s TTL the overflow holds %d URLs, want 2", n)
	}
	if r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched}); r.Settled != nil {
		t.Fatal(r.Settled)
	}
}
