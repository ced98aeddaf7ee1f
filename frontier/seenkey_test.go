package frontier

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// inSeen reports whether the seen sets of f's crawl hold fingerprint v.
func inSeen(t *testing.T, f *Frontier, site string, v uint64) bool {
	t.Helper()
	key := f.lay.Load().of(site).base + "seen:" + strconv.Itoa(int(v>>56))
	ok, err := f.rdb.SIsMember(ctxT(t), key, strconv.FormatInt(int64(v), 10)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// A crawl's fingerprints are keyed: the process that creates it stores a
// random seen key, its other processes (and Open) use it, and another crawl
// has another, so nobody outside can tell which URLs collide.
func TestSeenKeyIsPerCrawl(t *testing.T) {
	ctx := ctxT(t)
	const u = "http://a.example/page"
	f, g := newFrontier(t, Options{}), newFrontier(t, Options{})
	for _, fr := range []*Frontier{f, g} {
		if n, err := fr.Add(ctx, 0, u); err != nil || n != 1 {
			t.Fatalf("Add: %d, %v", n, err)
		}
	}
	kf := f.rdb.HGet(ctx, f.meta, "seen_key").Val()
	kg := g.rdb.HGet(ctx, g.meta, "seen_key").Val()
	if len(kf) != 32 || len(kg) != 32 || kf == kg {
		t.Fatalf("seen keys %q and %q: want two different 32-digit keys", kf, kg)
	}
	vf, _, _ := f.lay.Load().fingerprint(u)
	vg, _, _ := g.lay.Load().fingerprint(u)
	if vf == vg || vf == fnv64(u) {
		t.Fatalf("fingerprints %x and %x (FNV %x): want keyed, per crawl", vf, vg, fnv64(u))
	}
	if !inSeen(t, f, "a.example", vf) || inSeen(t, f, "a.example", fnv64(u)) {
		t.Fatal("the seen set does not hold the keyed fingerprint alone")
	}

	// Another process on the crawl, and a reader opened on it, agree.
	if n, err := join(f, Options{}).Add(ctx, 0, u, "http://a.example/other"); err != nil || n != 1 {
		t.Fatalf("another process: %d admitted, %v; want only the new URL", n, err)
	}
	o, _, err := Open(ctx, f.rdb, &Options{Prefix: f.o.Prefix, Crawl: f.o.Crawl})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := o.lay.Load().fingerprint(u); v != vf {
		t.Fatalf("Open's fingerprint %x, the crawl's %x", v, vf)
	}
}

// A crawl created before crawls had a seen key (its meta has none) keeps
// FNV-1a, so its processes still agree with the seen sets it has.
func TestSeenWithoutKeyIsFNV(t *testing.T) {
	ctx := ctxT(t)
	const u = "http://a.example/old"
	f := newFrontier(t, Options{})
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	if err := f.rdb.HSet(ctx, f.meta, "shards", 1, "created", now).Err(); err != nil {
		t.Fatal(err)
	}
	f.rdb.PExpire(ctx, f.meta, time.Hour)
	if n, err := f.Add(ctx, 0, u); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	if f.rdb.HExists(ctx, f.meta, "seen_key").Val() {
		t.Fatal("a seen key was added to a crawl that had none")
	}
	if !inSeen(t, f, "a.example", fnv64(u)) {
		t.Fatal("the seen set does not hold the FNV-1a fingerprint")
	}
	if n, err := join(f, Options{}).Add(ctx, 0, u); err != nil || n != 0 {
		t.Fatalf("another process: %d admitted, %v; want it seen", n, err)
	}
}

// A stored seen key that is not 32 hex digits is refused, not hashed with.
func TestBadSeenKeyFails(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	if err := f.rdb.HSet(ctx, f.meta, "shards", 1, "seen_key", "not-hex").Err(); err != nil {
		t.Fatal(err)
	}
	f.rdb.PExpire(ctx, f.meta, time.Hour)
	_, err := f.Add(ctx, 0, "http://a.example/")
	if err == nil || !strings.Contains(err.Error(), "bad seen key") {
		t.Fatalf("Add: %v; want a bad seen key error", err)
	}
	if _, _, err := Open(ctx, f.rdb, &Options{Prefix: f.o.Prefix, Crawl: f.o.Crawl}); err == nil || !strings.Contains(err.Error(), "bad seen key") {
		t.Fatalf("Open: %v; want a bad seen key error", err)
	}
}

// A running process puts back a meta that Redis lost under it, seen key
// and all, so that a process joining later hashes as it does.
func TestMetaLostIsPutBackByRunningProcess(t *testing.T) {
	ctx := ctxT(t)
	const u = "http://a.example/page"
	f := newFrontier(t, Options{Shards: 4})
	if n, err := f.Add(ctx, 0, u); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	before := f.rdb.HGetAll(ctx, f.meta).Val()
	f.rdb.Del(ctx, f.meta)
	if why, err := f.WhyGone(ctx); why != GoneLost || err != nil {
		t.Fatalf("WhyGone with the meta gone: %q, %v; want lost", why, err)
	}
	f.keptAt.Store(0) // its next round trip refreshes the crawl's keys
	if n, err := f.Add(ctx, 0, "http://a.example/2"); err != nil || n != 1 {
		t.Fatalf("Add after the loss: %d, %v", n, err)
	}
	after := f.rdb.HGetAll(ctx, f.meta).Val()
	for _, k := range []string{"shards", "seen_key", "max_per_site", "site_key", "max_pages", "ttl"} {
		if after[k] != before[k] {
			t.Errorf("meta %s put back as %q, was %q", k, after[k], before[k])
		}
	}
	if ttl := f.rdb.PTTL(ctx, f.meta).Val(); ttl <= 0 {
		t.Errorf("meta put back with TTL %v", ttl)
	}
	if why, err := f.WhyGone(ctx); why != GoneNot || err != nil {
		t.Fatalf("WhyGone with the meta back: %q, %v; want it there", why, err)
	}
	if n, err := join(f, Options{Shards: 4}).Add(ctx, 0, u); err != nil || n != 0 {
		t.Fatalf("a process joining after: %d admitted, %v; want the URL seen", n, err)
	}
}

// A process that would create a meta over shards that outlived theirs
// (nobody running to put it back) refuses, and leaves no meta behind: a
// new seen key would admit every URL seen before once more. Once the
// crawl is deleted it starts afresh.
func TestMetaLostOverShardsIsRefused(t *testing.T) {
	ctx := ctxT(t)
	const u = "http://a.example/page"
	f := newFrontier(t, Options{Shards: 4})
	if n, err := f.Add(ctx, 0, u); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	f.rdb.Del(ctx, f.meta)
	if got := listState(t, f); got != StateLost {
		t.Fatalf("List: state %q; want %q", got, StateLost)
	}
	for range 2 { // the second try meets the same shards: nothing left behind
		_, err := join(f, Options{Shards: 4}).Add(ctx, 0, u)
		if !errors.Is(err, ErrMetaLost) || !strings.Contains(err.Error(), "crawler delete --crawl "+f.o.Crawl) {
			t.Fatalf("joining: %v; want ErrMetaLost saying what to do", err)
		}
		if f.rdb.Exists(ctx, f.meta).Val() != 0 {
			t.Fatal("the refused process left its meta")
		}
	}
	if _, err := Delete(ctx, f.rdb, f.o.Prefix, f.o.Crawl, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := listState(t, f); got != "" {
		t.Fatalf("List after delete: state %q; want the crawl gone", got)
	}
	if n, err := join(f, Options{Shards: 4}).Add(ctx, 0, u); err != nil || n != 1 {
		t.Fatalf("after delete: %d, %v; want a fresh crawl", n, err)
	}
}

// listState is the state List gives f's crawl, "" if it lists none.
func listState(t *testing.T, f *Frontier) string {
	t.Helper()
	all, _, err := List(ctxT(t), f.rdb, f.o.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Name == f.o.Crawl {
			return c.State
		}
	}
	return ""
}

// A process working on a crawl that Delete deleted learns it at its next
// refresh of the meta: the call fails with ErrCrawlGone, writes nothing
// (no shard key, no registry entry, no meta put back), and so does every
// call after it.
func TestDeletedCrawlStopsItsProcess(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 4})
	deletedUnder(t, f)
	f.keptAt.Store(0) // its next round trip refreshes the crawl's keys
	for i := range 2 {
		if n, err := f.Add(ctx, 0, "http://b.example/1"); !errors.Is(err, ErrCrawlGone) || !strings.Contains(err.Error(), "was deleted (crawler delete)") {
			t.Fatalf("Add %d after the delete: %d, %v; want ErrCrawlGone", i, n, err)
		}
	}
	if _, err := f.Next(ctx); !errors.Is(err, ErrCrawlGone) {
		t.Fatalf("Next after the delete: %v; want ErrCrawlGone", err)
	}
	ks := f.rdb.Keys(ctx, f.o.Prefix+":*crawl:"+f.o.Crawl+"}*").Val()
	if len(ks) != 1 || ks[0] != f.tomb {
		t.Fatalf("keys of the deleted crawl: %q; want its tombstone alone", ks)
	}
	if got := listState(t, f); got != "" {
		t.Fatalf("List: state %q; want the crawl gone", got)
	}
}

// WhyGone tells a crawl deleted with work left (meta gone, the tombstone
// saying so) from one deleted once done, from one whose keys went without
// a tombstone (lost), and from one that is there.
func TestWhyGone(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 4})
	if n, err := f.Add(ctx, 0, "http://b.example/1"); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	if why, err := f.WhyGone(ctx); why != GoneNot || err != nil {
		t.Fatalf("before the delete: %q, %v", why, err)
	}
	deletedUnder(t, f) // an item in flight: Force
	if why, err := f.WhyGone(ctx); why != GoneDeleted || !errors.Is(err, ErrCrawlGone) || !strings.Contains(err.Error(), "was deleted (crawler delete)") {
		t.Fatalf("after the delete: %q, %v; want deleted, ErrCrawlGone", why, err)
	}
	if err := f.rdb.Del(ctx, f.tomb).Err(); err != nil {
		t.Fatal(err)
	}
	if why, err := f.WhyGone(ctx); why != GoneLost || err != nil {
		t.Fatalf("keys gone without a tombstone: %q, %v; want lost", why, err)
	}

	// Queued but nothing in flight is work left too; nothing left, done.
	for _, queued := range []bool{true, false} {
		g := newFrontier(t, Options{Shards: 4})
		if n, err := g.Add(ctx, 0, "http://a.example/1"); err != nil || n != 1 {
			t.Fatalf("Add: %d, %v", n, err)
		}
		if !queued {
			it, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Done(ctx, it); err != nil {
				t.Fatal(err)
			}
		}
		d, err := Delete(ctx, g.rdb, g.o.Prefix, g.o.Crawl, DeleteOptions{})
		if err != nil || d.Queued != map[bool]int64{true: 1, false: 0}[queued] {
			t.Fatalf("Delete (queued %v): %+v, %v", queued, d, err)
		}
		want := map[bool]string{true: GoneDeleted, false: GoneFinished}[queued]
		if why, err := g.WhyGone(ctx); why != want || (err != nil) != queued {
			t.Fatalf("deleted with queued %v: %q, %v; want %q", queued, why, err, want)
		}
	}
}

