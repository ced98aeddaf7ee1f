package main

import (
	"os/exec"
	"strings"
	"testing"
)

// --log-level and --log-format reach every command that logs; a bad value
// is a usage error (exit 2). Durations are strings in JSON too.
func TestLogFlags(t *testing.T) {
	bin := build(t)
	const down = "redis://127.0.0.1:1" // refuses: the run logs its retries, at warn level, then fails
	for _, c := range []struct {
		args    []string
		code    int
		want    []string
		notWant string
	}{
		{[]string{"run", "--log-level", "loud", "http://a.example/"}, 2, []string{`--log-level: "loud": want debug, info, warn or error`}, ""},
		{[]string{"status", "--log-format", "xml"}, 2, []string{`--log-format: "xml": want auto, text or json`}, ""},
		{[]string{"demo", "--log-level", "chatty"}, 2, []string{`--log-level "chatty": want debug, info, warn or error`}, ""},
		{[]string{"run", "--redis", down, "--log-format", "json", "http://a.example/"}, 1,
			[]string{`"level":"WARN","msg":"Redis not reachable yet; retrying"`, `"in":"250ms"`}, `"in":250000000`},
		{[]string{"run", "--redis", down, "--log-format", "text", "http://a.example/"}, 1,
			[]string{`level=WARN msg="Redis not reachable yet; retrying"`, "in=250ms"}, `{"time"`},
		{[]string{"status", "--redis", down, "--log-level", "error"}, 1, []string{"cannot reach Redis"}, "retrying"},
	} {
		cmd := exec.Command(bin, c.args...)
		out, _ := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		ok := code == c.code && (c.notWant == "" || !strings.Contains(string(out), c.notWant))
		for _, w := range c.want {
			ok = ok && strings.Contains(string(out), w)
		}
		if !ok {
			t.Errorf("crawler %v: exit %d, want %d with %q and not %q; output:\n%s", c.args, code, c.code, c.want, c.notWant, out)
		}
	}
}
