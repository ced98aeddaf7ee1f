package sitemap

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// site is a loopback web site serving fixed documents and counting the
// requests it is asked.
type site struct {
	*httptest.Server
	mu   sync.Mutex
	docs map[string]func(w http.ResponseWriter, r *http.Request)
	hits map[string]int
	ua   []string
}

func newSite(t *testing.T) *site {
	s := &site{docs: map[string]func(http.ResponseWriter, *http.Request){}, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.ua = append(s.ua, r.UserAgent())
		h := s.docs[r.URL.Path]
		s.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// serve serves body at path with the content type and headers given
// (alternating names and values).
func (s *site) serve(path, ctype, body string, headers ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[path] = func(w http.ResponseWriter, r *http.Request) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		fmt.Fprint(w, body)
	}
}

func (s *site) hit(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *site) u(t testing.TB) *url.URL {
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func urlsetOf(urls ...string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, u := range urls {
		fmt.Fprintf(&b, "<url><loc>%s</loc></url>\n", u)
	}
	b.WriteString("</urlset>")
	return b.String()
}

func indexOf(locs ...string) string {
	var b strings.Builder
	b.WriteString(`<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, u := range locs {
		fmt.Fprintf(&b, "<sitemap><loc>%s</loc></sitemap>\n", u)
	}
	b.WriteString("</sitemapindex>")
	return b.String()
}

type result struct {
	st      Stats
	err     error
	urls    []string
	batches []int
}

func discover(t *testing.T, f *Fetcher, s *site, robots ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var r result
	r.st, r.err = f.Discover(ctx, s.u(t), robots, func(urls []string) error {
		r.urls = append(r.urls, urls...)
		r.batches = append(r.batches, len(urls))
		return nil
	})
	if r.st.URLs != len(r.urls) {
		t.Errorf("Stats.URLs %d, handed on %d", r.st.URLs, len(r.urls))
	}
	return r
}

func TestDiscoverFallback(t *testing.T) {
	s := newSite(t)
	s.serve("/sitemap.xml", "application/xml", urlsetOf(s.URL+"/a", "/b", s.URL+"/c#frag"))
	f := &Fetcher{UserAgent: "testbot/1"}
	r := discover(t, f, s)
	want := []string{s.URL + "/a", s.URL + "/b", s.URL + "/c#frag"}
	if r.err != nil || !slices.Equal(r.urls, want) {
		t.Fatalf("%v %v, want %v", r.urls, r.err, want)
	}
	if r.st.Fetched != 1 || r.st.Failed != 0 || s.ua[0] != "testbot/1" {
		t.Errorf("stats %+v, user agents %v", r.st, s.ua)
	}
}

// TestDiscoverRobotsFirst: the robots.txt list is read, /sitemap.xml not.
func TestDiscoverRobotsFirst(t *testing.T) {
	s := newSite(t)
	s.serve("/sitemap.xml", "application/xml", urlsetOf(s.URL+"/default"))
	s.serve("/maps/one.xml", "application/xml", urlsetOf(s.URL+"/1"))
	s.serve("/maps/two.txt", "text/plain", s.URL+"/2\n\n"+s.URL+"/3\n")
	r := discover(t, &Fetcher{}, s, s.URL+"/maps/one.xml", s.URL+"/maps/two.txt", "not a url", "ftp://x/y")
	want := []string{s.URL + "/1", s.URL + "/2", s.URL + "/3"}
	if r.err != nil || !slices.Equal(r.urls, want) {
		t.Fatalf("%v %v, want %v", r.urls, r.err, want)
	}
	if s.hit("/sitemap.xml") != 0 {
		t.Errorf("/sitemap.xml fetched though robots.txt named sitemaps")
	}
}

func TestDiscoverIndexAndGzip(t *testing.T) {
	s := newSite(t)
	s.serve("/sitemap.xml", "application/xml", indexOf(s.URL+"/s1.xml.gz", "/s2.xml", s.URL+"/s3.txt"))
	s.serve("/s1.xml.gz", "application/gzip", gz(t, urlsetOf(s.URL+"/1", s.URL+"/2")))
	// Content-Encoding: net/http undoes it when it asked for gzip itself;
	// with DisableCompression it does not, and the magic bytes tell.
	s.serve("/s2.xml", "application/xml", gz(t, urlsetOf(s.URL+"/3")), "Content-Encoding", "gzip")
	s.serve("/s3.txt", "", gz(t, s.URL+"/4\n"))
	want := []string{s.URL + "/1", s.URL + "/2", s.URL + "/3", s.URL + "/4"}
	for _, raw := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableCompression=%v", raw), func(t *testing.T) {
			f := &Fetcher{Client: &http.Client{Transport: &http.Transport{DisableCompression: raw}}}
			r := discover(t, f, s)
			if r.err != nil || !slices.Equal(r.urls, want) {
				t.Fatalf("%v %v, want %v", r.urls, r.err, want)
			}
			gzips := 2
			if raw {
				gzips = 3
			}
			if r.st.Fetched != 4 || r.st.Indexes != 1 || r.st.Gzip != gzips {
				t.Errorf("stats %+v, want 4 fetched, 1 index, %d gzipped", r.st, gzips)
			}
		})
	}
}

func TestDiscoverNotFound(t *testing.T) {
	s := newSite(t)
	s.serve("/html.xml", "text/html", "<!DOCTYPE html><html><body>Not found</body></html>")
	s.serve("/plain-html", "text/html", "Not found\n"+s.URL+"/x\n")
	r := discover(t, &Fetcher{}, s)
	if r.err != nil || len(r.urls) != 0 || r.st.Failed != 0 || r.st.Missing != 1 || s.hit("/sitemap.xml") != 1 {
		t.Fatalf("%v %v %+v, want nothing, 1 missing, none failed", r.urls, r.err, r.st)
	}
	r = discover(t, &Fetcher{}, s, s.URL+"/html.xml", s.URL+"/plain-html")
	if r.err != nil || len(r.urls) != 0 || r.st.NotSitemap != 2 || r.st.Fetched != 2 {
		t.Fatalf("%v %v %+v, want nothing, 2 not sitemaps", r.urls, r.err, r.st)
	}
}

func TestDiscoverCrossHost(t *testing.T) {
	a, b, c := newSite(t), newSite(t), newSite(t)
	// robots.txt of a names a sitemap on b: b's file may list a's pages
	// (robots.txt vouches), not b's own or c's.
	b.serve("/a-index.xml", "application/xml", indexOf(b.URL+"/a-urls.xml", a.URL+"/own.xml", c.URL+"/elsewhere.xml"))
	b.serve("/a-urls.xml", "application/xml", urlsetOf(a.URL+"/1", b.URL+"/2", c.URL+"/3"))
	a.serve("/own.xml", "application/xml", urlsetOf(a.URL+"/4"))
	c.serve("/elsewhere.xml", "application/xml", urlsetOf(a.URL+"/5"))
	r := discover(t, &Fetcher{}, a, b.URL+"/a-index.xml")
	want := []string{a.URL + "/1", a.URL + "/4"}
	if r.err != nil || !slices.Equal(r.urls, want) {
		t.Fatalf("%v %v, want %v", r.urls, r.err, want)
	}
	if c.hit("/elsewhere.xml") != 0 || r.st.Skipped != 1 || r.st.Dropped != 2 {
		t.Errorf("stats %+v, elsewhere fetched %d times; want 1 skipped, 2 dropped", r.st, c.hit("/elsewhere.xml"))
	}
	// Accept replaces the host rule.
	f := &Fetcher{Accept: func(site, u *url.URL) bool { return u.Host != c.u(t).Host }}
	r = discover(t, f, a, b.URL+"/a-urls.xml")
	if want := []string{a.URL + "/1", b.URL + "/2"}; !slices.Equal(r.urls, want) {
		t.Errorf("with Accept: %v, want %v", r.urls, want)
	}
}

func TestSameHost(t *testing.T) {
	cases := []struct {
		a, b string
		same bool
	}{
		{"http://a.example/x", "https://A.example./y", true},
		{"http://a.example:80/", "https://a.example:443/", true},
		{"http://a.example:8080/", "http://a.example/", false},
		{"http://a.example/", "http://www.a.example/", false},
		{"http://127.0.0.1:1/", "http://127.0.0.1:2/", false},
	}
	for _, c := range cases {
		a, _ := url.Parse(c.a)
		b, _ := url.Parse(c.b)
		if sameHost(a, b) != c.same {
			t.Errorf("sameHost(%s, %s) = %v", c.a, c.b, !c.same)
		}
	}
}

func TestDiscoverLoops(t *testing.T) {
	s := newSite(t)
	s.serve("/sitemap.xml", "application/xml", indexOf(s.URL+"/sitemap.xml", s.URL+"/other.xml", s.URL+"/sitemap.xml#again"))
	s.serve("/other.xml", "application/xml", indexOf(s.URL+"/sitemap.xml", s.URL+"/urls.xml", s.URL+"/other.xml"))
	s.serve("/urls.xml", "application/xml", urlsetOf(s.URL+"/1"))
	r := discover(t, &Fetcher{}, s)
	if r.err != nil || !slices.Equal(r.urls, []string{s.URL + "/1"}) {
		t.Fatalf("%v %v", r.urls, r.err)
	}
	for _, p := range []string{"/sitemap.xml", "/other.xml", "/urls.xml"} {
		if n := s.hit(p); n != 1 {
			t.Errorf("%s fetched %d times, want once", p, n)
		}
	}
	if r.st.Skipped != 4 {
		t.Errorf("skipped %d, want 4", r.st.Skipped)
	}
}

func TestDiscoverDepth(t *testing.T) {
	s := newSite(t)
	s.serve("/sitemap.xml", "application/xml", indexOf("/i1.xml", "/u0.xml"))
	s.serve("/u0.xml", "application/xml", urlsetOf("/0"))
	s.serve("/i1.xml", "application/xml", indexOf("/i2.xml", "/u1.xml"))
	s.serve("/u1.xml", "application/xml", urlsetOf("/1"))
	s.serve("/i2.xml", "application/xml", indexOf("/u2.xml"))
	s.serve("/u2.xml", "application/xml", urlsetOf("/2"))
	for depth, want := range map[int][]string{1: {"/0"}, 2: {"/0", "/1"}, 3: {"/0", "/1", "/2"}} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			r := discover(t, &Fetcher{Options: &Options{MaxIndexDepth: depth}}, s)
			var got []string
			for _, u := range r.urls {
				got = append(got, strings.TrimPrefix(u, s.URL))
			}
			if r.err != nil || !slices.Equal(got, want) {
				t.Fatalf("%v %v, want %v", got, r.err, want)
			}
		})
	}
	r := discover(t, &Fetcher{}, s)
	if len(r.urls) != 2 || r.st.Skipped != 1 {
		t.Errorf("default depth: %v %+v, want 2 URLs, the third index level skipped", r.urls, r.st)
	}
}

func TestDiscoverLimits(t *testing.T) {
	s := newSite(t)
	var children []string
	for i := range 10 {
		p := fmt.Sprintf("/u%d.xml", i)
		children = append(children, p)
		var urls []string
		for j := range 5 {
			urls = append(urls, fmt.Sprintf("/p%d-%d", i, j))
		}
		s.serve(p, "application/xml", urlsetOf(urls...))
	}
	s.serve("/sitemap.xml", "application/xml", indexOf(children...))

	t.Run("sitemaps", func(t *testing.T) {
		r := discover(t, &Fetcher{Options: &Options{MaxSitemaps: 4}}, s)
		if r.err != nil || len(r.urls) != 15 || r.st.Fetched != 4 || r.st.Skipped != 7 || !r.st.Limited {
			t.Fatalf("%d URLs %v %+v, want 15 from 3 children", len(r.urls), r.err, r.st)
		}
		if s.hit("/u3.xml") != 0 {
			t.Errorf("a fifth sitemap was fetched")
		}
	})
	t.Run("urls", func(t *testing.T) {
		r := discover(t, &Fetcher{Options: &Options{MaxURLs: 12, BatchSize: 5}}, s)
		if r.err != nil || len(r.urls) != 12 || !r.st.Limited || r.st.Fetched != 4 {
			t.Fatalf("%d URLs %v %+v, want 12 from 3 children", len(r.urls), r.err, r.st)
		}
		if !slices.Equal(r.batches, []int{5, 5, 2}) {
			t.Errorf("batches %v, want 5 5 2", r.batches)
		}
	})
	t.Run("per file", func(t *testing.T) {
		r := discover(t, &Fetcher{Options: &Options{MaxURLsPerFile: 2}}, s)
		// The index is cut at 2 children, and each child at 2 URLs.
		if r.err != nil || len(r.urls) != 4 || r.st.Truncated != 3 || r.st.Limited {
			t.Fatalf("%d URLs %v %+v, want 4, 3 truncated", len(r.urls), r.err, r.st)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		big := newSite(t)
		var urls []string
		for i := range 2000 {
			urls = append(urls, fmt.Sprintf("/%d", i))
		}
		doc := urlsetOf(urls...)
		big.serve("/sitemap.xml", "application/xml", doc)
		r := discover(t, &Fetcher{Options: &Options{MaxBytes: int64(len(doc) / 2)}}, big)
		if r.err != nil || r.st.Truncated != 1 || len(r.urls) < 900 || len(r.urls) > 1100 {
			t.Fatalf("%d URLs %v %+v, want about half, truncated", len(r.urls), r.err, r.st)
		}
	})
}

func TestDiscoverLongLoc(t *testing.T) {
	s := newSite(t)
	long := s.URL + "/" + strings.Repeat("x", 100)
	s.serve("/sitemap.xml", "application/xml", urlsetOf(long, "/"+strings.Repeat("y", 90), "/ok", "mailto:x@y", "http://"))
	r := discover(t, &Fetcher{Options: &Options{MaxLocLength: 100}}, s)
	// The relative one is short as written, too long resolved.
	if r.err != nil || !slices.Equal(r.urls, []string{s.URL + "/ok"}) || r.st.Dropped != 4 {
		t.Fatalf("%v %v %+v, want /ok only, 4 dropped", r.urls, r.err, r.st)
	}
}

func TestDiscoverMalformed(t *testing.T) {
	s := newSite(t)
	s.serve("/sitemap.xml", "application/xml", indexOf("/bad.xml", "/good.xml"))
	s.serve("/bad.xml", "application/xml", urlsetOf("/1")[:len(urlsetOf("/1"))-5]+strings.Repeat("<a>", 100))
	s.serve("/good.xml", "application/xml", urlsetOf("/2"))
	r := discover(t, &Fetcher{}, s)
	if r.err != nil || !slices.Equal(r.urls, []string{s.URL + "/1", s.URL + "/2"}) || r.st.Malformed != 1 {
		t.Fatalf("%v %v %+v", r.urls, r.err, r.st)
	}
}

func TestDiscoverTimeout(t *testing.T) {
	s := newSite(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	s.mu.Lock()
	s.docs["/slow.xml"] = func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<urlset><url><loc>/1</loc></url>")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	s.mu.Unlock()
	s.serve("/fast.xml", "application/xml", urlsetOf("/2"))
	r := discover(t, &Fetcher{Options: &Options{Timeout: 300 * time.Millisecond, BatchSize: 1}}, s, s.URL+"/slow.xml", s.URL+"/fast.xml")
	if r.err != nil || !slices.Equal(r.urls, []string{s.URL + "/1", s.URL + "/2"}) || r.st.Failed != 1 || r.st.Fetched != 1 {
		t.Fatalf("%v %v %+v, want the slow one's first URL kept, it counted failed", r.urls, r.err, r.st)
	}
}

func TestDiscoverErrors(t *testing.T) {
	s := newSite(t)
	s.serve("/sitemap.xml", "application/xml", indexOf("/u.xml", "/v.xml"))
	s.serve("/u.xml", "application/xml", urlsetOf("/1", "/2", "/3"))
	s.serve("/v.xml", "application/xml", urlsetOf("/4"))

	for _, bad := range []string{"", "/x", "ftp://h/", "http:///x"} {
		u, _ := url.Parse(bad)
		if _, err := (&Fetcher{}).Discover(context.Background(), u, nil, func([]string) error { return nil }); !errors.Is(err, ErrSite) {
			t.Errorf("site %q: err %v, want ErrSite", bad, err)
		}
	}
	if _, err := (&Fetcher{}).Discover(context.Background(), nil, nil, nil); !errors.Is(err, ErrSite) {
		t.Errorf("nil site: err %v, want ErrSite", err)
	}

	full := errors.New("frontier full")
	calls := 0
	_, err := (&Fetcher{Options: &Options{BatchSize: 2}}).Discover(context.Background(), s.u(t), nil, func([]string) error {
		calls++
		return full
	})
	if !errors.Is(err, full) || calls != 1 || s.hit("/v.xml") != 0 {
		t.Errorf("err %v after %d calls, want found's error after 1, nothing more fetched", err, calls)
	}
	// found's error on the last flush too.
	calls = 0
	_, err = (&Fetcher{}).Discover(context.Background(), s.u(t), nil, func([]string) error {
		calls++
		return full
	})
	if !errors.Is(err, full) || calls != 1 {
		t.Errorf("err %v after %d calls, want found's error", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	before := s.hit("/v.xml")
	var got []string
	_, err = (&Fetcher{Options: &Options{BatchSize: 1}}).Discover(ctx, s.u(t), nil, func(urls []string) error {
		got = append(got, urls...)
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || s.hit("/v.xml") != before || len(got) == 0 {
		t.Errorf("err %v, v.xml fetched %d more times, %v handed on; want context.Canceled, no more fetches", err, s.hit("/v.xml")-before, got)
	}
}
