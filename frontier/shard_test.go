package frontier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// shardsOf is how many distinct shards sites land on.
func shardsOf(t *testing.T, f *Frontier, sites []string) int {
	t.Helper()
	seen := map[*shard]bool{}
	for _, s := range sites {
		seen[shardOf(t, f, s)] = true
	}
	return len(seen)
}

// Sites spread over the shards; workers drain them all, and ErrDone comes
// only once every shard is empty with nothing in flight.
func TestShardsDrain(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 8})
	var sites []string
	for i := range 20 {
		sites = append(sites, fmt.Sprintf("s%d.example", i))
	}
	if n := shardsOf(t, f, sites); n < 6 {
		t.Fatalf("20 sites on %d of 8 shards", n)
	}
	exactlyOnce(t, f) // 400 URLs over s0..s9, 8 workers
	// One item in flight on one shard: every other worker waits, none ends.
	f.Add(ctx, 0, "http://s3.example/last", "http://s4.example/last")
	held := take(t, f, 2)
	for range 3 {
		if _, err := f.Next(ctx); !errors.As(err, new(*EmptyError)) {
			t.Fatalf("with 2 items in flight: %v; want nothing ready, not done", err)
		}
	}
	f.Done(ctx, held[0])
	if _, err := f.Next(ctx); !errors.As(err, new(*EmptyError)) {
		t.Fatalf("with 1 item in flight: %v; want nothing ready, not done", err)
	}
	// Its settlement queues a link on another shard: not done either.
	r := f.Settle(ctx, Settlement{Item: held[1], Outcome: Fetched, Links: []string{"http://s7.example/late"}, Next: true})
	if r.Settled != nil || r.NextErr != nil || r.Next.URL != "http://s7.example/late" {
		t.Fatalf("settling the last item with a link on another shard: %+v", r)
	}
	f.Done(ctx, r.Next)
	if _, err := f.Next(ctx); !errors.Is(err, ErrDone) {
		t.Fatalf("all settled: %v; want ErrDone", err)
	}
}

// A worker killed holding items of several shards: they come back after
// the visibility timeout, to another process, and the crawl ends.
func TestKilledWorkerAcrossShards(t *testing.T) {
	ctx := ctxT(t)
	dead := newFrontier(t, Options{Visibility: 300 * time.Millisecond})
	var all []string
	for i := range 6 {
		all = append(all, fmt.Sprintf("http://k%d.example/1", i))
	}
	dead.Add(ctx, 0, all...)
	held := take(t, dead, 6)
	var sites []string
	for _, it := range held {
		sites = append(sites, it.Site)
	}
	if n := shardsOf(t, dead, sites); n < 3 {
		t.Fatalf("6 sites on %d shards", n)
	}
	live := New(srv.Client(), &Options{Crawl: dead.o.Crawl, Visibility: 300 * time.Millisecond})
	e := notReady(t, live, "all held by a dead worker")
	if e.InFlight != 6 || e.Wait <= 0 || e.Wait > 300*time.Millisecond {
		t.Fatalf("empty answer %+v; want 6 in flight, back within 300ms", e)
	}
	start := time.Now()
	got := drain(t, ctx, live)
	if len(got) != 6 || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("after %s the live worker drained %v; want the 6 URLs after the timeout", time.Since(start), got)
	}
	for _, it := range held {
		if err := dead.Done(ctx, it); !errors.Is(err, ErrLost) {
			t.Fatalf("the dead worker's late Done: %v", err)
		}
	}
}

