package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A link longer than MaxURLLength (default 8192 bytes) is dropped: never
// queued, never requested at its site, counted once in Progress, and
// logged (the first at info). A seed that long is refused.
func TestLongLinksAreDropped(t *testing.T) {
	long := "/long/" + strings.Repeat("a", 9<<10) // 9 KiB
	var mu sync.Mutex
	requested := map[string]int{}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requested[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/":
			fmt.Fprintf(w, `<html><body><a href="%s">long</a> <a href="/short">short</a></body></html>`, long)
		case "/short", long:
			fmt.Fprint(w, `<html><body>leaf</body></html>`)
		default:
			http.NotFound(w, r) // robots.txt too: everything allowed
		}
	}))
	defer site.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var log logBuf
	c := crawlerOn(t, fmt.Sprintf("t:long:%d", time.Now().UnixNano()), "long", &log, Options{Workers: 2})
	if _, err := c.Seed(ctx, []string{site.URL + long}); !errors.Is(err, ErrURLTooLong) {
		t.Fatalf("seeding a 9 KiB URL: %v; want ErrURLTooLong", err)
	}
	if _, err := c.Seed(ctx, []string{site.URL + "/"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if requested["/"] != 1 || requested["/short"] != 1 {
		t.Fatalf("requests %v: want / and /short once each (the test proves nothing otherwise)", keys(requested))
	}
	if n := requested[long]; n != 0 {
		t.Errorf("the 9 KiB link was requested %d times", n)
	}
	if p := c.Progress(); p.TooLong != 1 || p.Pages != 2 {
		t.Errorf("progress %+v: want 2 pages and 1 link too long", p)
	}
	if got := log.String(); !strings.Contains(got, "level=INFO msg=\"links longer than the maximum URL length dropped") {
		t.Errorf("the dropped link was not logged at info; the log:\n%s", got)
	}
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprintf("%.40s (%d)", k, m[k]))
	}
	return out
}
