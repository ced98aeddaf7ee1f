package frontier

import (
	"hash/fnv"
	"strconv"
	"strings"
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
