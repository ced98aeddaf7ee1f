package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseResolve(t *testing.T) {
	ok := []struct {
		spec, key string
		want      []string
	}{
		{"example.com:443:192.0.2.7", "example.com:443", []string{"192.0.2.7"}},
		{"Example.COM.:0443:192.0.2.7", "example.com:443", []string{"192.0.2.7"}},
		{"bücher.example:80:[2001:db8::1]", "xn--bcher-kva.example:80", []string{"2001:db8::1"}},
		{"a.test:80:2001:db8::1,192.0.2.1", "a.test:80", []string{"2001:db8::1", "192.0.2.1"}},
		{"*:8080:127.0.0.1", "*:8080", []string{"127.0.0.1"}},
		{"a.test:80:::ffff:192.0.2.9", "a.test:80", []string{"192.0.2.9"}},
	}
	for _, c := range ok {
		t.Run(c.spec, func(t *testing.T) {
			pins, err := ParseResolve([]string{c.spec})
			if err != nil {
				t.Fatal(err)
			}
			got := pins[c.key]
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("pins[%q] = %v, want %v (all: %v)", c.key, got, c.want, pins)
			}
		})
	}
	for _, spec := range []string{
		"", "example.com", "example.com:443", "example.com:http:192.0.2.1", "example.com:0:192.0.2.1",
		"example.com:65536:192.0.2.1", "example.com:443:", "example.com:443:host.example", "example.com:443:192.0.2.1,",
		"192.0.2.1:80:192.0.2.2", "[::1]:80:192.0.2.2", "+example.com:443:192.0.2.1", "-example.com:443", ":443:192.0.2.1",
		"example.com:+443:192.0.2.1",
	} {
		t.Run("bad "+spec, func(t *testing.T) {
			if pins, err := ParseResolve([]string{spec}); !errors.Is(err, ErrResolveSpec) {
				t.Fatalf("ParseResolve(%q) = %v, %v; want ErrResolveSpec", spec, pins, err)
			}
		})
	}
	if _, err := ParseResolve([]string{"a.test:80:192.0.2.1", "A.test.:80:192.0.2.2"}); !errors.Is(err, ErrResolveSpec) {
		t.Errorf("a host:port pinned twice: %v, want ErrResolveSpec", err)
	}
}

// fakeDNS is a LookupFunc with a table, counting queries per name.
type fakeDNS struct {
	mu      sync.Mutex
	table   map[string][]netip.Addr
	ttl     time.Duration
	queries map[string]int
	block   chan struct{} // when set, every query waits for it
}

func (f *fakeDNS) lookup(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	f.mu.Lock()
	f.queries[host]++
	block := f.block
	a, ok := f.table[host]
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	if !ok {
		return nil, 0, errors.New("no such host")
	}
	return a, f.ttl, nil
}

func (f *fakeDNS) count(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries[host]
}

