package testserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// vhostClient reaches sites by their VHost names: its transport dials each
// site's listener, as a crawler's --resolve would.
func vhostClient(t *testing.T, s *Server) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: s.DialContext, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: 10 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// sharedProfile puts sites 0-2 as virtual hosts on one port of address
// "x", sites 3 and 4 on ports of their own on the same IP, and site 5 on
// an IP of its own; each with the given latency.
func sharedProfile(latency time.Duration) Profile {
	spec := func(address, vhost string) SiteSpec {
		return SiteSpec{Pages: 5, Links: 1, Latency: Duration(latency), Address: address, VHost: vhost}
	}
	return Profile{Name: "shared-test", Seed: 1, Sites: []SiteSpec{
		spec("x", "a.vhost.test"), spec("x", "b.vhost.test"), spec("x", "c.vhost.test"),
		spec("x", ""), spec("x", ""), spec("", ""),
	}}
}

func TestVirtualHostsShareAnAddress(t *testing.T) {
	s := start(t, sharedProfile(0))
	sites := s.Sites()
	ip := func(addr string) string { h, _, _ := net.SplitHostPort(addr); return h }
	// Layout: one port for the three names, two more ports on that IP, and
	// the last site alone on another IP.
	if sites[0].Addr != sites[1].Addr || sites[1].Addr != sites[2].Addr {
		t.Fatalf("virtual hosts on different listeners: %s %s %s", sites[0].Addr, sites[1].Addr, sites[2].Addr)
	}
	if sites[3].Addr == sites[0].Addr || sites[4].Addr == sites[3].Addr ||
		ip(sites[3].Addr) != ip(sites[0].Addr) || ip(sites[4].Addr) != ip(sites[0].Addr) {
		t.Fatalf("own ports on the shared IP: %s %s (vhosts on %s)", sites[3].Addr, sites[4].Addr, sites[0].Addr)
	}
	if ip(sites[5].Addr) == ip(sites[0].Addr) {
		t.Fatalf("a site without an address label shares %s", sites[5].Addr)
	}
	_, port, _ := net.SplitHostPort(sites[0].Addr)
	if sites[1].URL != "http://b.vhost.test:"+port || sites[1].Host != "b.vhost.test:"+port {
		t.Fatalf("site 1: URL %s Host %s", sites[1].URL, sites[1].Host)
	}
	if sites[3].URL != "http://"+sites[3].Addr || sites[3].Resolve() != "" {
		t.Fatalf("site 3 (no vhost): URL %s, resolve %q", sites[3].URL, sites[3].Resolve())
	}
	want := []string{"a.vhost.test:" + port + ":" + ip(sites[0].Addr), "b.vhost.test:" + port + ":" + ip(sites[0].Addr),
		"c.vhost.test:" + port + ":" + ip(sites[0].Addr)}
	if got := s.Resolve(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Resolve: %q, want %q", got, want)
	}

	// Each name gets its own site's pages, and only its own site counts it.
	c := vhostClient(t, s)
	for i, site := range sites {
		code, body, _ := get(t, c, site.URL+"/p/1")
		if code != 200 || !strings.Contains(body, fmt.Sprintf("<title>site %d page 1</title>", i)) {
			t.Fatalf("%s/p/1: %d, want site %d's page: %.80q", site.URL, code, i, body)
		}
	}
	// Names are matched in any case and with a trailing dot.
	for _, host := range []string{"B.VHOST.TEST:" + port, "b.vhost.test.:" + port, "b.vhost.test"} {
		req, _ := http.NewRequest("GET", "http://"+sites[0].Addr+"/p/2", nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) // so the connection is reused
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("Host %q: %d", host, resp.StatusCode)
		}
	}
	st := s.Stats()
	for i, ss := range st.Sites {
		want := int64(1)
		if i == 1 {
			want = 4
		}
		if ss.Requests != want || ss.Addr != sites[i].Addr || ss.Host != sites[i].Host {
			t.Errorf("site %d: %d requests, addr %s host %s; want %d", i, ss.Requests, ss.Addr, ss.Host, want)
		}
	}
	if len(st.Addresses) != 2 || len(st.Listeners) != 4 || !st.Shared() {
		t.Fatalf("%d addresses, %d listeners, shared %v; want 2, 4, true", len(st.Addresses), len(st.Listeners), st.Shared())
	}
	if a := st.Addresses[0]; a.Requests != 8 || len(a.Sites) != 5 || a.Sites[1] != sites[1].Host || a.Addr != ip(sites[0].Addr) {
		t.Errorf("shared address: %+v", a)
	}
	if l := st.Listeners[0]; l.Requests != 6 || l.Addr != sites[0].Addr || len(l.Sites) != 3 {
		t.Errorf("virtual-host listener: %+v", l)
	}
	// A connection to the shared port counts for the site of its first
	// request: one per name, and one more for the requests sent to the IP
	// with another Host (its first was for b).
	var conns int64
	for _, ss := range st.Sites[:3] {
		conns += ss.Connections
	}
	if conns != st.Listeners[0].Connections || conns != 4 || st.Sites[1].Connections != 2 {
		t.Errorf("vhost sites count %d connections, their listener %d", conns, st.Listeners[0].Connections)
	}
}