// A process whose crawl was deleted and made anew by another process (it
// has another seen key) stops at its next refresh, and leaves the new
// crawl as it is; the new crawl took the tombstone away and confirmed its
// meta, so the old process need not wait replacedAge.
func TestReplacedCrawlStopsOldProcess(t *testing.T) {
	ctx := ctxT(t)
	old := newFrontier(t, Options{Shards: 4})
	deletedUnder(t, old)
	if n, err := join(old, Options{Shards: 4}).Add(ctx, 0, "http://a.example/1"); err != nil || n != 1 {
		t.Fatalf("the new crawl's Add: %d, %v", n, err)
	}
	if old.rdb.Exists(ctx, old.tomb).Val() != 0 {
		t.Error("the new crawl left the old one's tombstone")
	}
	meta := old.rdb.HGetAll(ctx, old.meta).Val()
	if meta["confirmed"] != "1" {
		t.Fatalf("the new crawl's meta %v is not confirmed", meta)
	}
	old.keptAt.Store(0) // at once: confirmed, it need not be replacedAge old
	if _, err := old.Add(ctx, 0, "http://a.example/2"); !errors.Is(err, ErrCrawlGone) || !strings.Contains(err.Error(), "made anew") {
		t.Fatalf("the old process's Add: %v; want ErrCrawlGone", err)
	}
	if got := old.rdb.HGetAll(ctx, old.meta).Val(); got["seen_key"] != meta["seen_key"] || got["seen_key"] == "" {
		t.Errorf("the new crawl's seen key %q became %q", meta["seen_key"], got["seen_key"])
	}
	if n, err := join(old, Options{Shards: 4}).Add(ctx, 0, "http://a.example/2"); err != nil || n != 1 {
		t.Fatalf("the new crawl after the old process stopped: %d, %v; want its URL admitted", n, err)
	}
}

