package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redistest"
)

// A worker that joins a crawl with --forever and no seeds, as the README
// suggests, follows the crawl's scope, which the seeded worker stored in
// Redis: when the seeded worker is interrupted as soon as it has seeded,
// the seedless one alone fetches every reachable page. With the scope in
// each process's memory it followed no link, and said nothing.
func TestSeedlessWorkerJoinsACrawl(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ts, seeds := startSites(t, "uniform", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := build(t)
	// A short visibility: a URL the interrupted worker took as it stopped
	// may come back only when it runs out.
	extra := []string{"--lease", "1s", "--timeout", "4s", "--visibility", "6s"}
	seedless := worker(t, ctx, bin, nil, rs.Addr, nil, append([]string{"--forever", "--workers", "4"}, extra...)...)
	time.Sleep(time.Second) // most often it starts before the crawl has a scope; either way it must follow it

	rdb := rs.Client()
	defer rdb.Close()
	fr := frontier.New(rdb, &frontier.Options{Crawl: t.Name()})
	seeded := worker(t, ctx, bin, nil, rs.Addr, seeds, append([]string{"--workers", "1"}, extra...)...)
	// fail stops both workers, so that they show what they logged.
	fail := func(format string, args ...any) {
		t.Helper()
		for _, cmd := range []*exec.Cmd{seeded, seedless} {
			cmd.Process.Signal(syscall.SIGINT)
			cmd.Wait()
		}
		t.Fatalf(format, args...)
	}
	stats := func() frontier.Stats {
		st, err := fr.Stats(ctx)
		if err != nil {
			fail("%v", err)
		}
		return st
	}
	for deadline := time.Now().Add(30 * time.Second); stats().Admitted < int64(len(seeds)); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			fail("the seeded worker did not seed the crawl in 30 s")
		}
	}
	seeded.Process.Signal(syscall.SIGINT) // it stops early: the other must do the rest
	interrupted(t, seeded.Wait(), "seeded worker", seeded.Stderr.(fmt.Stringer))
	// Links are queued in the same script that settles their page, so a
	// drained frontier means the crawl is over.
	deadline := time.Now().Add(2 * time.Minute)
	for st := stats(); st.Queued > 0 || st.InFlight > 0; st = stats() {
		if time.Now().After(deadline) {
			fail("the crawl did not drain in 2 min: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	seedless.Process.Signal(syscall.SIGINT)
	interrupted(t, seedless.Wait(), "seedless worker (--forever)", seedless.Stderr.(fmt.Stringer))
	checkPolite(t, ts)
	checkAllFetched(t, ts)
	// The interrupted worker (one worker) may have cut one request short,
	// robots.txt or a page, which the other then made again.
	checkRefetchedAtMost(t, ts, 1)
	var pages int
	for i := range ts.Sites() {
		pages += len(ts.FetchedOK(i))
	}
	log := seedless.Stderr.(*strings.Builder).String()
	t.Logf("%d pages fetched (robots.txt included); seedless worker saw no scope at start: %v", pages, strings.Contains(log, "no scope yet"))
}