// The shard count is the crawl's, fixed when created.
func TestShardCountFixed(t *testing.T) {
	ctx := ctxT(t)
	first := newFrontier(t, Options{Shards: 4})
	first.Add(ctx, 0, urls("a.example", 3)...)
	first.Add(ctx, 0, urls("b.example", 3)...)
	later := New(srv.Client(), &Options{Crawl: first.o.Crawl, Shards: 9})
	st, err := later.Stats(ctx)
	if err != nil || st.Shards != 4 || st.Queued != 6 {
		t.Fatalf("a later process asking for 9 shards: %+v, %v; want the crawl's 4 and its 6 URLs", st, err)
	}
	if n, _ := later.Add(ctx, 0, "http://a.example/0", "http://b.example/2"); n != 0 {
		t.Fatalf("the later process admitted %d seen URLs again", n)
	}
	if got := drain(t, ctx, later); len(got) != 6 {
		t.Fatalf("drained %v", got)
	}
}

// Every key of a crawl has a TTL, its queues too, while it runs and after.
func TestEveryKeyHasTTL(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{TTL: time.Hour, Shards: 4})
	f.Seed(ctx, urls("t.example", 3)...)
	f.Add(ctx, 1, urls("u.example", 3)...)
	it := take(t, f, 1)[0]
	f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Rule: SiteRule{Cap: 2, Delay: time.Millisecond}, Links: urls("w.example", 2)})
	it = take(t, f, 1)[0]
	f.Defer(ctx, it, time.Second)
	keys, err := f.rdb.Keys(ctx, "*"+f.o.Crawl+"}*").Result()
	if err != nil || len(keys) < 20 {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	queues := 0
	for _, k := range keys {
		if ttl, err := f.rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > time.Hour {
			t.Errorf("%s: TTL %v, %v; want the crawl's (1h)", k, ttl, err)
		}
		if strings.Contains(k, ":q:") {
			queues++
		}
	}
	if queues != 3 {
		t.Errorf("%d queue keys; want 3", queues)
	}
}

// A fleet refreshes a shard's TTLs (256 seen buckets and more) about once
// an interval, not once per process: another process's first call soon
// after finds them fresh and leaves them; one that comes after half the
// interval refreshes them, and so does one with a longer TTL than the
// last refresher's.
func TestKeepOncePerFleet(t *testing.T) {
	ctx := ctxT(t)
	a := newFrontier(t, Options{TTL: time.Hour, Shards: 1})
	if _, err := a.Seed(ctx, urls("k.example", 3)...); err != nil {
		t.Fatal(err)
	}
	ready := a.lay.Load().shards[0].keys[0]
	process := func(ttl time.Duration) *Frontier {
		return New(a.rdb, &Options{TTL: ttl, Shards: 1, Crawl: a.o.Crawl})
	}
	refreshes := func(f *Frontier) int64 {
		t.Helper()
		before, err := readLoad(ctx, f.rdb)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Next(ctx); err != nil {
			t.Fatal(err)
		}
		after, err := readLoad(ctx, f.rdb)
		if err != nil {
			t.Fatal(err)
		}
		return (after.calls["sadd"] - before.calls["sadd"]) / 256
	}
	if n := refreshes(process(time.Hour)); n != 0 {
		t.Fatal("a second process refreshed the shard just refreshed")
	}
	if n := refreshes(process(2 * time.Hour)); n != 1 {
		t.Fatalf("%d refreshes by a process with twice the TTL, want 1", n)
	}
	// Half an interval (a minute) later: the next process's first call refreshes.
	if err := a.rdb.PExpire(ctx, ready, 2*time.Hour-31*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if n := refreshes(process(2 * time.Hour)); n != 1 {
		t.Fatalf("%d refreshes half an interval on, want 1", n)
	}
	if ttl := a.rdb.PTTL(ctx, ready).Val(); ttl < 2*time.Hour-time.Minute {
		t.Fatalf("ready's TTL %v after the refresh, want about 2h", ttl)
	}
}

// Seen URLs cost at most 40 bytes each in Redis at 100,000 URLs.
func TestSeenMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 URLs")
	}
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	const total, batch = 100_000, 2_000
	for i := 0; i < total; i += batch {
		var us []string
		for j := i; j < i+batch; j++ {
			us = append(us, fmt.Sprintf("http://site%d.example/some/path/page-%d.html", j%500, j))
		}
		if n, err := f.Add(ctx, 0, us...); err != nil || n != batch {
			t.Fatalf("Add: %d, %v", n, err)
		}
	}
	fp, err := f.SeenFootprint(ctx)
	if err != nil || fp.URLs != total {
		t.Fatalf("footprint %+v, %v", fp, err)
	}
	per := float64(fp.Bytes) / float64(fp.URLs)
	t.Logf("seen sets: %d keys, %d bytes for %d URLs: %.1f bytes a URL", fp.Keys, fp.Bytes, fp.URLs, per)
	if per > 40 {
		t.Fatalf("%.1f bytes a seen URL; want at most 40", per)
	}
	if enc, _ := f.rdb.ObjectEncoding(ctx, shardOf(t, f, "site1.example").base+"seen:7").Result(); enc != "intset" {
		t.Fatalf("a seen bucket is a %s; want an intset", enc)
	}
}