// A process refused over a deleted crawl's orphans (ErrMetaLost: an old
// process's last settlement made some of its shard keys again) leaves the
// tombstone, so that the old process still stops rather than put the
// deleted crawl's meta back.
func TestRefusedJoinerKeepsTombstone(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 4})
	it := deletedUnder(t, f)
	// Its item gone, its links admitted all the same: the orphans.
	f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Links: []string{"http://a.example/2", "http://b.example/1", "http://c.example/1"}})
	if _, err := join(f, Options{Shards: 4}).Add(ctx, 0, "http://a.example/1"); !errors.Is(err, ErrMetaLost) {
		t.Fatalf("a new process over the orphans: %v; want ErrMetaLost", err)
	}
	f.keptAt.Store(0)
	if _, err := f.Add(ctx, 0, "http://d.example/1"); !errors.Is(err, ErrCrawlGone) {
		t.Fatalf("the old process: %v; want ErrCrawlGone", err)
	}
	if n := f.rdb.Exists(ctx, f.meta).Val(); n != 0 {
		t.Fatalf("the deleted crawl's meta was put back: %v", f.rdb.HGetAll(ctx, f.meta).Val())
	}
}

// A meta with another seen key stops a process only once it is
// replacedAge old: a younger one may be a joiner's that layout is about to
// take back (ErrMetaLost over a lost meta), after which the process puts
// its crawl's meta back.
func TestYoungOtherMetaStopsNothing(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 4})
	if _, err := f.Add(ctx, 0, "http://a.example/1"); err != nil {
		t.Fatal(err)
	}
	mine := f.rdb.HGet(ctx, f.meta, "seen_key").Val()
	now := f.rdb.Time(ctx).Val()
	other := func(age time.Duration) {
		f.rdb.Del(ctx, f.meta)
		f.rdb.HSet(ctx, f.meta, "shards", 4, "seen_key", strings.Repeat("ab", 16), "created", now.Add(-age).UnixMilli())
		f.keptAt.Store(0)
	}
	other(time.Second) // a joiner's, about to go
	if _, err := f.Add(ctx, 0, "http://a.example/2"); err != nil {
		t.Fatalf("with a young meta of another key: %v", err)
	}
	f.rdb.Del(ctx, f.meta) // the joiner takes it back
	f.keptAt.Store(0)
	if _, err := f.Add(ctx, 0, "http://a.example/3"); err != nil {
		t.Fatal(err)
	}
	if got := f.rdb.HGet(ctx, f.meta, "seen_key").Val(); got != mine {
		t.Fatalf("meta's seen key %q after the young one went; want this process's %q put back", got, mine)
	}
	other(replacedAge + time.Second) // a crawl made anew
	if _, err := f.Add(ctx, 0, "http://a.example/4"); !errors.Is(err, ErrCrawlGone) || !strings.Contains(err.Error(), "made anew") {
		t.Fatalf("with an old meta of another key: %v; want ErrCrawlGone", err)
	}
}

