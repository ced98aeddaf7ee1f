package main

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// crawler runs the binary to its end: its stdout, stderr and exit code.
func crawler(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, build(t), args...)
	var out, errs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("crawler %v: %v", args, err)
	}
	return out.String(), errs.String(), code
}

// A crawl's life through the binary: a run stops at --max-pages, with its
// --crawl-ttl on the keys; status shows the limits the crawl uses (not its
// own flags), crawls lists it at its limit; a second run with a higher
// --max-pages (and its own --max-per-site, which status then shows) continues with the links the first found past the limit and
// fetches none twice; delete is a dry run without --yes, then deletes
// every key of the crawl; an unknown crawl is an error (exit 1) for status
// and delete.
func TestCrawlLifecycle(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ts, seeds := startSites(t, "uniform", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rdb := rs.Client()
	defer rdb.Close()
	redisURL := "redis://" + rs.Addr
	crawl := "life"
	opened := func() (frontier.Meta, frontier.Stats) {
		t.Helper()
		f, m, err := frontier.Open(ctx, rdb, &frontier.Options{Crawl: crawl})
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m, st
	}
	run := func(maxPages, perSite string) {
		t.Helper()
		args := append([]string{"run", "--redis", redisURL, "--crawl", crawl, "--progress", "1h", "--max-pages", maxPages,
			"--max-per-site", perSite, "--crawl-ttl", "2h"}, seeds...)
		if _, stderr, code := crawler(t, ctx, args...); code != 0 {
			t.Fatalf("run --max-pages %s: exit %d\n%s", maxPages, code, stderr)
		}
	}

	run("5", "2")
	m, st := opened()
	if st.Done+st.Failed != 5 || st.Admitted != 5 || st.Over == 0 {
		t.Fatalf("after a run to --max-pages 5: %+v", st)
	}
	if ttl := rdb.PTTL(ctx, "polite:{crawl:life}:meta").Val(); ttl <= time.Hour || ttl > 2*time.Hour {
		t.Fatalf("meta TTL %s; want --crawl-ttl 2h", ttl)
	}
	if m.MaxPages != 5 || m.MaxPerSite != 2 || m.Shards != 1 {
		t.Fatalf("meta %+v", m)
	}
	out, stderr, code := crawler(t, ctx, "status", "--redis", redisURL, "--crawl", crawl, "--max-per-site", "7")
	if code != 0 || !strings.Contains(out, "1 shards, max pages 5 (") || !strings.Contains(out, "max per site 2") ||
		!strings.Contains(out, "site key host") || strings.Contains(out, "max per site 7") {
		t.Fatalf("status: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = crawler(t, ctx, "crawls", "--redis", redisURL)
	if code != 0 || !hasRow(out, crawl, "limit") {
		t.Fatalf("crawls: exit %d\n%s%s", code, out, stderr)
	}

	run("12", "1")
	if _, st := opened(); st.Done+st.Failed != 12 || st.Admitted != 12 || st.Queued != 0 {
		t.Fatalf("after a run with --max-pages 12: %+v", st)
	}
	checkFetchedOnce(t, ts)
	if m, _ := opened(); m.MaxPages != 12 || m.MaxPerSite != 1 {
		t.Fatalf("meta after the second run %+v", m)
	}

	for _, args := range [][]string{{"status", "--crawl", "nosuchcrawl"}, {"delete", "--crawl", "nosuchcrawl", "--yes"}} {
		out, stderr, code := crawler(t, ctx, append(args, "--redis", redisURL)...)
		if code != 1 || !strings.Contains(stderr, "no crawl nosuchcrawl under prefix polite (see crawler crawls)") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
	}
	if n := rdb.Exists(ctx, "polite:{crawl:nosuchcrawl}:meta").Val(); n != 0 {
		t.Fatal("status created the crawl it did not find")
	}

	keys := func() []string {
		ks, err := rdb.Keys(ctx, "polite:*crawl:"+crawl+"}*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	before := len(keys())
	robotsKeys, _ := rdb.Keys(ctx, "polite:*robots*").Result()
	out, stderr, code = crawler(t, ctx, "delete", "--redis", redisURL, "--crawl", crawl)
	if code != 0 || !strings.Contains(out, "would delete crawl life") || !strings.Contains(out, "nothing deleted") || len(keys()) != before {
		t.Fatalf("delete without --yes: exit %d, %d of %d keys left\n%s%s", code, len(keys()), before, out, stderr)
	}
	out, stderr, code = crawler(t, ctx, "delete", "--redis", redisURL, "--crawl", crawl, "--yes")
	if code != 0 || !strings.HasPrefix(out, "deleted crawl life") || len(notTombstone(keys())) != 0 {
		t.Fatalf("delete --yes: exit %d, keys left %q\n%s%s", code, keys(), out, stderr)
	}
	if ks, _ := rdb.Keys(ctx, "polite:*robots*").Result(); len(ks) != len(robotsKeys) || len(ks) == 0 {
		t.Errorf("robots.txt keys %q after delete, %q before: crawls share them, and delete must leave them", ks, robotsKeys)
	}
	out, _, code = crawler(t, ctx, "crawls", "--redis", redisURL)
	if code != 0 || !strings.Contains(out, "no crawls under prefix polite") {
		t.Fatalf("crawls after delete: exit %d\n%s", code, out)
	}
}

// delete refuses a crawl with items in flight unless --force.
func TestDeleteRunningCrawl(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := rs.Client()
	defer rdb.Close()
	f := frontier.New(rdb, &frontier.Options{Crawl: "busy"})
	if _, err := f.Seed(ctx, "http://a.example/", "http://b.example/"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Next(ctx); err != nil { // in flight, as a worker's
		t.Fatal(err)
	}
	redisURL := "redis://" + rs.Addr
	out, stderr, code := crawler(t, ctx, "crawls", "--redis", redisURL)
	if code != 0 || !hasRow(out, "busy", "running") {
		t.Fatalf("crawls: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = crawler(t, ctx, "delete", "--redis", redisURL, "--crawl", "busy", "--yes")
	if code != 1 || !strings.Contains(stderr, "crawl busy has 1 items in flight: stop its workers first, or add --force") {
		t.Fatalf("delete of a running crawl: exit %d\n%s%s", code, out, stderr)
	}
	if _, _, err := frontier.Open(ctx, rdb, &frontier.Options{Crawl: "busy"}); err != nil {
		t.Fatalf("after a refused delete: %v", err)
	}
	out, stderr, code = crawler(t, ctx, "delete", "--redis", redisURL, "--crawl", "busy", "--yes", "--force")
	if code != 0 || !strings.HasPrefix(out, "deleted crawl busy") {
		t.Fatalf("delete --force: exit %d\n%s%s", code, out, stderr)
	}
	if ks, _ := rdb.Keys(ctx, "*busy*").Result(); len(notTombstone(ks)) != 0 {
		t.Fatalf("left %q", ks)
	}
	if err := rdb.ZScore(ctx, "polite:crawls", "busy").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("registry entry: %v", err)
	}
}

// notTombstone is keys without the tombstone a deleted crawl leaves for
// its processes still running (frontier.Delete).
func notTombstone(keys []string) []string {
	return slices.DeleteFunc(keys, func(k string) bool { return strings.HasSuffix(k, "}:deleted") })
}

// hasRow is whether a table line starts with the name, then the state.
func hasRow(table, name, state string) bool {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == name && f[1] == state {
			return true
		}
	}
	return false
}

// status names a crawl whose meta is gone as lost (its queues remain) or
// expired (nothing remains but its registry entry), with what to do, not
// as no crawl; delete then removes it, and status says there is none.
func TestStatusLostCrawl(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := rs.Client()
	defer rdb.Close()
	redisURL := "redis://" + rs.Addr
	status := func(crawl, want string) {
		t.Helper()
		out, stderr, code := crawler(t, ctx, "status", "--redis", redisURL, "--crawl", crawl)
		if code != 1 || !strings.Contains(stderr, want) {
			t.Fatalf("status of %s: exit %d, want %q\n%s%s", crawl, code, want, out, stderr)
		}
	}
	for _, crawl := range []string{"gone", "expired"} {
		f := frontier.New(rdb, &frontier.Options{Crawl: crawl})
		if _, err := f.Seed(ctx, "http://a.example/"); err != nil {
			t.Fatal(err)
		}
		// gone loses its meta alone; expired every key but its registry
		// entry, as when its TTL ran out.
		pattern := "polite:{crawl:" + crawl + "}:meta"
		if crawl == "expired" {
			pattern = "polite:*crawl:" + crawl + "}*"
		}
		ks, err := rdb.Keys(ctx, pattern).Result()
		if err != nil || len(ks) == 0 {
			t.Fatalf("keys %s: %q, %v", pattern, ks, err)
		}
		if err := rdb.Del(ctx, ks...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	status("gone", "crawl gone under prefix polite is lost: Redis no longer has its record (meta), but its queues are still there")
	status("gone", "`crawler delete --crawl gone` removes what is left")
	status("expired", "crawl expired under prefix polite has expired: it is registered, but its keys are gone")
	for _, crawl := range []string{"gone", "expired"} {
		out, stderr, code := crawler(t, ctx, "delete", "--redis", redisURL, "--crawl", crawl, "--yes")
		if code != 0 {
			t.Fatalf("delete %s: exit %d\n%s%s", crawl, code, out, stderr)
		}
		status(crawl, "no crawl "+crawl+" under prefix polite (see crawler crawls)")
	}
}

// A crawl deleted (--force) under a running process stops it: the
// settlement of a page it held finds the page no longer in flight, and
// the process then looks at the crawl's meta and finds it deleted, at
// once rather than at its next refresh (a quarter of --crawl-ttl, 15 s
// here). It exits 1 and says why. What it made again on its way (a few
// keys of the shard its last settlement went to) expires with the crawl's
// TTL; it puts back no meta and no registry entry.
func TestDeletedCrawlStopsRun(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, started, _, requested := slowSite(t, 100*time.Millisecond)
	go func() { // the site's pages link on for ever: take its signals as they come
		for {
			select {
			case <-requested:
			case <-ctx.Done():
				return
			}
		}
	}()
	cmd, log := startRun(t, ctx, rs.Addr, url, "--workers", "2", "--crawl-ttl", "1m")
	for started.Load() < 3 {
		time.Sleep(20 * time.Millisecond)
	}
	redisURL := "redis://" + rs.Addr
	out, stderr, code := crawler(t, ctx, "delete", "--redis", redisURL, "--crawl", t.Name(), "--yes", "--force")
	if code != 0 {
		t.Fatalf("delete --force: exit %d\n%s%s", code, out, stderr)
	}
	deleted := time.Now()
	err = log.wait(cmd)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(log.String(), "was deleted (crawler delete)") {
		t.Fatalf("run after its crawl was deleted: %v, want exit 1 saying why\n%s", err, log)
	}
	if took := time.Since(deleted); took > 10*time.Second {
		t.Errorf("the process stopped %s after the delete; want it at its next settlement, not its refresh", took)
	}
	rdb := rs.Client()
	defer rdb.Close()
	for _, k := range rdb.Keys(ctx, "polite:*crawl:"+t.Name()+"}*").Val() {
		if strings.HasSuffix(k, "}:deleted") { // the tombstone (10 minutes)
			continue
		}
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Minute || strings.HasSuffix(k, "}:meta") {
			t.Errorf("after the process stopped, the deleted crawl has %s with TTL %v", k, ttl)
		}
	}
	if err := rdb.ZScore(ctx, "polite:crawls", t.Name()).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("registry entry after the process stopped: %v", err)
	}
}