// On a 3-master Redis Cluster a crawl's shards spread over every master,
// each serving its script calls; also after the nodes lose their scripts.
func TestOnRedisCluster(t *testing.T) {
	rc, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	cc := rc.Client()
	defer cc.Close()
	exactlyOnce(t, New(cc, &Options{Crawl: "cluster-once"}))
	ctx := ctxT(t)
	for _, node := range rc.Nodes {
		nc := node.Client()
		keys, err := nc.Keys(ctx, "*crawl:cluster-once}*").Result()
		l, lerr := readLoad(ctx, nc)
		nc.Close()
		if err != nil || lerr != nil || len(keys) == 0 || l.scripts == 0 {
			t.Fatalf("master %s: %d crawl keys, %d script calls (%v %v); want some of both", node.Addr, len(keys), l.scripts, err, lerr)
		}
	}

	f := New(cc, &Options{Crawl: "cluster-batch"})
	f.Add(ctx, 0, "http://a.example/1", "http://b.example/1")
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return forgetScripts(ctx, c) }); err != nil {
		t.Fatal(err)
	}
	if err := f.Hold(ctx, it.Site, time.Minute); err != nil {
		t.Fatal(err)
	}
	var links []string
	for i := range 12 { // links on several shards, so several nodes
		links = append(links, fmt.Sprintf("http://l%d.example/", i))
	}
	next, settled, err := f.DoneNext(ctx, it, links)
	if err != nil || settled != nil {
		t.Fatalf("DoneNext on a cluster after FUNCTION FLUSH: %+v, %v, %v", next, settled, err)
	}
	f.Done(ctx, next)
	if got := drain(t, ctx, f); len(got) != 12 {
		t.Fatalf("the rest on a cluster: %v, want 12 URLs", got)
	}
	if st, err := f.Stats(ctx); err != nil || st.Done != 14 || st.Queued != 0 || st.InFlight != 0 {
		t.Fatalf("stats on a cluster: %+v, %v; want 14 done", st, err)
	}
}

// slowAdds delays a node's pipelines that carry add calls and no
// settlement: that node's part of a settlement arrives late.
type slowAdds struct{ d time.Duration }

func (h slowAdds) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h slowAdds) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h slowAdds) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		adds, settles := false, false
		for _, c := range cmds {
			adds = adds || addScript.Is(c)
			settles = settles || settleScript.Is(c)
		}
		if adds && !settles {
			time.Sleep(h.d)
		}
		return next(ctx, cmds)
	}
}

