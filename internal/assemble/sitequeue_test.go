package assemble

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// wideSite's root links to n leaves, which link nowhere; it counts the
// page requests.
func wideSite(t *testing.T, n int) (*httptest.Server, *atomic.Int64) {
	var pages atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
			return
		}
		pages.Add(1)
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := range n {
				fmt.Fprintf(w, "<a href=\"/leaf%d\">%d</a>\n", i, i)
			}
		}
	}))
	t.Cleanup(hs.Close)
	return hs, &pages
}

// --max-queued-per-site bounds one site's queue: the links past it are
// dropped, counted and warned of, and the site sees only the pages queued;
// 0 sets no bound.
func TestMaxQueuedPerSite(t *testing.T) {
	for _, c := range []struct {
		bound, want, full int
	}{
		{5, 1 + 5, 25},
		{0, 1 + 30, 0},
	} {
		t.Run(fmt.Sprint(c.bound), func(t *testing.T) {
			hs, pages := wideSite(t, 30)
			cfg := settings(t)
			cfg.MaxQueuedPerSite, cfg.Shards, cfg.Sitemaps = c.bound, 1, false
			cr, logs := build(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := cr.Seed(ctx, []string{hs.URL + "/"}); err != nil {
				t.Fatal(err)
			}
			if err := cr.Run(ctx, nil); err != nil {
				t.Fatal(err)
			}
			st, err := cr.Frontier.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := pages.Load(); got != int64(c.want) || st.SiteFull != int64(c.full) || st.Done != int64(c.want) {
				t.Fatalf("the site saw %d pages, the frontier %d done and %d links dropped at the bound; want %d, %d, %d (stats %+v)",
					got, st.Done, st.SiteFull, c.want, c.want, c.full, st)
			}
			if warned := strings.Contains(logs.String(), "links dropped"); warned != (c.full > 0) {
				t.Fatalf("warned of links dropped: %v, want %v; log:\n%s", warned, c.full > 0, logs)
			}
		})
	}
}
