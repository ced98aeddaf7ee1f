package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":                    "ip:192.0.2.7",
		"::ffff:192.0.2.7":             "ip:192.0.2.7",
		"2001:db8:1:2:aaaa::1":         "ip:2001:db8:1:2::/64",
		"2001:db8:1:2:bbbb:cccc::9":    "ip:2001:db8:1:2::/64",
		"2001:db8:1:3::1":              "ip:2001:db8:1:3::/64",
		"fe80::1%eth0":                 "ip:fe80::/64",
		"0:0:0:0:0:0:0:1":              "ip:::/64",
		"2001:0db8:0001:0002:0:0:0:77": "ip:2001:db8:1:2::/64",
	} {
		if got := AddrKey(netip.MustParseAddr(in)); got != want {
			t.Errorf("AddrKey(%s) = %s, want %s", in, got, want)
		}
	}
}

// countingServer serves on l and counts requests in flight, their maximum,
// and requests per Host header.
type countingServer struct {
	latency time.Duration
	srv     *httptest.Server

	mu       sync.Mutex
	inFlight int
	max      int
	perHost  map[string]int // requests
	hostNow  map[string]int // in flight per host
	hostMax  map[string]int
}

func startCounting(t *testing.T, l net.Listener, latency time.Duration) *countingServer {
	t.Helper()
	s := &countingServer{latency: latency, perHost: map[string]int{}, hostNow: map[string]int{}, hostMax: map[string]int{}}
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: s}}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *countingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := r.Host
	s.mu.Lock()
	s.inFlight++
	s.max = max(s.max, s.inFlight)
	s.perHost[h]++
	s.hostNow[h]++
	s.hostMax[h] = max(s.hostMax[h], s.hostNow[h])
	s.mu.Unlock()
	time.Sleep(s.latency)
	s.mu.Lock()
	s.inFlight--
	s.hostNow[h]--
	s.mu.Unlock()
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	io.WriteString(w, "ok")
}

func (s *countingServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.perHost {
		n += c
	}
	return n
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("listen %s: %v", addr, err)
	}
	return l
}

// twoListeners listens on 127.0.0.1 and 127.0.0.2 on one port.
func twoListeners(t *testing.T) (a, b net.Listener, port string) {
	t.Helper()
	for i := 0; i < 20; i++ {
		a = listen(t, "127.0.0.1:0")
		_, port, _ = net.SplitHostPort(a.Addr().String())
		if b, err := net.Listen("tcp", "127.0.0.2:"+port); err == nil {
			return a, b, port
		}
		a.Close()
	}
	t.Skip("no port free on both 127.0.0.1 and 127.0.0.2")
	return nil, nil, ""
}

func getBody(c *http.Client, u string) error {
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return nil
}

