package crawl

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// A process whose workers all went idle while another process held the
// crawl's only URL joins in as soon as that page's links are queued: its
// watcher asks again within a fraction of a second, where its workers used
// to sleep out their idle poll (a second and more). Process A (one worker)
// fetches the seed, which the site answers once process B (two workers)
// has started, found nothing ready and idled for 150 ms; the seed's eight
// links then wait for B, A being busy with one of them.
func TestIdleProcessSeesOtherProcessesURLs(t *testing.T) {
	const pageTime = 300 * time.Millisecond
	var mu sync.Mutex
	var seedDone time.Time
	var firstB time.Time
	seedStarted, answer := make(chan struct{}), make(chan struct{})
	var seedOnce sync.Once
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		if strings.HasPrefix(r.UserAgent(), "bbot") && firstB.IsZero() {
			firstB = time.Now()
		}
		mu.Unlock()
		if r.URL.Path == "/" {
			seedOnce.Do(func() { close(seedStarted) })
			<-answer
		} else {
			time.Sleep(pageTime)
		}
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := range 8 {
				fmt.Fprintf(w, `<a href="/p%d">p%d</a>`, i, i)
			}
			w.(http.Flusher).Flush()
			mu.Lock()
			seedDone = time.Now()
			mu.Unlock()
			return
		}
		fmt.Fprint(w, "<p>leaf</p>")
	}))
	defer site.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := redistest.Prefix(t)
	start := func(workers int, ua string) (*Crawler, chan error) {
		rdb := srv.Client()
		t.Cleanup(func() { rdb.Close() })
		lim := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: 5 * time.Second, NoRestartGuard: true})
		t.Cleanup(func() { lim.Close() })
		rob := NewRobotsCache(rdb, lim, 3, robots.CacheOptions{Prefix: prefix, UserAgent: ua}, nil)
		fr := frontier.New(rdb, &frontier.Options{Prefix: prefix, Crawl: "watch", Visibility: time.Minute})
		return New(fr, lim, rob, Options{Workers: workers, UserAgent: ua, Timeout: 20 * time.Second}), make(chan error, 1)
	}
	a, aDone := start(1, "abot/1.0")
	if _, err := a.Seed(ctx, []string{site.URL + "/"}); err != nil {
		t.Fatal(err)
	}
	go func() { aDone <- a.Run(ctx) }()
	// B starts once the seed is being fetched, near its end.
	select {
	case <-seedStarted:
	case <-ctx.Done():
		t.Fatal("A did not fetch the seed")
	}
	b, bDone := start(2, "bbot/1.0")
	go func() { bDone <- b.Run(ctx) }()
	time.Sleep(150 * time.Millisecond) // B looks, finds nothing, idles
	close(answer)
	for _, done := range []chan error{aDone, bDone} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if firstB.IsZero() {
		t.Fatal("B fetched nothing")
	}
	// Before watchers: 0.85 s and more (B's workers' idle poll, 1 to 1.25 s
	// from their first look); with them 0.25 s at most (the watcher's
	// third look, 350 ms after its first, and a quarter's jitter).
	d := firstB.Sub(seedDone)
	t.Logf("B's first request %v after the seed's links were queued", d)
	if d > 600*time.Millisecond {
		t.Fatalf("B's first request came %v after the seed's links were queued; want it within 600ms", d)
	}
}
