package frontier

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/redistest"
)

// forget takes raw's fingerprint out of the crawl's seen sets, as if Redis
// had never seen it: a process that still sends raw gets it admitted again.
func forget(t *testing.T, ctx context.Context, f *Frontier, raw string) {
	t.Helper()
	norm, site, err := f.normalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	_, member, bucket := f.lay.Load().fingerprint(norm)
	if n := f.rdb.SRem(ctx, f.lay.Load().of(site).base+"seen:"+bucket, member).Val(); n != 1 {
		t.Fatalf("%s was not in the seen set", raw)
	}
}

// A process does not send again a URL it has had admitted or found seen:
// with the URL gone from Redis, the process that sent it still leaves it
// out, and another process, which never sent it, has it admitted.
func TestSeenCacheSkipsKnownURLs(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	if n, err := f.Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	forget(t, ctx, f, "http://a.example/x")
	if n, err := f.Add(ctx, 0, "http://a.example/x", "http://a.example/y"); err != nil || n != 1 {
		t.Fatalf("Add again: %d, %v; want only y admitted", n, err)
	}
	if n, err := join(f, Options{}).Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("another process: %d, %v; want x admitted (it never sent it)", n, err)
	}

	// A page's links: settled once, known; the settlement that found them
	// need not send them again.
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, settled, err := f.DoneNext(ctx, it, []string{"http://a.example/z"}); settled != nil || err != nil {
		t.Fatalf("DoneNext: %v, %v", settled, err)
	}
	forget(t, ctx, f, "http://a.example/z")
	if n, err := f.Add(ctx, 1, "http://a.example/z"); err != nil || n != 0 {
		t.Fatalf("a link found before, sent again: %d, %v", n, err)
	}
}

// A call that did not answer teaches the process nothing: the URL is sent
// with the next call.
func TestSeenCacheOnlyAfterAnAnswer(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	if _, err := f.Add(ctx, 0, "http://a.example/"); err != nil { // resolves the layout
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.Add(cancelled, 0, "http://a.example/x"); err == nil {
		t.Fatal("Add with a cancelled context succeeded")
	}
	if n, err := f.Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("Add after a failed call: %d, %v; want 1", n, err)
	}
}

// With a page limit a script may drop a new URL and forget it, so the
// process keeps no cache: every URL is sent and Redis decides.
func TestSeenCacheOffWithPageLimit(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{MaxPages: 100})
	if n, err := f.Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	forget(t, ctx, f, "http://a.example/x")
	if n, err := f.Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("Add again: %d, %v; want it sent and admitted", n, err)
	}
}

// Redis found without the frontier's scripts (restarted, failed over,
// flushed) may have lost the seen sets too: the process forgets what it
// knew, and sends its links again.
func TestSeenCacheForgottenWhenRedisLosesScripts(t *testing.T) {
	ctx := ctxT(t)
	own, err := redistest.Start() // its own server: the flush must not reach other tests' scripts
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	rdb := own.Client()
	defer rdb.Close()
	f := New(rdb, &Options{Crawl: "flushed"})
	if n, err := f.Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	forget(t, ctx, f, "http://a.example/x")
	if err := forgetScripts(ctx, f.rdb); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Add(ctx, 0, "http://a.example/y"); err != nil || n != 1 { // finds no function
		t.Fatalf("Add after FUNCTION FLUSH: %d, %v", n, err)
	}
	if n, err := f.Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("Add of a URL Redis lost: %d, %v; want it sent and admitted", n, err)
	}
}

// Redis restarted with its data (append-only file) has its functions, so
// no call finds them gone, but it may have lost the last writes: the
// library's new instance tells, and the process forgets what it knew.
func TestSeenCacheForgottenWhenRedisRestartsWithItsData(t *testing.T) {
	ctx := ctxT(t)
	own, err := redistest.StartAOF("always")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	rdb := own.Client()
	defer rdb.Close()
	f := New(rdb, &Options{Crawl: "restarted"})
	if n, err := f.Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	forget(t, ctx, f, "http://a.example/x") // a write the restarted server does not have
	if n, _ := f.Add(ctx, 0, "http://a.example/x"); n != 0 {
		t.Fatal("the cache did not skip x: this test tests nothing")
	}
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	if libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lib.Name()}).Result(); err != nil || len(libs) != 1 {
		t.Fatalf("the library after the restart: %v %v; want it restored, so that no call finds it gone", libs, err)
	}
	if n, err := f.Add(ctx, 0, "http://a.example/y"); err != nil || n != 1 {
		t.Fatalf("Add after the restart: %d, %v", n, err)
	}
	if n, err := f.Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("Add of a URL Redis lost, after a restart: %d, %v; want it sent and admitted", n, err)
	}
}

// failNextCall fails the next pipeline's add call, as a connection lost
// in a failover does, once armed.
type failNextCall struct{ armed atomic.Bool }

func (h *failNextCall) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *failNextCall) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *failNextCall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if addScript.Is(c) && h.armed.CompareAndSwap(true, false) {
				err := errors.New("injected: connection reset")
				c.SetErr(err)
				return err
			}
		}
		return next(ctx, cmds)
	}
}

// A failover shows only as failed calls (a replica has the functions, but
// may lack the last writes, the seen sets' included): the process forgets
// what it knew then too, and sends its links again.
func TestSeenCacheForgottenWhenACallFails(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	fail := &failNextCall{}
	f.rdb.(*redis.Client).AddHook(fail)
	if n, err := f.Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("Add: %d, %v", n, err)
	}
	forget(t, ctx, f, "http://a.example/x") // a write the new master never had
	if n, _ := f.Add(ctx, 0, "http://a.example/x"); n != 0 {
		t.Fatal("the cache did not skip x: this test tests nothing")
	}
	fail.armed.Store(true)
	if _, err := f.Add(ctx, 0, "http://a.example/y"); err == nil {
		t.Fatal("the injected failure did not reach Add")
	}
	if n, err := f.Add(ctx, 0, "http://a.example/x"); err != nil || n != 1 {
		t.Fatalf("Add of a URL Redis lost, after a failed call: %d, %v; want it sent and admitted", n, err)
	}
}

// A Frontier that never admits anything (Open, List) makes no table.
func TestSeenCacheMadeOnFirstUse(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{})
	if _, err := f.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	if f.seen.table.Load() != nil {
		t.Fatal("a table made before any URL was admitted")
	}
	if _, err := f.Add(ctx, 0, "http://a.example/"); err != nil {
		t.Fatal(err)
	}
	if f.seen.table.Load() == nil {
		t.Fatal("no table after a URL was admitted")
	}
}

// Fingerprints whose call was sent before the cache was emptied are not
// remembered when its answer comes after (the call may have run before
// Redis lost the seen sets): with several round trips on their way, one
// can meet NOSCRIPT and empty the cache while another, run before the
// loss, still waits for its answer.
func TestSeenCacheSkipsAnswersFromBeforeItWasEmptied(t *testing.T) {
	var c seenCache
	c.add([]uint64{7}, c.generation())
	if !c.has(7) {
		t.Fatal("a fingerprint added in the current generation is not known")
	}
	before := c.generation()
	c.clear()
	c.add([]uint64{8}, before) // sent before the clear, answered after
	if c.has(8) || c.has(7) {
		t.Fatal("a fingerprint sent before the cache was emptied is known after it")
	}
	c.add([]uint64{9}, c.generation())
	if !c.has(9) {
		t.Fatal("a fingerprint sent after the cache was emptied is not known")
	}
}
