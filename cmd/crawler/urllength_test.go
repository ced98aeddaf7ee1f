package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// --max-url-length reaches the crawler: a link longer than it is never
// requested, and counted in the closing log line; a shorter one is fetched.
// A seed longer than it is a usage error (exit 2) that names the flag.
func TestMaxURLLengthFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	long := "/long?q=" + strings.Repeat("x", 400) // over 256 with the origin, under the default 8192
	var mu sync.Mutex
	seen := map[string]int{}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprintf(w, `<a href="%s">long</a> <a href="/short">short</a>`, long)
		}
	}))
	defer site.Close()
	for _, c := range []struct {
		max      string
		wantLong int
	}{{"300", 0}, {"8192", 1}} {
		mu.Lock()
		clear(seen)
		mu.Unlock()
		cmd := worker(t, ctx, build(t), nil, rs.Addr, []string{site.URL + "/"}, "--lease", "1s", "--crawl", "max-url-"+c.max, "--max-url-length", c.max)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("--max-url-length %s: %v\n%s", c.max, err, cmd.Stderr)
		}
		mu.Lock()
		gotLong, gotShort := seen["/long"], seen["/short"]
		mu.Unlock()
		log := cmd.Stderr.(*strings.Builder).String()
		if gotLong != c.wantLong || gotShort != 1 || !strings.Contains(log, fmt.Sprintf(`"links_too_long":%d`, 1-c.wantLong)) {
			t.Errorf("--max-url-length %s: the long link fetched %d times (want %d), the short one %d (want 1); log:\n%s", c.max, gotLong, c.wantLong, gotShort, log)
		}
	}
	cmd := worker(t, ctx, build(t), nil, rs.Addr, []string{site.URL + long}, "--max-url-length", "300")
	err = cmd.Wait()
	if log := cmd.Stderr.(*strings.Builder).String(); exitCode(err) != 2 || !strings.Contains(log, "--max-url-length") {
		t.Errorf("a seed over --max-url-length: exit %d, want 2 naming the flag; output:\n%s", exitCode(err), log)
	}
}
