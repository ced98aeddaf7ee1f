package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/polite-crawler/polite/testserver"
)

// The demo's verdict counts the sites and IPs that testserver says saw a
// violation, and marks their rows; the ports get no verdict of their own.
func TestWriteVerdict(t *testing.T) {
	st := testserver.Stats{Sites: []testserver.SiteStats{
		{Host: "a.test", Cap: 2, MaxInFlight: 2, Pages: 3, MinGapMs: -1},
		{Host: "b.test", Cap: 2, MaxInFlight: 2, Pages: 4, DisallowedHits: 1, MinGapMs: -1},
	}}
	var b strings.Builder
	if bad, badAddrs := writeVerdict(&b, st); bad != 1 || badAddrs != 0 {
		t.Errorf("writeVerdict = %d, %d; want 1 site, 0 IPs", bad, badAddrs)
	}
	if out := b.String(); strings.Count(out, "VIOLATION") != 1 || strings.Contains(out, "address") {
		t.Errorf("one site's row marked, no address table, want:\n%s", out)
	}
	st.Addresses = []testserver.AddrStats{{Addr: "127.0.0.2", Sites: []string{"a.test", "b.test"}, Cap: 2, OverCap: 1}}
	st.Listeners = []testserver.AddrStats{{Addr: "127.0.0.2:9", Sites: []string{"a.test", "b.test"}, Misdirected: 1}}
	b.Reset()
	if bad, badAddrs := writeVerdict(&b, st); bad != 1 || badAddrs != 1 {
		t.Errorf("writeVerdict = %d, %d; want 1 site, 1 IP", bad, badAddrs)
	}
	rows := map[string]string{} // first two fields -> the rest, spaces squeezed
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) > 2 {
			rows[f[0]+" "+f[1]] = strings.Join(f[2:], " ")
		}
	}
	if got, want := rows["ip 127.0.0.2"], "2 7 2 0 1 0 VIOLATION"; got != want {
		t.Errorf("IP row %q, want %q", got, want)
	}
	if got, want := rows["port 127.0.0.2:9"], "2 7 - 0 0 1 -"; got != want {
		t.Errorf("port row %q, want %q", got, want)
	}
}

// The demo refuses, as a usage error naming the flag, what its workers
// would refuse or it cannot run with, in the order of its flags.
func TestDemoFlagsChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" for none
	}{
		{nil, ""},
		{[]string{"--procs", "64", "--workers", "256", "--semaphore", "atomic", "--log-level", "debug", "--log-format", "json"}, ""},
		{[]string{"--procs", "0"}, `usage: --procs 0: want 1..64`},
		{[]string{"--workers", "257"}, `usage: --workers 257: want 1..256`},
		{[]string{"--semaphore", "x"}, `usage: --semaphore "x": want locked or atomic`},
		{[]string{"--log-level", "loud"}, `usage: --log-level "loud": want debug, info, warn or error`},
		{[]string{"--log-format", "xml"}, `usage: --log-format "xml": want auto, text or json`},
		{[]string{"extra"}, `usage: unexpected arguments ["extra"]`},
		{[]string{"--procs", "0", "--semaphore", "x"}, `usage: --procs 0: want 1..64`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := parseDemoFlags(c.args, io.Discard)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case c.want != "" && (!errors.Is(err, errUsage) || err.Error() != c.want):
				t.Errorf("error %v, want the usage error %q", err, c.want)
			}
		})
	}
}

// Each worker is 'crawler run' on the demo's Redis and a new crawl, with
// the demo's settings, then the sites' flags and the seeds; the workers of
// one demo share one crawl, and two demos do not.
func TestDemoWorkerArgs(t *testing.T) {
	d, err := parseDemoFlags([]string{"--workers", "7", "--semaphore", "atomic", "--lease", "3s", "--log-format", "json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d.redisURL = "redis://127.0.0.1:9"
	args := d.workerArgs([]string{"--max-per-ip", "2"}, []string{"http://a.test/", "http://b.test/"})
	flags := map[string]string{}
	for i := 1; i+1 < len(args) && strings.HasPrefix(args[i], "--"); i += 2 {
		flags[args[i]] = args[i+1]
	}
	if args[0] != "run" || flags["--redis"] != d.redisURL || flags["--workers"] != "7" || flags["--semaphore"] != "atomic" ||
		flags["--lease"] != "3s" || flags["--log-format"] != "json" || flags["--log-level"] != "info" || flags["--max-per-ip"] != "2" ||
		!strings.HasPrefix(flags["--crawl"], "demo-") {
		t.Errorf("worker args %q", args)
	}
	if tail := strings.Join(args[len(args)-2:], " "); tail != "http://a.test/ http://b.test/" {
		t.Errorf("worker args end %q, want the seeds", tail)
	}
	if again := d.workerArgs(nil, nil); again[4] == flags["--crawl"] {
		t.Errorf("two calls share crawl %s", again[4])
	}
}