// On a Cluster a settlement's links to other shards are queued before the
// item stops counting as in flight, however slow their nodes: a worker
// polling meanwhile is never told the crawl is done. Sent beside the
// settlement (one pipeline split over the nodes), they arrived after it,
// and the poller got ErrDone.
func TestClusterLinksBeforeSettlement(t *testing.T) {
	cc := hookedCluster(t, 0, slowAdds{d: 300 * time.Millisecond})
	ctx := ctxT(t)
	f := New(cc, &Options{Crawl: "cluster-order"})
	// Every node learns the scripts first: a pipelined call that finds
	// none runs again alone, after the others, which would hide the race.
	var warm []string
	for i := range 40 {
		warm = append(warm, fmt.Sprintf("http://w%d.example/", i))
	}
	if _, err := f.Add(ctx, 0, warm...); err != nil {
		t.Fatal(err)
	}
	drain(t, ctx, f)
	if _, err := f.Add(ctx, 0, "http://a.example/1"); err != nil {
		t.Fatal(err)
	}
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Links on shards of other nodes only: the item's node answers at once.
	links := linksOffNode(t, ctx, cc, f, it.Site, 12)
	settled := make(chan Result, 1)
	go func() { settled <- f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Links: links}) }()
	poller := New(cc, &Options{Crawl: "cluster-order"})
	polled := 0
	for {
		select {
		case r := <-settled:
			if r.Settled != nil {
				t.Fatal(r.Settled)
			}
			if got := polled + len(drain(t, ctx, f)); got != len(links) {
				t.Fatalf("%d URLs in all, want %d", got, len(links))
			}
			return
		default:
		}
		it, err := poller.Next(ctx)
		switch {
		case errors.Is(err, ErrDone):
			t.Fatal("a poller was told the crawl is done while a settlement's links were on their way")
		case err == nil:
			polled++ // a link queued ahead of the settlement
			if err := poller.Done(ctx, it); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// 8 workers crawl a tree of 2,000 pages over 20 sites on 16 shards, each
// page's links mostly on other shards: every page is fetched exactly once,
// and no worker is told the crawl is done before it is.
func TestCrawlTreeAcrossShards(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	const pages = 2000
	page := func(i int) string { return fmt.Sprintf("http://t%d.example/%d", i%20, i) }
	f.Seed(ctx, page(0))
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it, err := f.Next(ctx)
			for {
				var empty *EmptyError
				switch {
				case errors.Is(err, ErrDone):
					return
				case errors.As(err, &empty):
					time.Sleep(time.Millisecond)
					it, err = f.Next(ctx)
					continue
				case err != nil:
					t.Error(err)
					return
				}
				mu.Lock()
				got[it.URL]++
				mu.Unlock()
				var i int
				fmt.Sscanf(it.URL[strings.LastIndex(it.URL, "/")+1:], "%d", &i)
				var links []string
				for _, c := range []int{2*i + 1, 2*i + 2} {
					if c < pages {
						links = append(links, page(c))
					}
				}
				r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Links: links, Next: true})
				if r.Settled != nil {
					t.Error(r.Settled)
				}
				it, err = r.Next, r.NextErr
			}
		}()
	}
	wg.Wait()
	if len(got) != pages {
		t.Fatalf("%d pages fetched before every worker was told the crawl was done; want %d", len(got), pages)
	}
	for u, n := range got {
		if n != 1 {
			t.Fatalf("%s fetched %d times", u, n)
		}
	}
}

