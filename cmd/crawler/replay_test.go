package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polite-crawler/polite/internal/redistest"
)

// crawler redis-replay replays a capture on a redis-server of its own, once
// that has been up --age (past the limiter's restart guard), and reports
// per page; wrong flags are usage errors (exit 2) that say what is wrong,
// and --callgrind without valgrind says what to install.
func TestRedisReplay(t *testing.T) {
	dir := t.TempDir()
	capture := filepath.Join(dir, "crawl.monitor")
	lines := `OK
1764151200.000001 [0 127.0.0.1:52000] "HELLO" "3"
1764151200.000002 [0 127.0.0.1:52000] "EVAL" "redis.call('INCRBY', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])" "1" "pages" "2"
1764151200.000003 [0 lua] "INCRBY" "pages" "2"
1764151200.000004 [0 lua] "GET" "pages"
1764151200.000005 [0 127.0.0.1:52000] "SET" "bin" "\x02\xff\"q\""
1764151200.000006 [0 127.0.0.1:52000] "SUBSCRIBE" "wake"
`
	if err := os.WriteFile(capture, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"redis-replay", "--capture", capture, "--pages", "4", "--depth", "1", "--age", "2s"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		"replayed 2 commands, 1 to a round trip",
		": 0 errors",
		"left out: hello 1, subscribe 1",
		"Redis: ",
		"4 commands run", // EVAL, its INCRBY and GET, SET
		"per page (4 pages): ",
		"0.5 commands sent, 1.0 run",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	// A private redis-server starts at uptime 0 (1 when a second of the
	// wall clock turned since it started): the replay waits.
	if e := errb.String(); !strings.HasPrefix(e, "waiting until the Redis has been up 2s (up ") ||
		!strings.HasSuffix(e, "s): past the limiter's restart guard (--age)\n") || strings.Count(e, "\n") != 1 {
		t.Errorf("stderr %q, want one line saying it waits until the Redis has been up 2s", e)
	}

	empty := filepath.Join(dir, "empty.monitor")
	if err := os.WriteFile(empty, []byte("OK\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "--capture is required"},
		{[]string{"--capture", capture, "--depth", "0"}, 2, "--depth must be at least 1"},
		{[]string{"--capture", capture, "--pages", "-1"}, 2, "--pages must not be negative"},
		{[]string{"--capture", capture, "--age", "-1s"}, 2, "--age must not be negative"},
		{[]string{"--capture", capture, "--callgrind", "--redis", "127.0.0.1:1"}, 2, "--callgrind runs its own redis-server"},
		{[]string{"--capture", capture, "--callgrind-out", "x"}, 2, "--callgrind-out needs --callgrind"},
		{[]string{"--capture", capture, "extra"}, 2, "unexpected arguments: extra"},
		{[]string{"--capture", capture, "--redis", "redis://127.0.0.1:1/3"}, 2, "want redis://host:port alone (no database"},
		{[]string{"--capture", capture, "--redis", "127.0.0.1"}, 2, "want host:port or redis://host:port"},
		{[]string{"--capture", filepath.Join(dir, "nope")}, 1, "no such file"},
		{[]string{"--capture", empty}, 1, "no commands to replay"},
	} {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), append([]string{"redis-replay"}, c.args...), &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("redis-replay %q: exit %d, stderr %q; want exit %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
	}

	// --redis takes the redis:// URL that crawler run takes, too.
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out.Reset()
	if code := dispatch(context.Background(), []string{"redis-replay", "--capture", capture, "--redis", "redis://" + rs.Addr, "--age", "0"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "replayed 2 commands") {
		t.Errorf("--redis redis://%s: exit %d, %s%s", rs.Addr, code, out.String(), errb.String())
	}
	if v, err := rs.Client().Get(context.Background(), "pages").Result(); err != nil || v != "2" {
		t.Errorf("the replay on --redis redis://%s left pages %q, %v; want 2", rs.Addr, v, err)
	}

	t.Setenv("PATH", dir) // nothing on PATH: no valgrind
	errb.Reset()
	if code := dispatch(context.Background(), []string{"redis-replay", "--capture", capture, "--callgrind"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "--callgrind needs valgrind on PATH") {
		t.Errorf("--callgrind without valgrind: exit %d, %q", code, errb.String())
	}
}

// callgrindTotal reads a profile's totals line (or an older valgrind's
// summary line); a profile without one is an error, not 0.
func TestCallgrindTotal(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		text string
		want int64
		ok   bool
	}{
		{"# callgrind format\nevents: Ir\nsummary: 123\nfn=main\n1 5\ntotals: 3054905501\n", 3054905501, true},
		{"events: Ir\nsummary: 77\n", 77, true},
		{"events: Ir\nfn=main\n1 5\n", 0, false},
		{"events: Ir\ntotals: lots\n", 0, false},
	} {
		name := filepath.Join(dir, "callgrind.out")
		if err := os.WriteFile(name, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := callgrindTotal(name)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("callgrindTotal(%q) = %d, %v; want %d (ok %v)", c.text, got, err, c.want, c.ok)
		}
	}
	if _, err := callgrindTotal(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing profile read as a count")
	}
}

// scratchRedis takes what crawler run's --redis takes for one server, and
// refuses the rest with a usage error that quotes the flag as given.
func TestScratchRedis(t *testing.T) {
	for in, want := range map[string]string{
		"":                        "",
		"127.0.0.1:6399":          "127.0.0.1:6399",
		"[::1]:6399":              "[::1]:6399",
		"localhost:1":             "localhost:1",
		"redis://127.0.0.1:6399":  "127.0.0.1:6399",
		"redis://127.0.0.1:6399/": "127.0.0.1:6399",
		"REDIS://h:1":             "h:1",
		"redis://[::1]:6399":      "[::1]:6399",
		"redis://h":               "h:6379",
	} {
		if got, err := scratchRedis(in); err != nil || got != want {
			t.Errorf("scratchRedis(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"127.0.0.1":              "want host:port",
		":6379":                  "want host:port",
		"h:abc":                  `port "abc" is not a port number`,
		"h:99999":                `port "99999" is not a port number`,
		"h:0":                    `port "0" is not a port number`,
		"redis://":               "want host:port",
		"redis://:6379":          "want host:port",
		"redis://h:1/3":          "no database",
		"redis://u:p@h:1":        "no database, user, password",
		"redis://h:1?protocol=3": "no database, user, password or options",
		"rediss://h:1":           "only redis://",
		"unix:///tmp/r.sock":     "only redis://",
		"http://h:1":             "only redis://",
	} {
		_, err := scratchRedis(in)
		if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("scratchRedis(%q): %v; want a usage error quoting it and saying %q", in, err, why)
		}
		if err != nil && !errors.Is(err, errUsage) {
			t.Errorf("scratchRedis(%q): %v is not a usage error", in, err)
		}
	}
	var out, errb bytes.Buffer // bench refuses it before starting anything
	if code := dispatch(context.Background(), []string{"bench", "--only", "crawl", "--redis", "redis://127.0.0.1:1/2"}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "no database") {
		t.Errorf("bench --redis redis://127.0.0.1:1/2: exit %d, %q; want exit 2 and the reason", code, errb.String())
	}
}
