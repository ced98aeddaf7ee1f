package fetch

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// A request that Base sends through a proxy goes to the proxy as it is:
// the pin and the guard would otherwise see the proxy's address as the
// wrong one and refuse every request.
func TestAddrTransportLeavesProxiedRequests(t *testing.T) {
	target := listen(t, "127.0.0.1:0")
	startCounting(t, target, 0)
	_, port, _ := net.SplitHostPort(target.Addr().String())
	pl := listen(t, "127.0.0.2:0")
	var proxied atomic.Int64
	ps := &httptest.Server{Listener: pl, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		io.WriteString(w, "via proxy")
	})}}
	ps.Start()
	defer ps.Close()
	pu, _ := url.Parse("http://" + pl.Addr().String())
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = http.ProxyURL(pu)
	pins, err := ParseResolve([]string{"site.test:" + port + ":127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	at := NewAddrTransport(base, mustResolver(t, &ResolverOptions{Pins: pins}), nil, 0)
	c := &http.Client{Transport: at, Timeout: 5 * time.Second}
	if err := getBody(c, "http://site.test:"+port+"/"); err != nil {
		t.Fatalf("via a proxy: %v", err)
	}
	if proxied.Load() != 1 || at.Mismatches() != 0 {
		t.Errorf("proxy saw %d requests, %d mismatches; want 1, 0", proxied.Load(), at.Mismatches())
	}
}

// On HTTP/2 a connection to a host's earlier address carries other
// requests' streams: after a DNS change it is counted, not closed, and the
// download under way on it ends whole.
func TestAddrTransportKeepsSharedHTTP2Connection(t *testing.T) {
	la, lb, port := twoListeners(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			for i := range 5 {
				fmt.Fprintf(w, "chunk %d\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(50 * time.Millisecond)
			}
			return
		}
		io.WriteString(w, r.Proto)
	})
	for _, l := range []net.Listener{la, lb} {
		s := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}, EnableHTTP2: true}
		s.StartTLS()
		defer s.Close()
	}
	clock := newClock()
	dns := newFakeDNS(map[string]string{"moving.test": "127.0.0.1"})
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	base.ForceAttemptHTTP2 = true
	at := NewAddrTransport(base, mustResolver(t, &ResolverOptions{Lookup: dns.lookup, Now: clock.Now}), nil, 0)
	c := &http.Client{Transport: at, Timeout: 10 * time.Second}
	u := "https://moving.test:" + port
	resp, err := c.Get(u + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		t.Fatalf("the test needs HTTP/2, got %s", resp.Proto)
	}
	buf := make([]byte, 8)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	dns.mu.Lock()
	dns.table["moving.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	dns.mu.Unlock()
	clock.Add(2 * time.Hour)
	if err := getBody(c, u+"/"); err != nil {
		t.Errorf("the request after the DNS change: %v", err)
	}
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(buf)+len(rest) != 5*len("chunk 0\n") {
		t.Errorf("the download under way: %d bytes, %v; want all %d", len(buf)+len(rest), err, 5*len("chunk 0\n"))
	}
}

// A page request that waits for its address permit longer than half of
// what its deadline leaves ends as the crawler's doing (ErrNotFetched),
// never as a timeout of a request that never reached the server.
func TestAddrWaitEndsAsNotFetched(t *testing.T) {
	l := listen(t, "127.0.0.1:0")
	s := startCounting(t, l, 700*time.Millisecond)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	var specs []string
	for i := range 4 {
		specs = append(specs, fmt.Sprintf("h%d.test:%s:127.0.0.1", i, port))
	}
	pins, err := ParseResolve(specs)
	if err != nil {
		t.Fatal(err)
	}
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	prefix := keyPrefix(t)
	lim := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: 5 * time.Second, NoRestartGuard: true})
	t.Cleanup(func() { lim.Close() })
	at := NewAddrTransport(nil, mustResolver(t, &ResolverOptions{Pins: pins}), lim, 1)
	tr := &Transport{Base: at, Limiter: lim, Cap: 3}
	tr.Robots = robots.NewCache(rdb, &http.Client{Transport: &RobotsTransport{Base: at, Limiter: lim}}, &robots.CacheOptions{Prefix: prefix, UserAgent: "x"})
	warm := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for i := range 4 { // robots.txt of each host, one at a time
		if err := getBody(warm, fmt.Sprintf("http://h%d.test:%s/warm", i, port)); err != nil {
			t.Fatal(err)
		}
	}
	before := s.requests()
	c := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var fails []error
	for i := range 4 {
		wg.Go(func() {
			if err := getBody(c, fmt.Sprintf("http://h%d.test:%s/p", i, port)); err != nil {
				mu.Lock()
				fails = append(fails, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("the server saw %d of 4 requests; %d failed", s.requests()-before, len(fails))
	if len(fails) == 0 {
		t.Fatal("no request waited past its bound: the test proves nothing")
	}
	for _, err := range fails {
		if !errors.Is(err, robots.ErrNotFetched) {
			t.Errorf("a request that waited for its address permit failed as %v; want ErrNotFetched in it", err)
		}
	}
	if got := s.requests() - before; got+len(fails) != 4 {
		t.Errorf("the server saw %d requests and %d failed: a failed one reached it", got, len(fails))
	}
}

// --resolve refuses a HOST that no request could ever match, and takes
// every trailing dot off as robots.Site does.
func TestParseResolveRefusesImpossibleHosts(t *testing.T) {
	for _, spec := range []string{" a.test:80:127.0.0.1", "a test:80:127.0.0.1", "a/b:80:127.0.0.1", "*.example.com:80:127.0.0.1", "a..b:80:127.0.0.1"} {
		if _, err := ParseResolve([]string{spec}); !errors.Is(err, ErrResolveSpec) {
			t.Errorf("ParseResolve(%q): %v, want ErrResolveSpec", spec, err)
		}
	}
	pins, err := ParseResolve([]string{"a.test..:80:127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pins["a.test:80"]; !ok {
		t.Errorf("a.test..:80 pinned as %v, want a.test:80", pins)
	}
}