// A shard no worker calls for longer than the crawl's TTL, while the only
// worker stays on another shard, whose two sites take turns being ready,
// keeps its keys: each process refreshes the shards it has not called
// (keepCrawl), and their URLs are crawled in the end.
func TestIdleShardsKept(t *testing.T) {
	ctx := ctxT(t)
	const ttl = 2 * time.Second // a refresh every 500 ms
	f := newFrontier(t, Options{Shards: 4, TTL: ttl})
	home := f.lay.Load()
	if home == nil {
		var err error
		if home, err = f.layout(ctx); err != nil {
			t.Fatal(err)
		}
	}
	busy, bySh := map[string]bool{}, map[*shard]string{}
	for i := 0; len(busy) < 2 || len(bySh) < 3; i++ {
		if i > 1000 {
			t.Fatal("no sites for every shard")
		}
		s := fmt.Sprintf("i%d.example", i)
		switch sh := shardOf(t, f, s); {
		case sh == home.shards[0]:
			if len(busy) < 2 {
				busy[s] = true
			}
		case bySh[sh] == "":
			bySh[sh] = s
		}
	}
	for s := range busy {
		if _, err := f.Add(ctx, 0, urls(s, 400)...); err != nil {
			t.Fatal(err)
		}
	}
	it, err := f.Next(ctx)
	if err != nil || !busy[it.Site] {
		t.Fatalf("first item %+v, %v; want one of %v", it, err, busy)
	}
	var others []string
	for _, s := range bySh {
		u := urls(s, 2)
		others = append(others, u...)
		if _, err := f.Add(ctx, 0, u...); err != nil {
			t.Fatal(err)
		}
	}
	// Past the TTL, with every settlement taking a busy site's next URL.
	end := time.Now().Add(ttl + time.Second)
	for time.Now().Before(end) {
		time.Sleep(5 * time.Millisecond) // the fetch
		r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true})
		if r.Settled != nil || r.NextErr != nil {
			t.Fatalf("settling %s: %v, %v", it.URL, r.Settled, r.NextErr)
		}
		if it = r.Next; !busy[it.Site] {
			t.Fatalf("the worker left the busy shard for %s: the test needs it to stay", it.URL)
		}
	}
	if err := f.Done(ctx, it); err != nil {
		t.Fatal(err)
	}
	for sh, s := range bySh {
		if n, err := f.rdb.Exists(ctx, sh.keys...).Result(); err != nil || n != int64(len(sh.keys)) {
			t.Errorf("shard of %s, never called for %v: %d of its %d keys left, %v", s, ttl+time.Second, n, len(sh.keys), err)
		}
	}
	got := map[string]bool{}
	for _, u := range drain(t, ctx, f) {
		got[u] = true
	}
	for _, u := range others {
		if !got[u] {
			t.Errorf("%s was never handed out", u)
		}
	}
}

// layouts are a crawl of several shards and one of one (a page limit), for
// the tests that hold for both.
var layouts = []struct {
	name string
	o    Options
}{
	{"shards", Options{Shards: 4}},
	{"one shard", Options{MaxPages: 10}},
}

// A crawl whose every site waits out a hold-off longer than the TTL makes
// no script call that keeps its keys while its workers look at the shards
// (a probe of every shard, or a quiet take of the one), yet keeps them
// (keepIdle): the site's URL is handed out when the hold-off ends.
func TestHeldOffCrawlKept(t *testing.T) {
	for _, c := range layouts {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			const ttl = 2 * time.Second
			c.o.TTL = ttl
			f := newFrontier(t, c.o)
			if _, err := f.Add(ctx, 0, "http://held.example/1"); err != nil {
				t.Fatal(err)
			}
			it := take(t, f, 1)[0]
			if err := f.Defer(ctx, it, ttl+2*time.Second); err != nil {
				t.Fatal(err)
			}
			sh := shardOf(t, f, it.Site)
			end := time.Now().Add(ttl + time.Second)
			for time.Now().Before(end) {
				if _, err := f.Next(ctx); !errors.As(err, new(*EmptyError)) {
					t.Fatalf("with the only site held off: %v; want nothing ready", err)
				}
				time.Sleep(450 * time.Millisecond) // a crawl's idle worker: about every half second
			}
			if n, err := f.rdb.Exists(ctx, sh.keys...).Result(); err != nil || n != int64(len(sh.keys)) {
				t.Fatalf("after %v of looks: %d of the shard's %d keys left, %v", ttl+time.Second, n, len(sh.keys), err)
			}
			got, err := nextSoon(ctx, f, 2*time.Second)
			if err != nil || got.URL != it.URL {
				t.Fatalf("after the hold-off: %+v, %v; want %s", got, err, it.URL)
			}
		})
	}
}

