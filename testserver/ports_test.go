package testserver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
)

// freeBase returns a port from which n ports are free on every address
// now (each bound on the wildcard address, then let go).
func freeBase(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base, ok := 20000+rand.IntN(40000), true
		var held []net.Listener
		for p := base; p < base+n && ok; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
			if ok = err == nil; ok {
				held = append(held, ln)
			}
		}
		for _, ln := range held {
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no range of free ports found")
	return 0
}

// With a base port the sites listen on base, base+1, ... in profile order,
// one per listener (sites sharing an address and port share one), and a
// second server of the same profile, once the first has stopped, has the
// same URLs. A port in use is an error naming it.
func TestBasePortKeepsURLs(t *testing.T) {
	p := Profile{Name: "ports", Seed: 1, Sites: []SiteSpec{{Pages: 2, Links: 1}, {Pages: 2, Links: 1, Address: "shared", VHost: "a.test"},
		{Pages: 2, Links: 1, Address: "shared", VHost: "b.test"}, {Pages: 2, Links: 1}}}
	base := freeBase(t, 3)
	urls := func() []string {
		s := start(t, p, WithControl(""), WithBasePort(base))
		defer s.Close()
		c := &http.Client{Transport: &http.Transport{DialContext: s.DialContext}}
		var out []string
		for _, st := range s.Sites() {
			out = append(out, st.URL)
			code, _, _ := get(t, c, st.URL+"/")
			if code != 200 {
				t.Errorf("%s/: %d", st.URL, code)
			}
		}
		return out
	}
	first, second := urls(), urls()
	want := []string{fmt.Sprintf("http://127.0.0.2:%d", base), fmt.Sprintf("http://a.test:%d", base+1),
		fmt.Sprintf("http://b.test:%d", base+1), fmt.Sprintf("http://127.0.0.4:%d", base+2)}
	if strings.Join(first, " ") != strings.Join(want, " ") || strings.Join(second, " ") != strings.Join(want, " ") {
		t.Fatalf("URLs: first run %v, second %v; want %v both times", first, second, want)
	}

	taken, err := net.Listen("tcp", fmt.Sprintf(":%d", base+1))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	s, err := New(p, WithControl(""), WithBasePort(base))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start()
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf(":%d is in use", base+1)) || !strings.Contains(err.Error(), "site 1") {
		t.Fatalf("Start with port %d taken: %v; want an error naming it and site 1", base+1, err)
	}
}
