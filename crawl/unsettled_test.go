package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// slowFirstSite answers its first request for /slow after first has run
// (nil: after hold), and every other at once; it counts the requests by
// path.
type slowFirstSite struct {
	hold  time.Duration
	first func()
	pathHits
}

func (s *slowFirstSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.count(r.URL.Path)
	switch r.URL.Path {
	case "/robots.txt":
		fmt.Fprint(w, "User-agent: *\nAllow: /\n")
	case "/slow":
		if n == 1 {
			if s.first != nil {
				s.first()
			} else {
				time.Sleep(s.hold)
			}
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>slow once</p>")
	default:
		http.NotFound(w, r)
	}
}

// A turn that outlasts the visibility timeout keeps its URL (the worker
// extends its hold, holdItem): the page is requested once and has one line.
func TestLongTurnKeepsItsURL(t *testing.T) {
	site := &slowFirstSite{hold: 3 * time.Second}
	hs := httptest.NewServer(site)
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	c := visibleCrawler(t, "long", &out, time.Second)
	if _, err := c.Seed(ctx, []string{hs.URL + "/slow"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	lines := readResults(t, &out)
	if hits, got := site.hit("/slow"), lines[hs.URL+"/slow"]; hits != 1 || len(got) != 1 || !got[0].Final {
		t.Fatalf("/slow requested %d times, lines %+v; want one request, one final line", hits, got)
	}
	checkAddsUp(t, c.Progress(), lines, time.Since(start))
}

// A turn whose settlement comes after its URL was handed to another worker
// (here the turn's item is given back under it while the site answers) is
// not its URL's last: the other worker's turn is. Its line says "retry",
// caused by "not settled", with the frontier's error, and the process's
// counts and summary still give the URL one final outcome.
func TestLostSettlementIsNotFinal(t *testing.T) {
	site := &slowFirstSite{}
	hs := httptest.NewServer(site)
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	c := visibleCrawler(t, "lost", &out, time.Minute)
	// While the first request waits, give its item back (as if its worker
	// had gone quiet and another had taken it over), then wait for another
	// worker's request of the same URL.
	site.first = func() {
		if err := giveBackInFlight(ctx, redistest.Prefix(t), "lost"); err != nil {
			t.Error(err)
			return
		}
		for deadline := time.Now().Add(10 * time.Second); site.hit("/slow") < 2 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := c.Seed(ctx, []string{hs.URL + "/slow"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if hits := site.hit("/slow"); hits != 2 {
		t.Fatalf("/slow requested %d times, want 2 (once by the worker whose item was given back under it)", hits)
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

// giveBackInFlight releases every item in flight in the crawl under
// prefix, through a frontier of its own, as another worker would that took
// them over.
func giveBackInFlight(ctx context.Context, prefix, crawlName string) error {
	rdb := srv.Client()
	defer rdb.Close()
	fr := frontier.New(rdb, &frontier.Options{Prefix: prefix, Crawl: crawlName})
	keys, err := rdb.Keys(ctx, prefix+":*inflight").Result()
	if err != nil {
		return err
	}
	for _, k := range keys {
		members, err := rdb.ZRangeByScore(ctx, k, &redis.ZRangeBy{Min: "-inf", Max: "(1e15"}).Result()
		if err != nil {
			return err
		}
		for _, m := range members {
			parts := strings.SplitN(m, "\n", 3)
			if len(parts) != 3 {
				continue
			}
			var item struct {
				URL string `json:"u"`
			}
			if err := json.Unmarshal([]byte(parts[2]), &item); err != nil {
				return err
			}
			u := item.URL
			if err := fr.Release(ctx, frontier.Item{ID: m, Site: parts[1], URL: u}); err != nil {
				return fmt.Errorf("give back %s: %w", u, err)
			}
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("no in-flight key under %s", prefix)
	}
	return nil
}
