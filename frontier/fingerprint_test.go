package frontier

import (
	"hash/fnv"
	"strconv"
	"strings"
	"testing"
)

// seenIn reports whether raw's member, as l fingerprints it, is in f's
// seen sets.
func seenIn(t *testing.T, f *Frontier, l *layout, raw string) bool {
	t.Helper()
	norm, site, err := f.normalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	_, member, bucket := l.fingerprint(norm)
	ok, err := f.rdb.SIsMember(ctxT(t), f.lay.Load().of(site).base+"seen:"+bucket, member).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// A crawl's URL fingerprints are keyed by a random key of the crawl's own,
// so nobody outside can compute them (or links that collide with a URL);
// every process of the crawl uses the crawl's key, so they dedup alike.
func TestFingerprintsAreKeyed(t *testing.T) {
	ctx := ctxT(t)
	const u = "http://a.example/page"
	a, b := newFrontier(t, Options{}), newFrontier(t, Options{})
	for _, f := range []*Frontier{a, b} {
		if n, err := f.Add(ctx, 0, u); err != nil || n != 1 {
			t.Fatalf("Add: %d, %v", n, err)
		}
	}
	la, lb := a.lay.Load(), b.lay.Load()
	if la.key == nil || lb.key == nil || *la.key == *lb.key {
		t.Fatalf("keys %v and %v: want two, and different", la.key, lb.key)
	}
	norm, _, _ := a.normalize(u)
	_, ma, _ := la.fingerprint(norm)
	_, mb, _ := lb.fingerprint(norm)
	if ma == mb {
		t.Errorf("two crawls gave %s the same fingerprint %s", u, ma)
	}
	h := fnv.New64a()
	h.Write([]byte(norm))
	if unkeyed := strconv.FormatInt(int64(h.Sum64()), 10); ma == unkeyed || mb == unkeyed {
		t.Errorf("a fingerprint is the unkeyed FNV-1a %s", unkeyed)
	}
	if !seenIn(t, a, la, u) || !seenIn(t, b, lb, u) {
		t.Fatal("the keyed fingerprints are not in the seen sets")
	}

	// Another process of crawl a reads a's key, and so finds u seen.
	a2 := join(a, Options{})
	if n, err := a2.Add(ctx, 0, u, "http://a.example/other"); err != nil || n != 1 {
		t.Fatalf("second process's Add: %d admitted, %v; want 1 (u seen)", n, err)
	}
	if *a2.lay.Load().key != *la.key {
		t.Error("the second process has another key")
	}
}

// A crawl made before crawls had a key (its meta has none) goes on with
// the unkeyed fingerprints its seen sets hold: a URL it saw stays seen.
func TestUnkeyedCrawlKeepsItsFingerprints(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	// The meta an older process made: no fp_key.
	if err := f.rdb.HSet(ctx, f.meta, "shards", 1, "created", 1, "max_per_site", 3,
		"site_key", "host", "max_pages", 0, "ttl", 60000).Err(); err != nil {
		t.Fatal(err)
	}
	const u = "http://a.example/old"
	norm, _, err := f.normalize(u)
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	h.Write([]byte(norm))
	v := h.Sum64()
	seen := f.o.Prefix + ":{s0/crawl:" + f.o.Crawl + "}:seen:" + strconv.Itoa(int(v>>56))
	if err := f.rdb.SAdd(ctx, seen, strconv.FormatInt(int64(v), 10)).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Add(ctx, 0, u, "http://a.example/new"); err != nil || n != 1 {
		t.Fatalf("Add: %d admitted, %v; want 1 (the old URL seen)", n, err)
	}
	if l := f.lay.Load(); l.key != nil {
		t.Errorf("key %v for a crawl without one", l.key)
	}
	if k, _ := f.rdb.HGet(ctx, f.meta, "fp_key").Result(); k != "" {
		t.Errorf("meta got fp_key %q: a key now would make its seen URLs unseen", k)
	}
}

// A damaged key in the meta is a clear error, not another key.
func TestBadFingerprintKey(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	if err := f.rdb.HSet(ctx, f.meta, "shards", 1, "fp_key", "xyz").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := f.Add(ctx, 0, "http://a.example/")
	if err == nil || !strings.Contains(err.Error(), "bad fingerprint key") {
		t.Fatalf("Add: %v, want a bad fingerprint key", err)
	}
}
