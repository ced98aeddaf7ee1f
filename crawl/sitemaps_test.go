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
)

// mapSite is a site whose pages link nowhere: only its sitemap (named by
// robots.txt, an index of one urlset) lists its pages. It counts what it
// serves.
type mapSite struct {
	mu     sync.Mutex
	served map[string]int
}

func (m *mapSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.served[r.URL.Path]++
	m.mu.Unlock()
	host := "http://" + r.Host
	switch {
	case r.URL.Path == "/robots.txt":
		fmt.Fprintf(w, "User-agent: *\nDisallow: /private/\nSitemap: %s/maps/index.xml\n", host)
	case r.URL.Path == "/maps/index.xml":
		fmt.Fprintf(w, `<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>%s/maps/pages.xml</loc></sitemap></sitemapindex>`, host)
	case r.URL.Path == "/maps/pages.xml":
		var b strings.Builder
		b.WriteString(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for i := range 5 {
			fmt.Fprintf(&b, "<url><loc>%s/listed/%d</loc></url>", host, i)
		}
		fmt.Fprintf(&b, "<url><loc>%s/private/secret</loc></url><url><loc>http://elsewhere.example/x</loc></url></urlset>", host)
		w.Write([]byte(b.String()))
	default:
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>no links</body></html>"))
	}
}

func (m *mapSite) count(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.served[path]
}

// With Options.Sitemaps, the pages only a sitemap lists are crawled, each
// sitemap is fetched once, and a listed URL that robots.txt closes or that
// is on another host is not; without it, only the seed.
func TestSitemapsSeedTheCrawl(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("sitemaps=", on), func(t *testing.T) {
			site := &mapSite{served: map[string]int{}}
			ts := httptest.NewServer(site)
			defer ts.Close()
			name := strings.NewReplacer("/", ".", "=", ".").Replace(t.Name())
			c := crawlerOn(t, "t:"+name, name, nil, Options{Workers: 3, Sitemaps: on})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := c.Seed(ctx, []string{ts.URL + "/"}); err != nil {
				t.Fatal(err)
			}
			if err := c.Run(ctx); err != nil {
				t.Fatal(err)
			}
			want := map[bool]int{true: 1, false: 0}[on]
			for i := range 5 {
				if n := site.count(fmt.Sprintf("/listed/%d", i)); n != want {
					t.Errorf("/listed/%d fetched %d times, want %d", i, n, want)
				}
			}
			for _, p := range []string{"/maps/index.xml", "/maps/pages.xml"} {
				if n := site.count(p); n != want {
					t.Errorf("%s fetched %d times, want %d", p, n, want)
				}
			}
			if n := site.count("/private/secret"); n != 0 {
				t.Errorf("a sitemap URL robots.txt closes was fetched %d times", n)
			}
			if got := c.Progress().SitemapURLs; got != int64(5*want) {
				t.Errorf("Progress.SitemapURLs = %d, want %d", got, 5*want)
			}
		})
	}
}

// Two processes that seed the same site read its sitemaps once between
// them.
func TestSitemapsReadOncePerCrawl(t *testing.T) {
	site := &mapSite{served: map[string]int{}}
	ts := httptest.NewServer(site)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cs []*Crawler
	for i := range 2 { // each admits a seed of its own, so each would read the sitemaps
		c := crawlerOn(t, "t:maps.once", "maps.once", nil, Options{Workers: 2, Sitemaps: true})
		if n, err := c.Seed(ctx, []string{fmt.Sprintf("%s/seed/%d", ts.URL, i)}); err != nil || n != 1 {
			t.Fatalf("seed %d: admitted %d, %v", i, n, err)
		}
		cs = append(cs, c)
	}
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			if err := c.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, p := range []string{"/maps/index.xml", "/maps/pages.xml"} {
		if n := site.count(p); n != 1 {
			t.Errorf("%s fetched %d times by two seeding processes, want 1", p, n)
		}
	}
	for i := range 5 {
		if n := site.count(fmt.Sprintf("/listed/%d", i)); n != 1 {
			t.Errorf("/listed/%d fetched %d times, want 1", i, n)
		}
	}
}

// mapGate counts the sitemap indexes being served at once across sites,
// and holds each until want are, and a moment more (or five seconds pass).
type mapGate struct {
	want    int
	mu      sync.Mutex
	now     int
	most    int
	reached chan struct{}
}

func (g *mapGate) hold() {
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	if g.now == g.want {
		close(g.reached)
	}
	g.mu.Unlock()
	select {
	case <-g.reached:
		time.Sleep(300 * time.Millisecond) // room for one more, past want
	case <-time.After(5 * time.Second):
	}
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
}

// gatedMaps is a mapSite whose sitemap index waits at a mapGate shared
// with other sites.
type gatedMaps struct {
	*mapSite
	gate *mapGate
}

func (m gatedMaps) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/maps/index.xml" {
		m.gate.hold()
	}
	m.mapSite.ServeHTTP(w, r)
}

// The seeds' sites' sitemaps are read several sites at once, as many as
// the workers (a site's sitemaps are requests of its own latency: read one
// site at a time, they held a crawl of many small sites long after its
// pages), and each is still read once.
func TestSitemapsReadAtOnce(t *testing.T) {
	const workers = 4
	gate := &mapGate{want: workers, reached: make(chan struct{})}
	var seeds []string
	var sites []*mapSite
	for range 5 {
		site := &mapSite{served: map[string]int{}}
		ts := httptest.NewServer(gatedMaps{site, gate})
		defer ts.Close()
		seeds, sites = append(seeds, ts.URL+"/"), append(sites, site)
	}
	name := fmt.Sprintf("%s.%d", t.Name(), time.Now().UnixNano()) // fresh per run (-count N)
	c := crawlerOn(t, "t:"+name, name, nil, Options{Workers: workers, Sitemaps: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if gate.most != workers {
		t.Errorf("at most %d sites' sitemaps read at once, want %d (the workers)", gate.most, workers)
	}
	for i, site := range sites {
		for _, p := range []string{"/maps/index.xml", "/maps/pages.xml", "/listed/4"} {
			if n := site.count(p); n != 1 {
				t.Errorf("site %d: %s fetched %d times, want 1", i, p, n)
			}
		}
	}
}