// A pinned name is dialled at its pin, though DNS would send it elsewhere,
// and DNS is not asked.
func TestDialGoesToPinnedAddress(t *testing.T) {
	la, lb, port := twoListeners(t)
	a, b := startCounting(t, la, 0), startCounting(t, lb, 0)
	dns := newFakeDNS(map[string]string{"site.test": "127.0.0.1"})
	pins, err := ParseResolve([]string{"site.test:" + port + ":127.0.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	at := NewAddrTransport(nil, mustResolver(t, &ResolverOptions{Lookup: dns.lookup, Pins: pins}), nil, 0)
	defer at.CloseIdleConnections()
	c := &http.Client{Transport: at, Timeout: 10 * time.Second}
	for _, u := range []string{"http://site.test:" + port + "/", "http://SITE.Test.:" + port + "/", "http://site.test:0" + port + "/"} {
		if err := getBody(c, u); err != nil {
			t.Fatal(err)
		}
	}
	if a.requests() != 0 || b.requests() != 3 || dns.count("site.test") != 0 {
		t.Fatalf("127.0.0.1 got %d, 127.0.0.2 got %d (want 0, 3); DNS asked %d times", a.requests(), b.requests(), dns.count("site.test"))
	}
	// Unpinned and unknown to DNS: an error, no dial.
	if err := getBody(c, "http://other.test:"+port+"/"); err == nil {
		t.Fatal("other.test has no address, but was fetched")
	}
}

// When a name's address changes, its pooled connection to the old address
// is not used for a request that holds the new address: the request goes
// to the new one.
func TestAddressChangeLeavesOldConnection(t *testing.T) {
	la, lb, port := twoListeners(t)
	a, b := startCounting(t, la, 0), startCounting(t, lb, 0)
	clock := newClock()
	dns := newFakeDNS(map[string]string{"moving.test": "127.0.0.1"})
	at := NewAddrTransport(nil, mustResolver(t, &ResolverOptions{Lookup: dns.lookup, Now: clock.Now}), nil, 0)
	defer at.CloseIdleConnections()
	c := &http.Client{Transport: at, Timeout: 10 * time.Second}
	u := "http://moving.test:" + port + "/"
	if err := getBody(c, u); err != nil {
		t.Fatal(err)
	}
	dns.mu.Lock()
	dns.table["moving.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	dns.mu.Unlock()
	clock.Add(2 * time.Hour)
	for i := 0; i < 2; i++ {
		if err := getBody(c, u); err != nil {
			t.Fatal(err)
		}
	}
	if a.requests() != 1 || b.requests() != 2 {
		t.Fatalf("old address got %d, new %d (want 1, 2); %d connections refused", a.requests(), b.requests(), at.Mismatches())
	}
	if at.Mismatches() != 1 {
		t.Errorf("%d connections refused, want the one pooled connection", at.Mismatches())
	}
}

// Many hosts on one address: with a site cap of 2 and 3 per address, the
// address never sees more than 3 at once and does see 3, every host is
// served, nothing deadlocks. Site permits are taken by Transport, the
// address permits by its Base, robots.txt requests included.
func TestManyHostsOneAddress(t *testing.T) {
	for _, mode := range []limiter.Mode{limiter.ModeLocked, limiter.ModeAtomic} {
		t.Run(mode.String(), func(t *testing.T) { manyHostsOneAddress(t, mode) })
	}
}

func manyHostsOneAddress(t *testing.T, mode limiter.Mode) {
	const hosts, perHost, maxPerIP, siteCap = 12, 3, 3, 2
	l := listen(t, "127.0.0.1:0")
	s := startCounting(t, l, 30*time.Millisecond)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	var specs []string
	for i := 0; i < hosts; i++ {
		specs = append(specs, fmt.Sprintf("h%d.test:%s:127.0.0.1", i, port))
	}
	pins, err := ParseResolve(specs)
	if err != nil {
		t.Fatal(err)
	}
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	prefix := keyPrefix(t)
	lim := limiter.New(rdb, &limiter.Options{Prefix: prefix, Mode: mode, Lease: 5 * time.Second, NoRestartGuard: true})
	t.Cleanup(func() { lim.Close() })
	res := mustResolver(t, &ResolverOptions{Pins: pins, Lookup: newFakeDNS(nil).lookup})
	at := NewAddrTransport(nil, res, lim, maxPerIP)
	defer at.CloseIdleConnections()
	tr := &Transport{Base: at, Limiter: lim, Cap: siteCap}
	tr.Robots = robots.NewCache(rdb, &http.Client{Transport: &RobotsTransport{Base: at, Limiter: lim}},
		&robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"})
	c := &http.Client{Transport: tr, Timeout: 60 * time.Second}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, hosts*perHost)
	for i := 0; i < hosts*perHost; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://h%d.test:%s/p/%d", i%hosts, port, i), nil)
			resp, err := c.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > maxPerIP || s.max < maxPerIP {
		t.Errorf("the address saw at most %d at once, want exactly %d (never more, and saturated)", s.max, maxPerIP)
	}
	for i := 0; i < hosts; i++ {
		h := "h" + strconv.Itoa(i) + ".test:" + port
		if s.perHost[h] != perHost+1 || s.hostMax[h] > siteCap {
			t.Errorf("%s: %d requests (want %d pages and robots.txt), %d at once (cap %d)", h, s.perHost[h], perHost, s.hostMax[h], siteCap)
		}
	}
	if st, err := lim.Status(context.Background(), AddrKey(netip.MustParseAddr("127.0.0.1")), maxPerIP); err != nil || st.Holders != 0 || st.Waiting != 0 {
		t.Errorf("address permits left in Redis: %+v, %v", st, err)
	}
	if at.Waiting() != 0 || tr.Waiting() != 0 {
		t.Errorf("still waiting: %d for an address, %d for a site", at.Waiting(), tr.Waiting())
	}
}

// A request that fails gives its address permit back at once: with one
// per address, failing requests one after the other never wait.
func TestAddrPermitReleasedOnError(t *testing.T) {
	l := listen(t, "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close() // nothing listens: every dial is refused
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	lim := limiter.New(rdb, &limiter.Options{Prefix: keyPrefix(t), Lease: 30 * time.Second, NoRestartGuard: true})
	t.Cleanup(func() { lim.Close() })
	pins, _ := ParseResolve([]string{"down.test:" + port + ":127.0.0.1"})
	at := NewAddrTransport(nil, mustResolver(t, &ResolverOptions{Pins: pins}), lim, 1)
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://down.test:"+port+"/", nil)
		_, err := at.RoundTrip(req)
		waited := ctx.Err() != nil
		cancel()
		if err == nil || waited {
			t.Fatalf("request %d: %v (want a refused dial, not a wait for the permit)", i, err)
		}
	}
	if st, err := lim.Status(context.Background(), AddrKey(netip.MustParseAddr("127.0.0.1")), 1); err != nil || st.Holders != 0 {
		t.Errorf("address permit left in Redis: %+v, %v", st, err)
	}
}

// With WithAddrTimeout, a wait for a busy address gives up after the
// timeout with robots.ErrNotFetched (no verdict on the server), and a
// request that got its permit has the whole timeout from then on.
func TestAddrTimeout(t *testing.T) {
	l := listen(t, "127.0.0.1:0")
	s := startCounting(t, l, 300*time.Millisecond)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	lim := limiter.New(rdb, &limiter.Options{Prefix: keyPrefix(t), Lease: 30 * time.Second, NoRestartGuard: true})
	t.Cleanup(func() { lim.Close() })
	pins, _ := ParseResolve([]string{"slow.test:" + port + ":127.0.0.1", "other.test:" + port + ":127.0.0.1"})
	at := NewAddrTransport(nil, mustResolver(t, &ResolverOptions{Pins: pins}), lim, 1)
	defer at.CloseIdleConnections()
	c := &http.Client{Transport: at}
	held := make(chan error, 1)
	go func() { held <- getBody(c, "http://slow.test:"+port+"/") }() // holds the address for 300 ms
	for s.requests() == 0 {
		time.Sleep(time.Millisecond)
	}
	req, _ := http.NewRequestWithContext(WithAddrTimeout(context.Background(), 50*time.Millisecond), http.MethodGet, "http://other.test:"+port+"/", nil)
	if _, err := c.Do(req); !errors.Is(err, robots.ErrNotFetched) {
		t.Errorf("wait past the timeout: %v, want robots.ErrNotFetched", err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	// Free now: a 300 ms request under a 1 s timeout.
	req, _ = http.NewRequestWithContext(WithAddrTimeout(context.Background(), time.Second), http.MethodGet, "http://other.test:"+port+"/", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.requests() != 2 {
		t.Errorf("the server saw %d requests, want 2 (the timed-out one never sent)", s.requests())
	}
}