// A young meta of another key beside the tombstone is a crawl made anew
// after this process's was deleted, seen before its maker confirmed it:
// deleted, at once.
func TestYoungOtherMetaBesideTombstone(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 4})
	deletedUnder(t, f)
	now := f.rdb.Time(ctx).Val()
	f.rdb.HSet(ctx, f.meta, "shards", 4, "seen_key", strings.Repeat("ab", 16), "created", now.UnixMilli())
	f.keptAt.Store(0)
	if _, err := f.Add(ctx, 0, "http://a.example/2"); !errors.Is(err, ErrCrawlGone) || !strings.Contains(err.Error(), "was deleted (crawler delete)") {
		t.Fatalf("a young meta of another key beside the tombstone: %v; want ErrCrawlGone (deleted)", err)
	}
}

// The shard keys a process's concurrent calls made again after a delete,
// before it knew, all get a TTL: expireLeftovers waits for the calls on
// their way.
func TestLeftoversOfConcurrentCallsExpire(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 8})
	deletedUnder(t, f)
	f.keptAt.Store(time.Now().UnixMilli()) // not known yet: the calls make keys again
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if i == 50 && g == 0 {
					f.keptAt.Store(0) // now a look
				}
				if _, err := f.Add(ctx, 0, fmt.Sprintf("http://s%d-%d.example/", g, i)); errors.Is(err, ErrCrawlGone) {
					return
				}
			}
			t.Errorf("goroutine %d: 2000 calls and no ErrCrawlGone", g)
		}()
	}
	wg.Wait()
	for _, k := range notTomb(f.rdb.Keys(ctx, f.o.Prefix+":*"+f.o.Crawl+"}*").Val()) {
		if ttl := f.rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s has no TTL (%v)", k, ttl)
		}
	}
}

// A settlement that finds its item gone, as every item is after a delete
// --force, has the process look at the crawl's meta in its next round
// trip, even just after it joined: it stops then, not a refresh interval
// later.
func TestLostSettlementLooksAtOnce(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 4})
	it := deletedUnder(t, f)
	if r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched}); !errors.Is(r.Settled, ErrLost) {
		t.Fatalf("settlement after the delete: %v; want ErrLost", r.Settled)
	}
	if _, err := f.Add(ctx, 0, "http://b.example/1"); !errors.Is(err, ErrCrawlGone) {
		t.Fatalf("the next call: %v; want ErrCrawlGone", err)
	}
}

// deletedUnder seeds f's crawl with one URL, takes it (in flight, as a
// worker's) and deletes the crawl under f, as delete --force does; it
// returns the item.
func deletedUnder(t *testing.T, f *Frontier) Item {
	t.Helper()
	ctx := ctxT(t)
	if n, err := f.Add(ctx, 0, "http://a.example/1"); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(ctx, f.rdb, f.o.Prefix, f.o.Crawl, DeleteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	return it
}
