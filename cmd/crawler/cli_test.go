package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/testserver"
)

// A flag a command does not know, or cannot read, is one line that points
// to -h, exit 2 (a mistake in the file is one line too, naming the key); -h still prints the whole help, exit 0. A CRAWLER_*
// variable no setting reads is named with the one it most likely meant.
func TestBadFlagIsOneLine(t *testing.T) {
	bin := build(t)
	file := filepath.Join(t.TempDir(), "crawler.yaml")
	if err := os.WriteFile(file, []byte("max-per-site: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--config", file, "http://a.example/"}, "crawler run: config: " + file + ": line 1: unknown key max-per-site (did you mean max_per_site?)\n"},
		{[]string{"run", "--nope"}, "crawler run: flag provided but not defined: -nope (see 'crawler run -h')\n"},
		{[]string{"status", "--workers", "many"}, `crawler status: invalid value "many" for flag -workers: want a whole number (see 'crawler status -h')` + "\n"},
		{[]string{"delete", "--max-body-size", "lots"}, `crawler delete: invalid value "lots" for flag -max-body-size: want a size such as 10MiB, 512KiB, 1GiB, 10MB or a number of bytes (see 'crawler delete -h')` + "\n"},
		{[]string{"testserver", "--bogus"}, "crawler testserver: flag provided but not defined: -bogus (see 'crawler testserver -h')\n"},
		{[]string{"version", "--short"}, "crawler version: flag provided but not defined: -short (see 'crawler version -h')\n"},
	} {
		cmd := exec.Command(bin, c.args...)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || string(out) != c.want {
			t.Errorf("crawler %q: exit %d, output:\n%s\nwant exit 2 and only:\n%s", c.args, code, out, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "-h"}, []string{"Usage: crawler run", "-max-per-site int", "-max-body-size size", "(default 10MiB)", "(default 1GiB)",
			"-lease duration", "-redis-cluster list", "-exclude string", `(default "polite")`}},
		{[]string{"crawls", "--help"}, []string{"Usage: crawler crawls", "-prefix"}},
		{[]string{"testserver", "-h"}, []string{"-sites"}},
	} {
		cmd := exec.Command(bin, c.args...)
		out, _ := cmd.CombinedOutput()
		for _, want := range c.want {
			if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(string(out), want) {
				t.Errorf("crawler %q: exit %d, want 0 and %q in:\n%s", c.args, code, want, out)
			}
		}
	}
	for _, c := range []string{"run", "status", "crawls", "delete", "demo", "bench", "testserver", "redis-replay"} {
		out, _ := exec.Command(bin, c, "-h").CombinedOutput()
		if strings.Contains(string(out), " value\n") {
			t.Errorf("crawler %s -h names a flag's argument only 'value':\n%s", c, out)
		}
	}
	cmd := exec.Command(bin, "crawls", "extra")
	cmd.Env = append(os.Environ(), "CRAWLER_REDIS=redis://127.0.0.1:1")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "CRAWLER_REDIS is not a setting; did you mean CRAWLER_REDIS_URL?") {
		t.Errorf("CRAWLER_REDIS set: no warning in:\n%s", out)
	}
}

// `crawler version` says the module, its version, the VCS revision (or
// that there is none) and the Go version; the help lists it.
func TestVersion(t *testing.T) {
	bin := build(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	rev := regexp.MustCompile(`(?m)^revision: ([0-9a-f]{40}( \(modified: built with uncommitted changes\))?|unknown \(built without VCS information\))$`)
	if err != nil || !strings.HasPrefix(string(out), "crawler (devel)\nmodule:   github.com/polite-crawler/polite\n") ||
		!rev.Match(out) || !regexp.MustCompile(`(?m)^go:       go1\.\d+`).Match(out) {
		t.Errorf("crawler version: %v\n%s", err, out)
	}
	if out, _ := exec.Command(bin, "--help").CombinedOutput(); !strings.Contains(string(out), "  version ") {
		t.Errorf("crawler --help does not list version:\n%s", out)
	}
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/polite-crawler/polite", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "true"},
			{Key: "vcs.time", Value: "2026-11-23T18:00:00Z"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}}}
	want := "crawler v1.2.3\nmodule:   github.com/polite-crawler/polite\nrevision: 0123456789abcdef0123456789abcdef01234567 (modified: built with uncommitted changes)\n" +
		"time:     2026-11-23T18:00:00Z\ngo:       go1.26.8 linux/arm64\n"
	if got := describeBuild(stamped, true); got != want {
		t.Errorf("stamped build:\n%s\nwant\n%s", got, want)
	}
	if got := describeBuild(nil, false); !strings.Contains(got, "unknown version") {
		t.Errorf("no build information: %q", got)
	}
}

// `crawler run` crawls from the seeds: list of its --config file when
// given no seed arguments; seed arguments replace the file's.
func TestRunSeedsFromFile(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts, seeds := serveSites(t, testserver.Profile{Name: "seeds", Seed: 1, Sites: []testserver.SiteSpec{{Pages: 3, Links: 2}, {Pages: 3, Links: 2}}})
	file := filepath.Join(t.TempDir(), "crawler.yaml")
	if err := os.WriteFile(file, []byte("lease: 1s\nprogress: 1h\nseeds:\n  - "+seeds[0]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	requests := func() (a, b int64) { s := ts.Stats().Sites; return s[0].Requests, s[1].Requests }
	_, stderr, code := crawler(t, ctx, "run", "--config", file, "--redis", "redis://"+rs.Addr, "--crawl", "fromfile")
	a, b := requests()
	if code != 0 || a == 0 || b != 0 {
		t.Fatalf("seeds from the file: exit %d, %d and %d requests to the two sites; want the first crawled only:\n%s", code, a, b, stderr)
	}
	_, stderr, code = crawler(t, ctx, "run", "--config", file, "--redis", "redis://"+rs.Addr, "--crawl", "fromargs", seeds[1])
	a2, b2 := requests()
	if code != 0 || a2 != a || b2 == 0 {
		t.Fatalf("a seed argument: exit %d, %d more and %d requests to the two sites; want the second crawled only:\n%s", code, a2-a, b2, stderr)
	}
}

// `crawler status` names what is wrong with --redis within seconds (the
// old connect retried for 18 s and said "context deadline exceeded" or
// "cannot reach Redis"): TLS to a plain Redis, a database it lacks, the
// port of a web server.
func TestStatusNamesRedisProblem(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	bin := build(t)
	for _, c := range []struct{ url, want string }{
		{"rediss://" + rs.Addr, "crawler status: Redis at " + rs.Addr + " does not speak TLS (use redis:// rather than rediss://)"},
		{"redis://" + rs.Addr + "/99", "crawler status: Redis at " + rs.Addr + " has no database 99 (it has 16, numbered from 0"},
		{"redis://" + strings.TrimPrefix(web.URL, "http://"), "crawler status: the server at " + strings.TrimPrefix(web.URL, "http://") +
			` is not a Redis server (it answered like HTTP: "HTTP/1.1 400 Bad Request"`},
	} {
		start := time.Now()
		out, err := exec.Command(bin, "status", "--redis", c.url).CombinedOutput()
		took := time.Since(start)
		if exitCode(err) != 1 || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "retrying") {
			t.Errorf("status --redis %s: exit %d, want 1 and %q without retries:\n%s", c.url, exitCode(err), c.want, out)
		}
		if took > 10*time.Second {
			t.Errorf("status --redis %s: took %s", c.url, took)
		}
	}
}
