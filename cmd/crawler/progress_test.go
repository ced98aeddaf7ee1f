package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
)

// While the only site is held off and nothing else is ready, progress says
// which site comes next, in how long and why: its robots.txt Crawl-delay,
// or a 429's Retry-After.
func TestProgressSaysWhyItWaits(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for _, c := range []struct{ name, robots, why string }{
		{"crawl-delay", "User-agent: *\nCrawl-delay: 3\n", "crawl delay"},
		{"retry-after", "User-agent: *\nAllow: /\n", "Retry-After"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var throttled atomic.Bool
			site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/robots.txt":
					fmt.Fprint(w, c.robots)
				case c.why == "Retry-After" && r.URL.Path == "/" && throttled.CompareAndSwap(false, true): // the seed's first fetch
					w.Header().Set("Retry-After", "4")
					w.WriteHeader(http.StatusTooManyRequests)
				default:
					w.Header().Set("Content-Type", "text/html")
					if r.URL.Path == "/" {
						fmt.Fprint(w, `<a href="/a">a</a>`)
					}
				}
			}))
			defer site.Close()
			// No sitemaps: their reader would wait for the site's permit
			// during the hold, and progress then counts a waiter instead.
			cmd := worker(t, ctx, build(t), nil, rs.Addr, []string{site.URL + "/"}, "--progress", "200ms", "--lease", "1s", "--sitemaps=false")
			if err := cmd.Wait(); err != nil {
				t.Fatalf("crawl: %v", err)
			}
			log := cmd.Stderr.(*strings.Builder).String()
			host := strings.TrimPrefix(site.URL, "http://")
			const want = `"waiting":"waiting: next site ready in `
			found := ""
			for _, line := range strings.Split(log, "\n") {
				if found == "" && strings.Contains(line, want) && strings.Contains(line, "("+host+": "+c.why+")") {
					found = line
				}
			}
			t.Logf("%s", found)
			if found == "" {
				t.Fatalf("no progress record says %q with (%s: %s); log:\n%s", want, host, c.why, log)
			}
		})
	}
}

// On a Redis that has just started, the restart guard holds every permit
// back for a lease and a second: progress says so while it waits.
func TestProgressSaysRestartGuard(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer site.Close()
	cmd := worker(t, ctx, build(t), nil, rs.Addr, []string{site.URL + "/"}, "--progress", "200ms", "--lease", "3s")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("crawl: %v", err)
	}
	log := cmd.Stderr.(*strings.Builder).String()
	const want = `"waiting":"waiting: Redis started less than a lease ago: no permits for `
	if !strings.Contains(log, want) || !strings.Contains(log, ` (restart guard)"`) {
		t.Fatalf("no progress record says %q; log:\n%s", want, log)
	}
}

// holdReason names the longest hold on a site, and a limiter mark the crawl
// delay does not explain as a Retry-After.
func TestHoldReason(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		name          string
		in            time.Duration
		st            limiter.SiteStatus
		delay, wantIn time.Duration
		wantWhy       string
	}{
		{"crawl delay", 2 * s, limiter.SiteStatus{NextIn: 3 * s}, 3 * s, 3 * s, "crawl delay"},
		{"retry-after", 2 * s, limiter.SiteStatus{NextIn: 12 * s}, 0, 12 * s, "Retry-After"},
		{"retry-after past a crawl delay", 2 * s, limiter.SiteStatus{NextIn: 40 * s}, 5 * s, 40 * s, "Retry-After"},
		{"adaptive backoff", s, limiter.SiteStatus{NextIn: 0, BackoffLeft: 60 * s, Backoffs: 1}, 0, 60 * s, "backoff after 429/503"},
		{"adaptive delay", 2 * s, limiter.SiteStatus{NextIn: 2 * s, ExtraDelay: 2 * s}, 0, 2 * s, "adaptive delay"},
		{"deferred", 4 * s, limiter.SiteStatus{}, 0, 4 * s, "deferred"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, why := holdReason(c.in, c.st, c.delay)
			if in != c.wantIn || why != c.wantWhy {
				t.Fatalf("holdReason = %s %q, want %s %q", in, why, c.wantIn, c.wantWhy)
			}
		})
	}
}