func TestUnknownHostIsMisdirected(t *testing.T) {
	p := sharedProfile(0)
	p.Sites = append(p.Sites, SiteSpec{Pages: 2, Links: 1, VHost: "alone.vhost.test"}) // its own listener
	s := start(t, p)
	sites := s.Sites()
	_, port, _ := net.SplitHostPort(sites[0].Addr)
	c := vhostClient(t, s)
	for _, tc := range []struct{ addr, host string }{
		{sites[0].Addr, "z.vhost.test:" + port}, // no such name here
		{sites[0].Addr, sites[0].Addr},          // the IP itself
		{sites[0].Addr, "a.vhost.test:1"},       // a name here, another port
		{sites[0].Addr, "alone.vhost.test"},     // a name of another listener
		{sites[6].Addr, "a.vhost.test:" + port}, // and the other way round
	} {
		req, _ := http.NewRequest("GET", "http://"+tc.addr+"/p/0", nil)
		req.Host = tc.host
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body := resp.StatusCode, string(b)
		if code != http.StatusMisdirectedRequest || strings.Contains(body, "<title>") {
			t.Errorf("Host %q at %s: %d %.60q; want 421 and no page", tc.host, tc.addr, code, body)
		}
	}
	// The site alone on its port still answers its own name.
	if code, _, _ := get(t, c, sites[6].URL+"/p/1"); code != 200 {
		t.Fatalf("%s: %d", sites[6].URL, code)
	}
	st := s.Stats()
	for i, ss := range st.Sites {
		want := int64(0)
		if i == 6 {
			want = 1
		}
		if ss.Requests != want {
			t.Errorf("site %d counted %d requests, want %d", i, ss.Requests, want)
		}
	}
	if a := st.Addresses[0]; a.Misdirected != 4 || a.Requests != 4 || a.InFlight != 0 {
		t.Errorf("shared IP: %+v; want 4 requests, all misdirected", a)
	}
	if l := st.Listeners[0]; l.Misdirected != 4 || l.Requests != 4 {
		t.Errorf("vhost listener: %+v", l)
	}
	if l := st.Listeners[len(st.Listeners)-1]; l.Misdirected != 1 || l.Requests != 2 {
		t.Errorf("lone vhost listener: %+v; want 2 requests, 1 misdirected", l)
	}
}

// holdMany starts the requests of urls at once (the sites hold them open),
// waits until the server counts them all, and returns a func that cancels
// them and waits for the server to see them end.
func holdMany(t *testing.T, s *Server, c *http.Client, urls []string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// Arrived: counted by every address and every site, which count each
	// request apart, one after the other.
	arrived := func() (addrs, sites int64) {
		st := s.Stats()
		for _, a := range st.Addresses {
			addrs += a.Requests
		}
		for _, x := range st.Sites {
			sites += x.Requests
		}
		return addrs, sites
	}
	beforeAddrs, beforeSites := arrived()
	var wg sync.WaitGroup
	for _, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		addrs, sites := arrived()
		if addrs == beforeAddrs+int64(len(urls)) && sites == beforeSites+int64(len(urls)) {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("timed out: %d of %d requests arrived at their addresses, %d at their sites", addrs-beforeAddrs, len(urls), sites-beforeSites)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return func() {
		cancel()
		wg.Wait()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			busy := 0
			for _, a := range s.Stats().Addresses {
				busy += a.InFlight
			}
			if busy == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %d requests to end", busy)
			}
		}
	}
}

