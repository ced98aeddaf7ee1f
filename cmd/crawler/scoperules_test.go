package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// linkSite is a loopback site whose pages are lists of links, counting
// the requests for each path (robots.txt is 404).
type linkSite struct {
	*httptest.Server
	mu    sync.Mutex
	pages map[string][]string // path -> links
	hits  map[string]int
}

func newLinkSite(t *testing.T) *linkSite {
	s := &linkSite{pages: map[string][]string{}, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		links, ok := s.pages[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		for _, l := range links {
			fmt.Fprintf(w, "<a href=%q>x</a>\n", l)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *linkSite) serve(path string, links ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages[path] = links
}

func (s *linkSite) hit(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *linkSite) port() string { u, _ := url.Parse(s.URL); return u.Port() }

// scopeWorld is a seed site linking to a subdomain of an allowed domain
// (reached by --resolve), an external site that links on to a second one
// and back, a page the include pattern misses and one the exclude pattern
// catches.
type scopeWorld struct {
	seed, allowed, ext, ext2 *linkSite
	resolve                  string
}

func newScopeWorld(t *testing.T) *scopeWorld {
	w := &scopeWorld{seed: newLinkSite(t), allowed: newLinkSite(t), ext: newLinkSite(t), ext2: newLinkSite(t)}
	host := "www.allowed.test:" + w.allowed.port()
	w.resolve = host + ":127.0.0.1"
	w.seed.serve("/", w.seed.URL+"/in", "http://"+host+"/", w.ext.URL+"/", w.seed.URL+"/other", w.seed.URL+"/private/x")
	w.seed.serve("/in")
	w.seed.serve("/back")
	w.seed.serve("/other")
	w.seed.serve("/private/x")
	w.allowed.serve("/", "http://"+host+"/a1")
	w.allowed.serve("/a1")
	w.ext.serve("/", w.ext2.URL+"/", w.ext.URL+"/x1", w.seed.URL+"/back")
	w.ext.serve("/x1")
	w.ext2.serve("/")
	return w
}

// check asserts what the crawl fetched: the seed's pages in scope, the
// allowed subdomain's, one external hop and the link back from it; not the
// second hop, the external site's own next page, the page the include
// misses or the one the exclude catches.
func (w *scopeWorld) check(t *testing.T, run, log string) {
	t.Helper()
	for _, c := range []struct {
		s    *linkSite
		path string
		want int
	}{
		{w.seed, "/", 1}, {w.seed, "/in", 1}, {w.seed, "/back", 1}, {w.allowed, "/", 1}, {w.allowed, "/a1", 1}, {w.ext, "/", 1},
		{w.ext2, "/", 0}, {w.ext, "/x1", 0}, {w.seed, "/other", 0}, {w.seed, "/private/x", 0},
	} {
		if got := c.s.hit(c.path); got != c.want {
			t.Errorf("%s: %s%s fetched %d times; want %d", run, c.s.URL, c.path, got, c.want)
		}
	}
	if !strings.Contains(log, `"links_out_of_scope":4`) {
		t.Errorf("%s: want 4 links out of scope in the closing line (include, exclude, two second hops); log:\n%s", run, log)
	}
}

// The scope options through the command: --allow-domain lets in a
// subdomain of the domain, --follow-external 1 exactly one hop off the
// crawl's sites (and back), --include and --exclude filter the URLs. A
// second process seeding the same crawl with no scope options follows the
// stored scope; one with other scope options is refused (exit 2, naming
// the crawl's scope); status shows it. Bad scope options are usage errors
// naming their flag.
func TestScopeOptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	bin := build(t)
	scope := []string{"--allow-domain", "Allowed.TEST.", "--follow-external", "1",
		"--include", `^http://[^/]+/($|in|back|a1|x1|other/only-this|private)`, "--exclude", "/private/"}
	first := newScopeWorld(t)
	cmd := worker(t, ctx, bin, nil, rs.Addr, []string{first.seed.URL + "/"}, append([]string{"--lease", "1s", "--resolve", first.resolve}, scope...)...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("first run: %v\n%s", err, cmd.Stderr)
	}
	first.check(t, "first run, with the scope options", cmd.Stderr.(*strings.Builder).String())

	second := newScopeWorld(t)
	cmd = worker(t, ctx, bin, nil, rs.Addr, []string{second.seed.URL + "/"}, "--lease", "1s", "--resolve", second.resolve)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("second run: %v\n%s", err, cmd.Stderr)
	}
	log := cmd.Stderr.(*strings.Builder).String()
	second.check(t, "second run, no scope options", log)
	if !strings.Contains(log, "following the crawl's stored scope") {
		t.Errorf("the second run did not say it follows the crawl's stored scope; log:\n%s", log)
	}

	cmd = worker(t, ctx, bin, nil, rs.Addr, []string{second.seed.URL + "/"}, "--follow-external", "2")
	err = cmd.Wait()
	if log := cmd.Stderr.(*strings.Builder).String(); exitCode(err) != 2 || !strings.Contains(log, "allowed domains allowed.test") {
		t.Errorf("a run with other scope options: exit %d, want 2 naming the crawl's scope; log:\n%s", exitCode(err), log)
	}
	out, errs, code := crawler(t, ctx, "status", "--redis", "redis://"+rs.Addr, "--crawl", t.Name())
	if code != 0 || !strings.Contains(out, "scope: the seeds' sites, allowed domains allowed.test, up to 1 external hops") {
		t.Errorf("status: exit %d; want the scope shown; output:\n%s%s", code, out, errs)
	}
	for _, c := range []struct{ flag, value string }{
		{"--allow-domain", "http://example.com/"}, {"--allow-domain", "a..b"}, {"--include", "("}, {"--exclude", "[z-a]"}, {"--follow-external", "-1"},
	} {
		_, errs, code := crawler(t, ctx, "run", "--redis", "redis://"+rs.Addr, c.flag, c.value, "http://a.example/")
		if code != 2 || !strings.Contains(errs, c.flag+":") {
			t.Errorf("%s %q: exit %d; want 2 naming the flag; output:\n%s", c.flag, c.value, code, errs)
		}
	}
}
