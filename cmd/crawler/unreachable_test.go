package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// Seeds that cannot be reached are named for what they are, not
// "disallowed by robots.txt": a loopback port that refuses and a name that
// does not exist (.invalid: no DNS query leaves the host). Their sites stay
// closed (RFC 9309), each is recorded unreachable with its cause, the
// warning and the summary say so, and with no seed fetched at all the run
// exits 1 naming each seed's cause. One seed that answers makes it exit 0.
func TestUnreachableSeeds(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const refused, nx = "http://127.0.0.9:1/", "http://nonexistent.invalid/"
	out := filepath.Join(t.TempDir(), "out.jsonl")
	_, stderr, code := crawler(t, ctx, "run", "--redis", "redis://"+rs.Addr, "--crawl", "down", "--out", out, refused, nx)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"crawler run: crawl: no seed could be fetched: ",
		refused + ": unreachable (connection refused)",
		nx + ": unreachable (no such host)",
		`"msg":"robots.txt unreachable: the site is closed until it is fetched again","site":"127.0.0.9:1","status":0,"cause":"connection refused"`,
		`"cause":"no such host"`,
		`"done":2,`, `"unreachable":2,`, `"disallowed":0,`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	lines, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`{"url":"` + refused + `","outcome":"unreachable","cause":"connection refused","status":0,`,
		`{"url":"` + nx + `","outcome":"unreachable","cause":"no such host","status":0,`,
	} {
		if !strings.Contains(string(lines), want) || strings.Contains(string(lines), "disallowed") {
			t.Errorf("results lack %q, or say disallowed:\n%s", want, lines)
		}
	}

	_, stderr, _ = crawler(t, ctx, "run", "--redis", "redis://"+rs.Addr, "--crawl", "down", refused, nx)
	if !strings.Contains(stderr, "every seed was already seen in this crawl") {
		t.Errorf("the same seeds again: no word that they were seen before; stderr:\n%s", stderr)
	}

	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<p>up</p>"))
	}))
	defer site.Close()
	_, stderr, code = crawler(t, ctx, "run", "--redis", "redis://"+rs.Addr, "--crawl", "partly", refused, site.URL+"/")
	if code != 0 || !strings.Contains(stderr, `"fetched":1,`) || !strings.Contains(stderr, `"unreachable":1,`) {
		t.Fatalf("one seed up: exit %d, want 0; stderr:\n%s", code, stderr)
	}
}