// hookedCluster is a client of a 3-master test Cluster started for t, with
// hook on every node's client and go-redis's retries as maxRetries says.
func hookedCluster(t *testing.T, maxRetries int, hook redis.Hook) *redis.ClusterClient {
	t.Helper()
	rc, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs(), MaxRetries: maxRetries})
	t.Cleanup(func() { cc.Close() })
	cc.OnNewNode(func(c *redis.Client) { c.AddHook(hook) })
	return cc
}

// linksOffNode is n links (fewer if 1,000 names do not give them) to sites
// whose shards are on other masters than site's.
func linksOffNode(t *testing.T, ctx context.Context, cc *redis.ClusterClient, f *Frontier, site string, n int) []string {
	t.Helper()
	node := func(site string) string {
		c, err := cc.MasterForKey(ctx, shardOf(t, f, site).keys[0])
		if err != nil {
			t.Fatal(err)
		}
		return c.Options().Addr
	}
	var links []string
	for i := 0; len(links) < n && i < 1000; i++ {
		if l := fmt.Sprintf("l%d.example", i); node(l) != node(site) {
			links = append(links, "http://"+l+"/")
		}
	}
	return links
}

// failingLinks is a crawl on a 3-master Cluster whose nodes fail add
// pipelines with err while armed (failAdds), one item of it taken, and
// links for it on other masters.
func failingLinks(t *testing.T, ctx context.Context, o Options, err error) (f *Frontier, it Item, links []string, armed *atomic.Bool) {
	t.Helper()
	armed = new(atomic.Bool)
	cc := hookedCluster(t, -1, failAdds{armed: armed, err: err})
	f = New(cc, &o)
	if _, err := f.Add(ctx, 0, "http://a.example/1"); err != nil {
		t.Fatal(err)
	}
	it, nerr := f.Next(ctx)
	if nerr != nil {
		t.Fatal(nerr)
	}
	return f, it, linksOffNode(t, ctx, cc, f, it.Site, 6), armed
}

// failAdds fails, while armed, a node's pipelines that carry add calls and
// no settlement, sending nothing: that node's part of a settlement is lost.
type failAdds struct {
	armed *atomic.Bool
	err   error // nil: a connection error
}

func (h failAdds) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h failAdds) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h failAdds) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		adds, settles := false, false
		for _, c := range cmds {
			adds = adds || addScript.Is(c)
			settles = settles || settleScript.Is(c)
		}
		if adds && !settles && h.armed.Load() {
			err := h.err
			if err == nil {
				err = errors.New("injected: node unreachable")
			}
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// On a Cluster a settlement whose links to other shards could not be
// queued is not sent: the item stays in flight, comes back after the
// visibility timeout, and its links are queued when it is settled again.
// Sent anyway, it settled the item and the links were never crawled.
func TestClusterLinksLostKeepItem(t *testing.T) {
	ctx := ctxT(t)
	f, it, links, armed := failingLinks(t, ctx, Options{Crawl: "cluster-lost", Visibility: 300 * time.Millisecond}, nil)
	armed.Store(true)
	r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Links: links})
	armed.Store(false)
	if !errors.Is(r.Settled, errLinksLost) || !r.Unsettled {
		t.Fatalf("settling with its links' nodes failing: %v, unsettled %v; want errLinksLost, unsettled", r.Settled, r.Unsettled)
	}
	if st, err := f.Stats(ctx); err != nil || st.InFlight != 1 || st.Done != 0 {
		t.Fatalf("after the failed settlement: %+v, %v; want the item still in flight, nothing done", st, err)
	}
	again, err := nextSoon(ctx, f, time.Second)
	if err != nil || again.URL != it.URL {
		t.Fatalf("after the visibility timeout: %+v, %v; want %s again", again, err, it.URL)
	}
	if r := f.Settle(ctx, Settlement{Item: again, Outcome: Fetched, Links: links}); r.Settled != nil {
		t.Fatal(r.Settled)
	}
	if got := drain(t, ctx, f); len(got) != len(links) {
		t.Fatalf("crawled %v after the second settlement; want the %d links", got, len(links))
	}
}

