package fetch

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// ErrNoAddress is wrapped by Resolve's error when a name has no usable
// address.
var ErrNoAddress = errors.New("fetch: no address")

// LookupFunc asks DNS for host's addresses. ttl is how long the answer may
// be kept, or 0 when the lookup does not know (Go's resolver never says).
type LookupFunc func(ctx context.Context, host string) (addrs []netip.Addr, ttl time.Duration, err error)

// SystemLookup is the default LookupFunc: net.DefaultResolver, both
// families, TTL unknown. A name under "invalid" is not asked (Invalid).
func SystemLookup(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	if err := Invalid(host); err != nil {
		return nil, 0, err
	}
	a, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	return a, 0, err
}

// Invalid answers for a name under the special-use domain "invalid"
// without asking DNS, as RFC 6761 §6.4 asks of resolvers: a *net.DNSError
// that IsNotFound ("no such host"), what DNS would say, with no query sent.
// It is nil for any other host. Every way a crawl's requests resolve names
// calls it (SystemLookup, and the dialer of a crawl's pool).
func Invalid(host string) error {
	h := strings.TrimSuffix(host, ".")
	if len(h) < len("invalid") || !strings.EqualFold(h[len(h)-len("invalid"):], "invalid") ||
		(len(h) > len("invalid") && h[len(h)-len("invalid")-1] != '.') {
		return nil
	}
	return &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// ResolverOptions configure a Resolver; nil or zero fields take the
// defaults named.
type ResolverOptions struct {
	// Pins answer for their hosts and ports without DNS (ParseResolve).
	Pins Pins
	// MaxEntries bounds the cache (default 10000 names); past it the
	// least recently used name is dropped.
	MaxEntries int
	// TTL is how long an answer lives when the lookup gives no TTL, which
	// is always the case with SystemLookup (default 5 minutes).
	TTL time.Duration
	// MinTTL and MaxTTL clamp every answer's lifetime, the lookup's TTL or
	// TTL (defaults 30 seconds and 1 hour).
	MinTTL, MaxTTL time.Duration
	// NegativeTTL is how long a failed lookup is remembered (default 5
	// seconds), so that a dead name is not asked for on every request.
	NegativeTTL time.Duration
	// Timeout bounds each lookup (default 5 seconds).
	Timeout time.Duration
	// Lookup asks DNS (default SystemLookup).
	Lookup LookupFunc
	// Now is the cache's clock (default time.Now).
	Now func() time.Time
}

// Resolver is a bounded DNS cache that picks one address per name, the
// address a request to that name dials (AddrTransport). It is safe for
// concurrent use.
//
// Lifetime of an answer: Go's resolver does not return record TTLs, so an
// answer lives ResolverOptions.TTL, or the TTL the LookupFunc reports when
// it knows one, clamped to [MinTTL, MaxTTL]; a failed lookup is remembered
// for NegativeTTL. Concurrent lookups of one name share one query
// (singleflight); a query runs detached from its callers, bounded by
// Timeout, so one caller giving up does not fail the others.
//
// Which address: the lowest IPv4 address of the answer, or the lowest IPv6
// one when there is no IPv4 (chooseAddr). A request dials exactly that one
// address, with no fallback to others, and every worker of a fleet on the
// same answer chooses the same address, so a host's requests meet at one
// address permit and stay on their pooled connections until the answer
// changes.
type Resolver struct {
	opts    ResolverOptions
	group   singleflight.Group
	lookups atomic.Int64

	mu      sync.Mutex
	entries map[string]*list.Element // of *dnsEntry, by hostKey
	lru     *list.List               // front: most recently used
}

type dnsEntry struct {
	host    string
	addr    netip.Addr
	err     error
	expires time.Time
}

// NewResolver returns a Resolver with opts (nil for the defaults), or an
// error when a value is negative or MinTTL is above MaxTTL.
func NewResolver(opts *ResolverOptions) (*Resolver, error) {
	var o ResolverOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxEntries < 0 || o.TTL < 0 || o.MinTTL < 0 || o.MaxTTL < 0 || o.NegativeTTL < 0 || o.Timeout < 0 {
		return nil, errors.New("fetch: resolver options must not be negative")
	}
	o.MaxEntries = or(o.MaxEntries, 10000)
	o.TTL = or(o.TTL, 5*time.Minute)
	o.MinTTL = or(o.MinTTL, 30*time.Second)
	o.MaxTTL = or(o.MaxTTL, time.Hour)
	o.NegativeTTL = or(o.NegativeTTL, 5*time.Second)
	o.Timeout = or(o.Timeout, 5*time.Second)
	if o.MinTTL > o.MaxTTL {
		return nil, fmt.Errorf("fetch: resolver MinTTL %s is above MaxTTL %s", o.MinTTL, o.MaxTTL)
	}
	if o.Lookup == nil {
		o.Lookup = SystemLookup
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Resolver{opts: o, entries: make(map[string]*list.Element), lru: list.New()}, nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Resolve returns the address a request to host and port dials: host
// itself when it is an IP literal, a pinned address (Pins) without DNS,
// or the cached or looked-up answer's chosen address. It blocks until the
// answer is known or ctx is done; on failure it returns an error wrapping
// ctx.Err(), ErrNoAddress or the lookup's error.
func (r *Resolver) Resolve(ctx context.Context, host, port string) (netip.Addr, error) {
	h, err := hostKey(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("fetch: resolve %s: %w", host, err)
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a, nil
	}
	if p, err := portKey(port); err == nil {
		if pinned, ok := r.opts.Pins.lookup(h, p); ok {
			return chooseAddr(pinned), nil
		}
	}
	if e, ok := r.cached(h); ok {
		return e.addr, e.err
	}
	ch := r.group.DoChan(h, func() (any, error) {
		e := r.lookup(h)
		r.store(e)
		return e, nil
	})
	select {
	case res := <-ch:
		e := res.Val.(*dnsEntry)
		return e.addr, e.err
	case <-ctx.Done():
		return netip.Addr{}, fmt.Errorf("fetch: resolve %s: %w", host, ctx.Err())
	}
}

// Lookups is how many DNS queries the Resolver has made.
func (r *Resolver) Lookups() int64 { return r.lookups.Load() }

// Len is how many names the cache holds (live or expired, at most
// MaxEntries).
func (r *Resolver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

func (r *Resolver) cached(h string) (*dnsEntry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.entries[h]
	if !ok {
		return nil, false
	}
	e := el.Value.(*dnsEntry)
	if !r.opts.Now().Before(e.expires) {
		return nil, false // expired: the lookup replaces it
	}
	r.lru.MoveToFront(el)
	return e, true
}

// lookup asks DNS for h, detached from any caller, bounded by Timeout.
func (r *Resolver) lookup(h string) *dnsEntry {
	r.lookups.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	addrs, ttl, err := r.opts.Lookup(ctx, h)
	now := r.opts.Now()
	if err == nil && len(addrs) == 0 {
		err = ErrNoAddress
	}
	if err != nil {
		return &dnsEntry{host: h, err: fmt.Errorf("fetch: resolve %s: %w", h, err), expires: now.Add(r.opts.NegativeTTL)}
	}
	if ttl <= 0 {
		ttl = r.opts.TTL
	}
	ttl = min(max(ttl, r.opts.MinTTL), r.opts.MaxTTL)
	return &dnsEntry{host: h, addr: chooseAddr(addrs), expires: now.Add(ttl)}
}

func (r *Resolver) store(e *dnsEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.entries[e.host]; ok {
		el.Value = e
		r.lru.MoveToFront(el)
		return
	}
	r.entries[e.host] = r.lru.PushFront(e)
	for len(r.entries) > r.opts.MaxEntries {
		old := r.lru.Back()
		r.lru.Remove(old)
		delete(r.entries, old.Value.(*dnsEntry).host)
	}
}

// chooseAddr picks the address to dial from a non-empty answer: the lowest
// IPv4 address, else the lowest IPv6 one. IPv4 first because a request
// dials one address with no fallback, and every crawler host has IPv4
// while not all have IPv6 routes; the lowest rather than the first because
// DNS servers rotate their answers, and a choice that moved with the
// rotation would spread one host over its addresses' permits and open a
// new connection each time.
func chooseAddr(addrs []netip.Addr) netip.Addr {
	best := netip.Addr{}
	for _, a := range addrs {
		a = a.Unmap()
		if !best.IsValid() || better(a, best) {
			best = a
		}
	}
	return best
}

func better(a, b netip.Addr) bool {
	if a.Is4() != b.Is4() {
		return a.Is4()
	}
	return a.Compare(b) < 0
}
