package main

import (
	"context"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// Hostile sites: 64 MiB bodies, 5 s slow drips, redirect loops, odd link
// schemes, invalid UTF-8, 300 links a page, and robots.txt answering 500,
// 429, 7 redirects or 500 KiB of padding. The crawl ends, every cap holds,
// no closed path is fetched, no permit is left in Redis, and the process
// stays within bounded memory.
func TestHostileSites(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ts, seeds := startSites(t, "hostile", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Adaptive politeness is off: it would crawl the site that answers a
	// third of its pages with 429, 500 and 503 one request at a time under
	// growing hold-offs (over 3 minutes, even scaled down), as it should;
	// it has tests of its own. This one is about hostile input.
	cmds := fleet(t, ctx, 1, rs.Addr, seeds, "--workers", "8", "--lease", "2s", "--max-body-size", "1048576", "--timeout", "10s", "--visibility", "30s",
		"--adaptive=false")
	if err := cmds[0].Wait(); err != nil {
		t.Fatalf("crawler: %v\n%s", err, cmds[0].Stderr)
	}
	checkPolite(t, ts)
	var fetched int64
	for _, s := range ts.Stats().Sites {
		fetched += s.Pages
	}
	if fetched == 0 {
		t.Fatal("nothing was fetched: the test proves nothing")
	}
	rdb := rs.Client()
	defer rdb.Close()
	lim := limiter.New(rdb, &limiter.Options{Prefix: "polite"})
	defer lim.Close()
	for _, s := range ts.Sites() {
		u, _ := url.Parse(s.URL)
		st, err := lim.Status(ctx, robots.Site(u), 3)
		if err != nil || st.Holders != 0 || st.Waiting != 0 {
			t.Errorf("%s after the crawl: %+v %v, want no permit held and nobody waiting", s.URL, st, err)
		}
	}
	// Max RSS of the crawler process, in KiB on Linux: one 64 MiB body read
	// whole would show; bodies are cut at 1 MiB.
	if ru, ok := cmds[0].ProcessState.SysUsage().(*syscall.Rusage); ok {
		t.Logf("%d pages fetched; crawler max RSS %d MiB", fetched, ru.Maxrss>>10)
		if ru.Maxrss > 256<<10 {
			t.Errorf("crawler max RSS %d MiB, want under 256 MiB", ru.Maxrss>>10)
		}
	}
}
