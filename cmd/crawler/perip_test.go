package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// Two processes crawl the shared preset, eight sites to an IP (six of them
// virtual hosts reached by --resolve), with --max-per-ip at the IPs' cap:
// every site and every IP stays within its cap, counted at the server, the
// IP's cap is reached (so the limit, not a lack of work, held it), no
// request reaches an address that does not serve its Host, and every page
// is fetched.
func TestMaxPerIPAcrossTheFleet(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ts, seeds := startSites(t, "shared", 8)
	st := ts.Stats()
	if len(st.Addresses) != 1 || st.Addresses[0].Cap < 1 {
		t.Fatalf("the shared preset of 8 sites should put them on one IP with a cap: %+v", st.Addresses)
	}
	addrCap := st.Addresses[0].Cap
	args := []string{"--workers", "8", "--lease", "2s", "--max-per-ip", strconv.Itoa(addrCap)}
	for _, r := range ts.Resolve() {
		args = append(args, "--resolve", r)
	}
	if len(args) < 8 {
		t.Fatalf("the shared preset has no virtual hosts to --resolve: %v", ts.Resolve())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitAll(t, fleet(t, ctx, 2, rs.Addr, seeds, args...))

	checkPolite(t, ts)
	checkAllFetched(t, ts)
	for _, a := range ts.Stats().Addresses {
		t.Logf("IP %s: %d requests, at most %d at once (cap %d), %d over cap, %d misdirected", a.Addr, a.Requests, a.MaxInFlight, a.Cap, a.OverCap, a.Misdirected)
		if a.MaxInFlight > addrCap || a.OverCap > 0 {
			t.Errorf("IP %s: %d at once, %d starts over its cap %d", a.Addr, a.MaxInFlight, a.OverCap, addrCap)
		}
		if a.MaxInFlight < addrCap {
			t.Errorf("IP %s: at most %d at once; the crawl never reached its cap %d, so the test proves nothing", a.Addr, a.MaxInFlight, addrCap)
		}
		if a.Misdirected > 0 {
			t.Errorf("IP %s: %d requests for a Host it does not serve", a.Addr, a.Misdirected)
		}
	}
}
