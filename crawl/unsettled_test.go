package crawl

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowFirstSite answers its first request for /slow after hold, and every
// other at once; it counts the requests by path.
type slowFirstSite struct {
	hold time.Duration
	mu   sync.Mutex
	hits map[string]int
}

func (s *slowFirstSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	n := s.hits[r.URL.Path]
	s.mu.Unlock()
	switch r.URL.Path {
	case "/robots.txt":
		fmt.Fprint(w, "User-agent: *\nAllow: /\n")
	case "/slow":
		if n == 1 {
			time.Sleep(s.hold)
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>slow once</p>")
	default:
		http.NotFound(w, r)
	}
}

// A turn whose settlement comes after its item was handed to another
// worker (its fetch outlived the visibility timeout) is not its URL's last:
// the other worker's turn is. Its line says "retry", caused by "not
// settled", with the frontier's error, and the process's counts and
// summary still give the URL one final outcome.
func TestLostSettlementIsNotFinal(t *testing.T) {
	site := &slowFirstSite{hold: 3 * time.Second, hits: map[string]int{}}
	hs := httptest.NewServer(site)
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	c := visibleCrawler(t, "lost", &out, time.Second)
	if _, err := c.Seed(ctx, []string{hs.URL + "/slow"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	site.mu.Lock()
	hits := site.hits["/slow"]
	site.mu.Unlock()
	if hits != 2 {
		t.Fatalf("/slow requested %d times, want 2 (once by the worker that outlived the visibility timeout)", hits)
	}
	lines := readResults(t, &out)
	got := lines[hs.URL+"/slow"]
	var finals, lost int
	for _, r := range got {
		if r.Final {
			finals++
		}
		if r.Outcome == "retry" && r.Cause == "not settled" && r.Status == 200 && strings.Contains(r.Error, "no longer held") {
			lost++
		}
	}
	if len(got) != 2 || finals != 1 || lost != 1 {
		t.Fatalf("/slow: %d lines, %d final, %d not settled; want 2, 1 and 1: %+v", len(got), finals, lost, got)
	}
	checkAddsUp(t, c.Progress(), lines, time.Since(start))
}