// The shared IP counts at once everything in flight on it, across its
// virtual hosts and its ports; each site and each port counts its share.
// Starts past the profile's cap per IP count as over it.
func TestInFlightCountedPerAddress(t *testing.T) {
	p := sharedProfile(time.Minute)
	p.AddressCap = 7
	s := start(t, p)
	sites := s.Sites()
	share := []int{3, 2, 1, 2, 1, 2} // requests held per site
	var urls []string
	for i, n := range share {
		for k := 0; k < n; k++ {
			urls = append(urls, fmt.Sprintf("%s/p/%d", sites[i].URL, k))
		}
	}
	c := vhostClient(t, s)
	release := holdMany(t, s, c, urls)
	st := s.Stats()
	if a := st.Addresses[0]; a.InFlight != 9 || a.MaxInFlight != 9 || a.Requests != 9 {
		t.Errorf("shared IP: %d in flight, max %d, %d requests; want 9, 9, 9", a.InFlight, a.MaxInFlight, a.Requests)
	}
	if a := st.Addresses[0]; a.Cap != 7 || a.OverCap != 2 {
		t.Errorf("shared IP, cap 7, 9 at once: cap %d, over cap %d; want 7 and 2", a.Cap, a.OverCap)
	}
	if a := st.Addresses[1]; a.MaxInFlight != 2 || a.OverCap != 0 {
		t.Errorf("the other IP: max %d, over cap %d; want 2, 0", a.MaxInFlight, a.OverCap)
	}
	for i, l := range []int{6, 2, 1, 2} {
		if got := st.Listeners[i]; got.MaxInFlight != l || got.Cap != 0 || got.OverCap != 0 {
			t.Errorf("listener %d (%s): max %d (cap %d, over %d), want %d (no cap)", i, got.Addr, got.MaxInFlight, got.Cap, got.OverCap, l)
		}
	}
	for i, n := range share {
		if got := st.Sites[i].MaxInFlight; got != n {
			t.Errorf("site %d: max %d, want its share %d", i, got, n)
		}
	}
	if a := st.Addresses[0]; len(a.Series) == 0 || a.Series[len(a.Series)-1] != 9 {
		t.Errorf("shared IP series ends %v, want 9", a.Series[max(0, len(a.Series)-3):])
	}
	// A reset keeps what is in flight as the new maximum.
	s.Reset()
	if a := s.Stats().Addresses[0]; a.Requests != 0 || a.InFlight != 9 || a.MaxInFlight != 9 {
		t.Errorf("reset with 9 in flight: %+v", a)
	}
	release()
	s.Reset()
	st = s.Stats()
	for _, a := range append(st.Addresses, st.Listeners...) {
		if a.Requests != 0 || a.InFlight != 0 || a.MaxInFlight != 0 || a.Misdirected != 0 || a.Connections != 0 || a.OverCap != 0 {
			t.Errorf("after the requests ended and a reset: %+v", a)
		}
	}
	// Sequential requests at mixed hosts are one at a time at the address.
	fast := start(t, sharedProfile(0))
	fc := vhostClient(t, fast)
	for _, site := range fast.Sites()[:5] {
		get(t, fc, site.URL+"/p/0")
	}
	if a := fast.Stats().Addresses[0]; a.MaxInFlight != 1 || a.Requests != 5 {
		t.Errorf("sequential requests: %+v", a)
	}
}