func newFakeDNS(table map[string]string) *fakeDNS {
	f := &fakeDNS{table: map[string][]netip.Addr{}, queries: map[string]int{}}
	for h, list := range table {
		var addrs []netip.Addr
		for _, s := range splitComma(list) {
			addrs = append(addrs, netip.MustParseAddr(s))
		}
		f.table[h] = addrs
	}
	return f
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func newClock() *fakeClock               { return &fakeClock{now: time.Unix(1_800_000_000, 0)} }
func mustResolver(t *testing.T, o *ResolverOptions) *Resolver {
	t.Helper()
	r, err := NewResolver(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResolverChoosesAndCaches(t *testing.T) {
	dns := newFakeDNS(map[string]string{
		"mixed.test":  "2001:db8::1,192.0.2.9,192.0.2.3",
		"v6.test":     "2001:db8::9,2001:db8::2",
		"mapped.test": "::ffff:192.0.2.5",
	})
	pins, err := ParseResolve([]string{"pinned.test:80:192.0.2.200", "*:8080:192.0.2.100"})
	if err != nil {
		t.Fatal(err)
	}
	r := mustResolver(t, &ResolverOptions{Lookup: dns.lookup, Pins: pins})
	ctx := context.Background()
	for _, c := range []struct{ host, port, want string }{
		{"mixed.test", "80", "192.0.2.3"}, // IPv4 first, the lowest
		{"MIXED.test.", "443", "192.0.2.3"},
		{"v6.test", "80", "2001:db8::2"},
		{"mapped.test", "80", "192.0.2.5"},
		{"pinned.test", "80", "192.0.2.200"},
		{"pinned.test", "8080", "192.0.2.100"}, // "*" on its port
		{"mixed.test", "8080", "192.0.2.100"},
		{"192.0.2.77", "80", "192.0.2.77"},
		{"[2001:db8::5]", "80", "2001:db8::5"},
	} {
		got, err := r.Resolve(ctx, c.host, c.port)
		if err != nil || got.String() != c.want {
			t.Errorf("Resolve(%s, %s) = %v, %v; want %s", c.host, c.port, got, err, c.want)
		}
	}
	if n := dns.count("mixed.test"); n != 1 {
		t.Errorf("mixed.test asked %d times, want 1 (cached)", n)
	}
	if n := dns.count("pinned.test") + dns.count("192.0.2.77") + dns.count("2001:db8::5"); n != 0 {
		t.Errorf("pins and IP literals asked DNS %d times", n)
	}
}

func TestResolverTTL(t *testing.T) {
	clock := newClock()
	dns := newFakeDNS(map[string]string{"a.test": "192.0.2.1"})
	r := mustResolver(t, &ResolverOptions{Lookup: dns.lookup, Now: clock.Now, TTL: time.Minute,
		MinTTL: 10 * time.Second, MaxTTL: 2 * time.Minute, NegativeTTL: 3 * time.Second})
	ctx := context.Background()
	resolve := func() { r.Resolve(ctx, "a.test", "80") }
	// Lives, in turn: TTL (lookup knows none), MinTTL (lookup says 1 s),
	// MaxTTL (lookup says an hour).
	for _, c := range []struct {
		ttl, lives time.Duration
	}{{0, time.Minute}, {time.Second, 10 * time.Second}, {time.Hour, 2 * time.Minute}} {
		dns.mu.Lock()
		dns.ttl = c.ttl
		dns.mu.Unlock()
		before := dns.count("a.test")
		resolve()
		clock.Add(c.lives - time.Millisecond)
		resolve()
		if n := dns.count("a.test") - before; n != 1 {
			t.Errorf("lookup TTL %s: %d queries within %s, want 1", c.ttl, n, c.lives)
		}
		clock.Add(time.Millisecond)
		resolve()
		if n := dns.count("a.test") - before; n != 2 {
			t.Errorf("lookup TTL %s: %d queries at %s, want 2", c.ttl, n, c.lives)
		}
		clock.Add(3 * time.Hour)
	}
	// A failure is remembered for NegativeTTL.
	for i := 0; i < 3; i++ {
		if _, err := r.Resolve(ctx, "gone.test", "80"); err == nil {
			t.Fatal("gone.test resolved")
		}
	}
	clock.Add(3 * time.Second)
	if _, err := r.Resolve(ctx, "gone.test", "80"); err == nil {
		t.Fatal("gone.test resolved")
	}
	if n := dns.count("gone.test"); n != 2 {
		t.Errorf("gone.test asked %d times, want 2 (once, then after NegativeTTL)", n)
	}
	if _, err := NewResolver(&ResolverOptions{MinTTL: time.Hour, MaxTTL: time.Minute}); err == nil {
		t.Error("MinTTL above MaxTTL accepted")
	}
}

func TestResolverSingleflightAndBound(t *testing.T) {
	dns := newFakeDNS(map[string]string{"a.test": "192.0.2.1"})
	dns.block = make(chan struct{})
	r := mustResolver(t, &ResolverOptions{Lookup: dns.lookup, MaxEntries: 3})
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if a, err := r.Resolve(context.Background(), "a.test", "80"); err == nil && a.String() == "192.0.2.1" {
				ok.Add(1)
			}
		}()
	}
	// One caller gives up; the others still get the answer.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Resolve(cctx, "a.test", "80"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v", err)
	}
	for dns.count("a.test") == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the callers join the query
	close(dns.block)
	wg.Wait()
	if ok.Load() != 50 || dns.count("a.test") != 1 {
		t.Errorf("%d of 50 resolved, with %d queries (want 50 with 1)", ok.Load(), dns.count("a.test"))
	}
	dns.block = nil
	for i := 0; i < 10; i++ {
		r.Resolve(context.Background(), fmt.Sprintf("n%d.test", i), "80") // failures are cached too
	}
	if r.Len() != 3 {
		t.Errorf("cache holds %d names, want its bound 3", r.Len())
	}
	r.Resolve(context.Background(), "n0.test", "80") // evicted: asked again
	if n := dns.count("n0.test"); n != 2 {
		t.Errorf("evicted n0.test asked %d times, want 2", n)
	}
}
