package testserver

import (
	"fmt"
	"strings"
)

// Expected returns, per site, the paths a polite crawler seeded with every
// site's "/" should fetch and get 200 for: a walk over the sites' links and
// redirects that never enters a path robots.txt closes. Redirects count as
// links (the redirect itself answers 3xx); /retry/ pages answer 200 on the
// second try; error and loop pages never answer 200.
func (s *Server) Expected() []map[string]bool {
	want := make([]map[string]bool, len(s.sites))
	seen := make([]map[string]bool, len(s.sites))
	for i := range s.sites {
		want[i], seen[i] = map[string]bool{}, map[string]bool{}
	}
	type hop struct {
		site int
		path string
	}
	queue := make([]hop, 0, len(s.sites))
	for i := range s.sites {
		queue = append(queue, hop{i, "/"})
	}
	visit := func(i int, path string) {
		if !seen[i][path] {
			seen[i][path] = true
			queue = append(queue, hop{i, path})
		}
	}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		st := s.sites[h.site]
		if st.rules.disallowed(h.path) {
			continue
		}
		kind, num := splitPath(h.path)
		if kind == "" && num == -1 {
			num = 0
			kind = "p"
		}
		if num < 0 || num >= st.spec.Pages {
			continue
		}
		switch kind {
		case "p", "private", "archive", "retry":
			want[h.site][h.path] = true
			for _, l := range st.links(num) {
				if i, p, ok := s.resolve(h.site, l); ok {
					visit(i, p)
				}
			}
		case "slow", "huge", "data":
			want[h.site][h.path] = true
		case "redirect":
			visit(h.site, fmt.Sprintf("/p/%d", (num*7+3)%st.spec.Pages))
		case "redirect-private":
			visit(h.site, st.privatePath(num))
		case "away":
			other := (h.site + 1 + num) % len(s.sites)
			visit(other, fmt.Sprintf("/p/%d", num%s.sites[other].spec.Pages))
		}
	}
	return want
}

// resolve maps a link on site i to (site, path); links to elsewhere and odd
// schemes are not followed.
func (s *Server) resolve(i int, link string) (int, string, bool) {
	if strings.HasPrefix(link, "/") && !strings.HasPrefix(link, "//") {
		return i, link, true
	}
	for j, st := range s.sites {
		if p, ok := strings.CutPrefix(link, st.url); ok && strings.HasPrefix(p, "/") {
			return j, p, true
		}
	}
	return 0, "", false
}

// FetchedOK lists the paths of site i that have been answered 200 (up to
// the tracking bound).
func (s *Server) FetchedOK(i int) map[string]bool {
	r := s.sites[i].rec
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for p, ok := range r.paths {
		if ok {
			out[p] = true
		}
	}
	return out
}