// /_stats carries the rows per address and per listener.
func TestAddressStatsJSON(t *testing.T) {
	s := start(t, sharedProfile(0))
	get(t, vhostClient(t, s), s.Sites()[2].URL+"/p/0")
	_, body, _ := get(t, http.DefaultClient, s.ControlURL()+"/_stats")
	var raw struct {
		Sites     []map[string]any `json:"sites"`
		Addresses []map[string]any `json:"addresses"`
		Listeners []map[string]any `json:"listeners"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Addresses) != 2 || len(raw.Listeners) != 4 || raw.Sites[2]["addr"] != s.Sites()[2].Addr {
		t.Fatalf("/_stats: %d addresses, %d listeners, site addr %v", len(raw.Addresses), len(raw.Listeners), raw.Sites[2]["addr"])
	}
	for _, key := range []string{"addr", "sites", "requests", "inflight", "max_inflight", "misdirected", "connections", "series"} {
		if _, ok := raw.Addresses[0][key]; !ok {
			t.Errorf("/_stats addresses lack %q", key)
		}
	}
	if raw.Addresses[0]["requests"].(float64) != 1 || raw.Listeners[0]["max_inflight"].(float64) != 1 {
		t.Errorf("addresses %v", raw.Addresses[0])
	}
}

func TestSharedPresetAndValidation(t *testing.T) {
	p, err := Preset("shared", 2*sharedPerIP+3, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, p, WithControl(""))
	st := s.Stats()
	if len(st.Addresses) != 3 || len(st.Listeners) != 2*(1+sharedPerIP-sharedVHosts)+1 || !st.Shared() {
		t.Fatalf("shared preset, %d sites: %d addresses, %d listeners", len(p.Sites), len(st.Addresses), len(st.Listeners))
	}
	if p.AddressCap != 4 || st.Addresses[0].Cap != 4 {
		t.Fatalf("shared preset: address cap %d, stats cap %d; want 4", p.AddressCap, st.Addresses[0].Cap)
	}
	if len(s.Resolve()) != 2*sharedVHosts+3 || !strings.HasPrefix(s.Resolve()[1], "site1.test:") {
		t.Fatalf("resolve: %q", s.Resolve())
	}
	c := vhostClient(t, s)
	for _, site := range s.Sites() {
		if code, _, _ := get(t, c, site.URL+"/"); code != 200 {
			t.Fatalf("%s: %d", site.URL, code)
		}
	}
	if m, _ := Preset("mixed", 4, 1); start(t, m, WithControl("")).Stats().Shared() {
		t.Error("the mixed preset shares an address")
	}
	bad := Profile{Sites: []SiteSpec{
		{Pages: 1, Address: "x", VHost: "a.test"}, {Pages: 1, Address: "x", VHost: "a.test"},
		{Pages: 1, VHost: "127.0.0.9"}, {Pages: 1, VHost: "Upper.test"}, {Pages: 1, VHost: "nodot"},
		{Pages: 1, VHost: "a..test"}, {Pages: 1, VHost: "-a.test"}, {Pages: 1, Address: strings.Repeat("x", 65)},
	}, AddressCap: -1}
	err = bad.Validate()
	for _, want := range []string{"sites[1].vhost", "sites[2].vhost", "sites[3].vhost", "sites[4].vhost",
		"sites[5].vhost", "sites[6].vhost", "sites[7].address", "address_cap"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation does not name %s: %v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "sites[0].vhost") {
		t.Errorf("the first of two names flagged: %v", err)
	}
}

// With sites sharing an IP, the dashboard adds a row and a chart per IP and
// per port, after the rows per site.
func TestDashboardShowsAddresses(t *testing.T) {
	p := sharedProfile(0)
	p.AddressCap = 4
	s := start(t, p)
	c := vhostClient(t, s)
	for _, site := range s.Sites() {
		get(t, c, site.URL+"/p/0")
	}
	_, body, _ := get(t, http.DefaultClient, s.ControlURL()+"/")
	if n := strings.Count(body, "<tr><td"); n != 6 {
		t.Errorf("%d site rows, want 6", n)
	}
	if n := strings.Count(body, `<tr class="addr">`); n != 2+4 {
		t.Errorf("%d address rows, want 2 IPs + 4 ports", n)
	}
	if n := strings.Count(body, "<svg"); n != 6+6 {
		t.Errorf("%d charts, want 12", n)
	}
	// Every site chart and the two IP charts draw a cap; the port charts not.
	if n := strings.Count(body, "stroke-dasharray"); n != 6+2 {
		t.Errorf("%d cap lines, want 8", n)
	}
	for _, want := range []string{"IP " + s.Stats().Addresses[0].Addr, "port " + s.Sites()[0].Addr} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	// One site per IP: no address rows.
	m, _ := Preset("mixed", 3, 1)
	_, body, _ = get(t, http.DefaultClient, start(t, m).ControlURL()+"/")
	if strings.Contains(body, `<tr class="addr">`) {
		t.Error("address rows with one site per IP")
	}
}
