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

// unkeyed is the FNV-1a 64 member of raw, as crawls were fingerprinted
// before they were keyed, and its bucket's key.
func unkeyed(t *testing.T, f *Frontier, raw string) (member, bucket string) {
	t.Helper()
	norm, _, err := f.normalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	h.Write([]byte(norm))
	v := h.Sum64()
	return strconv.FormatInt(int64(v), 10), f.o.Prefix + ":{s0/crawl:" + f.o.Crawl + "}:seen:" + strconv.Itoa(int(v>>56))
}

// A crawl's URL fingerprints are keyed by its prefix's random key, so
// nobody outside can compute them (or links that collide with a URL);
// every process of the crawl reads the same key, so they dedup alike. The
// key has no TTL: it outlives every crawl.
func TestFingerprintsAreKeyed(t *testing.T) {
	ctx := ctxT(t)
	const u = "http://a.example/page"
	a := newFrontier(t, Options{Prefix: "t:fpa"})
	b := newFrontier(t, Options{Prefix: "t:fpb"})
	for _, f := range []*Frontier{a, b} {
		if n, err := f.Add(ctx, 0, u); err != nil || n != 1 {
			t.Fatalf("Add: %d, %v", n, err)
		}
		if v, err := f.rdb.HGet(ctx, f.meta, "fingerprints").Result(); err != nil || v != Fingerprints {
			t.Errorf("meta's fingerprints: %q, %v; want %q", v, err, Fingerprints)
		}
		if ttl, err := f.rdb.PTTL(ctx, fingerprintKeyName(f.o.Prefix)).Result(); err != nil || ttl != -1 {
			t.Errorf("the prefix's key: PTTL %v, %v; want none (-1)", ttl, err)
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
		t.Errorf("two prefixes gave %s the same fingerprint %s", u, ma)
	}
	if fnv, _ := unkeyed(t, a, u); ma == fnv || mb == fnv {
		t.Errorf("a fingerprint is the unkeyed FNV-1a %s", fnv)
	}
	if !seenIn(t, a, la, u) || !seenIn(t, b, lb, u) {
		t.Fatal("the keyed fingerprints are not in the seen sets")
	}

	// Another process of crawl a reads the same key, and so finds u seen.
	a2 := join(a, Options{})
	if n, err := a2.Add(ctx, 0, u, "http://a.example/other"); err != nil || n != 1 {
		t.Fatalf("second process's Add: %d admitted, %v; want 1 (u seen)", n, err)
	}
	if *a2.lay.Load().key != *la.key {
		t.Error("the second process has another key")
	}
	// Open (crawler status) reads it too.
	o, m, err := Open(ctx, a.rdb, &Options{Prefix: a.o.Prefix, Crawl: a.o.Crawl})
	if err != nil || m.Fingerprints != Fingerprints || o.lay.Load().key == nil || *o.lay.Load().key != *la.key {
		t.Errorf("Open: %v, fingerprints %q; want the crawl's key", err, m.Fingerprints)
	}
}

// The key outlives the crawl's meta: a process that joins a crawl whose
// meta was lost (expired apart from its shards, a flush of one Cluster
// node) makes the meta again and still finds the crawl's URLs seen; and a
// process that outlived a delete keys alike with one that made the crawl
// again.
func TestFingerprintKeyOutlivesMeta(t *testing.T) {
	ctx := ctxT(t)
	const u = "http://a.example/kept"
	f := newFrontier(t, Options{})
	if n, err := f.Add(ctx, 0, u); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	if err := f.rdb.Del(ctx, f.meta).Err(); err != nil {
		t.Fatal(err)
	}
	late := join(f, Options{})
	if n, err := late.Add(ctx, 0, u, "http://a.example/new"); err != nil || n != 1 {
		t.Fatalf("after meta was lost, a joiner admitted %d, %v; want 1 (u seen)", n, err)
	}

	if _, err := Delete(ctx, f.rdb, f.o.Prefix, f.o.Crawl, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := join(f, Options{})
	if n, err := again.Add(ctx, 0, "http://a.example/after"); err != nil || n != 1 {
		t.Fatalf("the crawl made again admitted %d, %v; want 1", n, err)
	}
	if n, err := f.Add(ctx, 0, "http://a.example/after"); err != nil || n != 0 {
		t.Fatalf("the process that outlived the delete admitted %d, %v; want 0 (seen by the new one)", n, err)
	}
}

// A crawl made before crawls were keyed (its meta says nothing of its
// fingerprints) goes on with the unkeyed fingerprints its seen sets hold:
// a URL it saw stays seen, and its meta is left so.
func TestUnkeyedCrawlKeepsItsFingerprints(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	// The meta an older process made.
	if err := f.rdb.HSet(ctx, f.meta, "shards", 1, "created", 1, "max_per_site", 3,
		"site_key", "host", "max_pages", 0, "ttl", 60000).Err(); err != nil {
		t.Fatal(err)
	}
	const u = "http://a.example/old"
	member, bucket := unkeyed(t, f, u)
	if err := f.rdb.SAdd(ctx, bucket, member).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Add(ctx, 0, u, "http://a.example/new"); err != nil || n != 1 {
		t.Fatalf("Add: %d admitted, %v; want 1 (the old URL seen)", n, err)
	}
	if l := f.lay.Load(); l.key != nil {
		t.Errorf("key %v for an unkeyed crawl", l.key)
	}
	if v, _ := f.rdb.HGet(ctx, f.meta, "fingerprints").Result(); v != "" {
		t.Errorf("meta got fingerprints %q: keying it now would make its seen URLs unseen", v)
	}
}

// A damaged key, or a scheme this version does not know, is a clear
// error, not another key.
func TestBadFingerprintKey(t *testing.T) {
	for _, c := range []struct {
		name, key, scheme, want string
	}{
		{"bad key", "xyz", Fingerprints, "bad fingerprint key"},
		{"newer scheme", "", "blake3", "newer version"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			f := newFrontier(t, Options{Prefix: "t:badkey" + strings.ReplaceAll(c.name, " ", "")})
			if c.key != "" {
				if err := f.rdb.Set(ctx, fingerprintKeyName(f.o.Prefix), c.key, 0).Err(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.rdb.Del(ctx, fingerprintKeyName(f.o.Prefix)) })
			}
			if err := f.rdb.HSet(ctx, f.meta, "shards", 1, "fingerprints", c.scheme).Err(); err != nil {
				t.Fatal(err)
			}
			_, err := f.Add(ctx, 0, "http://a.example/")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Add: %v, want %q", err, c.want)
			}
		})
	}
}
