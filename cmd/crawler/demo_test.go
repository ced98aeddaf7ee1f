package main

import (
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