// oomReply is an error reply of Redis, as go-redis returns one.
type oomReply struct{}

func (oomReply) Error() string { return "OOM command not allowed when used memory > 'maxmemory'." }
func (oomReply) RedisError()   {}

// An add its node refuses for good (out of memory) would be refused again:
// the settlement goes ahead, and says which links were lost, instead of
// the page coming back every visibility timeout for ever.
func TestClusterLinksRefusedSettles(t *testing.T) {
	ctx := ctxT(t)
	f, it, links, armed := failingLinks(t, ctx, Options{Crawl: "cluster-refused"}, oomReply{})
	armed.Store(true)
	r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Links: links})
	armed.Store(false)
	if r.Settled == nil || errors.Is(r.Settled, errLinksLost) || !strings.Contains(r.Settled.Error(), "OOM") || r.Unsettled {
		t.Fatalf("settling with its links refused for good: %v, unsettled %v; want the refusal, the item settled", r.Settled, r.Unsettled)
	}
	if st, err := f.Stats(ctx); err != nil || st.InFlight != 0 || st.Done != 1 {
		t.Fatalf("after the settlement: %+v, %v; want the item done", st, err)
	}
}

// A crawl deleted while a process sits idle on it (--forever) stays
// deleted, keys and registry entry: the idle process's looks (a probe of
// every shard, or a quiet take of the one) write nothing.
func TestDeletedCrawlStaysDeleted(t *testing.T) {
	for _, c := range layouts {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			c.o.TTL = 2 * time.Second // a refresh due every 500 ms
			f := newFrontier(t, c.o)
			if _, err := f.Add(ctx, 0, "http://gone.example/1", "http://gone2.example/1"); err != nil {
				t.Fatal(err)
			}
			drain(t, ctx, f)
			if _, err := Delete(ctx, f.rdb, f.o.Prefix, f.o.Crawl, DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			end := time.Now().Add(1500 * time.Millisecond)
			for time.Now().Before(end) {
				if _, err := f.Next(ctx); err == nil {
					t.Fatal("an item from a deleted crawl")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if keys, err := f.rdb.Keys(ctx, "*"+f.o.Crawl+"*").Result(); err != nil || len(notTomb(keys)) != 0 {
				t.Fatalf("after looks at the deleted crawl: %d keys (%v), %v; want none", len(keys), keys[:min(len(keys), 3)], err)
			}
			if err := f.rdb.ZScore(ctx, registryKey(f.o.Prefix), f.o.Crawl).Err(); !errors.Is(err, redis.Nil) {
				t.Fatalf("the deleted crawl's registry entry: %v; want none", err)
			}
		})
	}
}

// A shard that a refresh-only call (keepCrawl) reaches before any URL of
// it is added gets its keys with the crawl's TTL, as the later call that
// adds one no longer asks for a refresh itself.
func TestRefreshBeforeFirstAddKeepsTTL(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 2, TTL: 2 * time.Second}) // a refresh due every 500 ms
	lay, err := f.layout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	site := func(sh *shard) string {
		for i := range 1000 {
			if s := fmt.Sprintf("r%d.example", i); lay.of(s) == sh {
				return s
			}
		}
		t.Fatal("no site for the shard")
		return ""
	}
	first, second := site(lay.shards[0]), site(lay.shards[1])
	if _, err := f.Add(ctx, 0, "http://"+first+"/1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if _, err := f.Add(ctx, 0, "http://"+first+"/2"); err != nil { // its round trip refreshes the other shard too
		t.Fatal(err)
	}
	if _, err := f.Add(ctx, 0, "http://"+second+"/1"); err != nil {
		t.Fatal(err)
	}
	keys, err := f.rdb.Keys(ctx, "*"+f.o.Crawl+"}*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	for _, k := range keys {
		if ttl, err := f.rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
			t.Errorf("%s: TTL %v, %v; want the crawl's", k, ttl, err)
		}
	}
}
