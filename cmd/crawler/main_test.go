package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu  sync.Mutex
	binaries = map[string]string{} // build tags -> binary
	buildDir string
)

// build compiles the crawler binary once per test run.
func build(t *testing.T) string { return buildTagged(t, "") }

// buildTagged compiles the crawler binary with the given build tags (comma
// separated) once per test run.
func buildTagged(t *testing.T, tags string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := binaries[tags]; ok {
		return bin
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "crawler-bin-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = dir
	}
	bin := filepath.Join(buildDir, "crawler"+strings.ReplaceAll(tags, ",", "-"))
	if out, err := exec.Command("go", "build", "-tags", tags, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build -tags %q: %v\n%s", tags, err, out)
	}
	binaries[tags] = bin
	return bin
}

func TestTestserverCommand(t *testing.T) {
	bin := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "testserver", "--sites", "4", "--profile", "mixed", "--listen", "127.0.0.1:0")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var sites []string
	control := ""
	for control == "" && sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 1 && f[0] == "site":
			sites = append(sites, f[1])
		case len(f) > 1 && f[0] == "control":
			control = f[1]
		}
	}
	if len(sites) != 4 || control == "" {
		t.Fatalf("startup output: sites %v control %q; stderr %s", sites, control, stderr.String())
	}
	resp, err := http.Get(sites[0] + "/p/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Get(control + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Sites []struct {
			Requests int `json:"requests"`
		} `json:"sites"`
	}
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if len(st.Sites) != 4 || st.Sites[0].Requests != 1 {
		t.Fatalf("/_stats: %+v", st)
	}
	cmd.Process.Signal(syscall.SIGINT)
	var rest strings.Builder
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
	}
	interrupted(t, cmd.Wait(), "testserver after SIGINT", &stderr)
	if !strings.Contains(rest.String(), "max in flight") || strings.Count(rest.String(), "127.0.") != 4 {
		t.Fatalf("closing summary:\n%s", rest.String())
	}
}

// status, crawls and delete -h list the flags they use, not all of run's.
func TestReadOnlyCommandsHelp(t *testing.T) {
	bin := build(t)
	for _, c := range []struct {
		cmd  string
		want []string
	}{
		{"status", []string{"-crawl", "-redis ", "-redis-cluster", "-redis-ca", "-prefix", "-config", "-log-level"}},
		{"crawls", []string{"-redis ", "-redis-sentinel", "-prefix"}},
		{"delete", []string{"-crawl", "-yes", "-force", "-redis ", "-prefix"}},
	} {
		out, err := exec.Command(bin, c.cmd, "-h").CombinedOutput()
		if err != nil {
			t.Errorf("crawler %s -h: %v\n%s", c.cmd, err, out)
		}
		for _, want := range append(c.want, "'crawler run -h' lists them", `-redis string`, `(default "redis://127.0.0.1:6379")`) {
			if !strings.Contains(string(out), want) {
				t.Errorf("crawler %s -h lacks %q:\n%s", c.cmd, want, out)
			}
		}
		for _, not := range []string{"-max-per-site", "-workers", "-warc", "-adaptive"} {
			if strings.Contains(string(out), not) {
				t.Errorf("crawler %s -h lists run's %s:\n%s", c.cmd, not, out)
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	bin := build(t)
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"sites":[{"pages":0}]}`), 0o644)
	twoDocs := filepath.Join(t.TempDir(), "two.yaml")
	os.WriteFile(twoDocs, []byte("workers: 2\n---\nworkers: 3\n"), 0o644)
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	const down = "redis://127.0.0.1:1" // refuses: the run gets past its settings and fails to connect
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Usage: crawler COMMAND"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"testserver", "--sites", "0"}, 2, "--sites 0"},
		{[]string{"testserver", "--profile", "weird"}, 2, `unknown profile "weird"`},
		{[]string{"testserver", "--profile", bad}, 2, "sites[0].pages"},
		{[]string{"testserver", "--listen", "nonsense"}, 2, "--listen"},
		{[]string{"testserver", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"testserver", "-h"}, 0, "Serves many web sites"},
		{[]string{"--help"}, 0, "testserver"},
		{[]string{"run"}, 2, "no seed URLs"},
		{[]string{"run", "ftp://x.example/"}, 2, `seed "ftp://x.example/"`},
		{[]string{"run", "--redis", "http://x", "--workers", "0", "--semaphore", "fast", "http://a.example/"}, 2, "--workers: 0"},
		{[]string{"run", "--redis", "http://x", "http://a.example/"}, 2, "--redis:"},
		{[]string{"run", "--redis", "127.0.0.1:6379", "http://a.example/"}, 2, "(did you mean redis://127.0.0.1:6379?)"},
		{[]string{"run", "http://a.example/", "--workers", "2"}, 2, `seed "--workers": flags go before the seed URLs`},
		{[]string{"status", "--redis", down, "try1"}, 2, `unexpected arguments ["try1"] (name the crawl with --crawl)`},
		{[]string{"run", "--config", bad, "http://a.example/"}, 2, "config"},
		{[]string{"run", "--redis", "redis://127.0.0.1:1", "http://a.example/"}, 1, "cannot reach Redis at 127.0.0.1:1"},
		{[]string{"status", "--redis", down}, 1, "crawler status: start redis-server at 127.0.0.1:1, or name another with --redis redis://HOST:PORT (or CRAWLER_REDIS_URL); `crawler demo` runs on an embedded Redis"},
		// A flag's value "config" is that flag's, not --config.
		{[]string{"run", "--crawl", "config", "--redis", down, "http://a.example/"}, 1, "cannot reach Redis at 127.0.0.1:1"},
		{[]string{"run", "--user-agent", "config", "--workers", "2", "--redis", down, "http://a.example/"}, 1, "cannot reach Redis at 127.0.0.1:1"},
		{[]string{"run", "--config=" + missing, "http://a.example/"}, 2, "--config: open " + missing + ": no such file"},
		{[]string{"run", "-config", twoDocs, "http://a.example/"}, 2, twoDocs + ": line 2: a second YAML document"},
		{[]string{"run", "--max-url-length", "10", "http://a.example/"}, 2, "--max-url-length: 10: want at least 256"},
		{[]string{"demo", "--procs", "0"}, 2, "--procs 0"},
		{[]string{"run", "-h"}, 0, "-max-per-site"},
		{[]string{"status", "-h"}, 0, "'crawler run -h' lists them"},
		{[]string{"bench", "--only", "limiter,nope"}, 2, `unknown section "nope"`},
		{[]string{"bench", "extra"}, 2, "unexpected arguments: extra"},
		{[]string{"bench", "-h"}, 0, "BENCHMARKS.md"},
		{[]string{"--help"}, 0, "bench"},
	} {
		cmd := exec.Command(bin, c.args...)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(string(out), c.want) {
			t.Errorf("crawler %v: exit %d, want %d with %q; output:\n%s", c.args, code, c.code, c.want, out)
		}
	}
}
