package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// ErrWrongAddress is returned when a request would have gone to another
// address than the one it holds the permit for (a pooled connection to a
// host's old address) and could not be retried on a new connection.
var ErrWrongAddress = errors.New("fetch: connection to another address than the request's")

// AddrKey is the limiter's site name for the server at a: "ip:" and the
// IPv4 address (an IPv4-mapped IPv6 address counts as IPv4), or "ip:" and
// the /64 prefix of an IPv6 address (zone dropped), e.g. "ip:192.0.2.7",
// "ip:2001:db8:1:2::/64". A /64 because that is what one IPv6 host or
// customer is given (SLAAC and RFC 6177 assign a /64 per link), and a
// server may answer on any number of its addresses: one per virtual host,
// or a fresh one per client. Keying by the address would multiply the cap
// by as many addresses as the server cares to use; the /64 errs towards
// fewer requests when two servers share one. No site name has this form
// (a site's port is decimal), so address and site permits never meet.
func AddrKey(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return "ip:" + p.String()
	}
	return "ip:" + a.String()
}

// AcquireAddr blocks until a permit of the server address a is free (at
// most n at once, fleet-wide, in the limiter's fair line) or ctx is done.
// The caller must already hold the permit of the request's site, and must
// never wait for a site permit while holding an address permit: address
// holders then wait for nothing, so the two kinds cannot deadlock.
func AcquireAddr(ctx context.Context, l *limiter.Limiter, a netip.Addr, n int) (*limiter.Permit, error) {
	p, err := l.AcquireRule(ctx, AddrKey(a), limiter.Rule{Limit: n})
	if err != nil {
		return nil, fmt.Errorf("fetch: permit for %s: %w", AddrKey(a), err)
	}
	return p, nil
}

// dialTarget is the address chosen for a request's host and port.
type dialTarget struct {
	host, port string // hostKey and portKey form
	addr       netip.Addr
}

type dialTargetKey struct{}

// WithDialAddr returns ctx carrying addr as the address to dial for host
// and port (see PinnedDial).
func WithDialAddr(ctx context.Context, host, port string, addr netip.Addr) context.Context {
	h, err := hostKey(host)
	if err != nil {
		h = host
	}
	p, err := portKey(port)
	if err != nil {
		p = port
	}
	return context.WithValue(ctx, dialTargetKey{}, dialTarget{host: h, port: p, addr: addr})
}

// DialAddrFrom returns the address WithDialAddr put in ctx.
func DialAddrFrom(ctx context.Context) (netip.Addr, bool) {
	t, ok := ctx.Value(dialTargetKey{}).(dialTarget)
	return t.addr, ok
}

type addrTimeoutKey struct{}

// WithAddrTimeout returns ctx telling AddrTransport to bound the wait for
// the address permit by d and then, timed from the permit, the request by
// d: waiting behind other requests to the address is the crawler's doing
// and must not cut the time the server has to answer (RobotsTransport's
// Timeout, for the site permit).
func WithAddrTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, addrTimeoutKey{}, d)
}

// DialFunc is the type of http.Transport.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// PinnedDial wraps dial (nil: a net.Dialer with a 30 s timeout) so that a
// connection to the host and port chosen in ctx (WithDialAddr) dials
// exactly the chosen address, never resolving the name again. Any other
// connection (no address in ctx, or another target, such as a proxy)
// dials as dial does: with a proxy, the address cap is on the proxy's
// requests, not the server's.
func PinnedDial(dial DialFunc) DialFunc {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		t, ok := ctx.Value(dialTargetKey{}).(dialTarget)
		if ok {
			if h, p, err := net.SplitHostPort(addr); err == nil {
				hk, herr := hostKey(h)
				pk, perr := portKey(p)
				if herr == nil && perr == nil && hk == t.host && pk == t.port {
					addr = net.JoinHostPort(t.addr.String(), p)
				}
			}
		}
		return dial(ctx, network, addr)
	}
}

// AddrTransport is an http.RoundTripper that sends each request to one
// address it chose for the request's host (Resolver), under that
// address's permit when MaxPerIP > 0. Use it as Transport.Base (and
// RobotsTransport.Base): Transport holds the site permit while it calls
// Base, so the site permit is always taken first and the address permit
// second. It is safe for concurrent use; per-request state travels in the
// request's context.
//
// The address permit is kept alive while the body streams, cancels the
// request if it is lost, and is released when the body is closed (after
// AbortGrace when closed before its end, as Transport does) or at once if
// the request fails.
//
// A pooled connection made for a host's earlier address (its DNS answer
// changed) is closed when a request for the new address is handed it, and
// net/http retries the request on a new connection (it does so for a
// request that has no body or can replay it); otherwise the request fails
// with ErrWrongAddress rather than reach a server it holds no permit for.
// The check is made for HTTP/1 connections: an HTTP/2 connection to the
// earlier address carries other requests too, and is used (counted in
// Mismatches) until net/http retires it.
//
// A request that Base sends through a proxy (its Proxy func, such as
// HTTP_PROXY from the environment) is sent as it is: the proxy connects,
// so neither the pin nor the address cap applies to it.
//
// Without WithAddrTimeout, a request whose context has a deadline waits
// for its address permit at most half the time left, so that one that
// never got its permit fails as the crawler's doing (ErrNotFetched), not
// as a timeout of the server's.
type AddrTransport struct {
	// Base makes the requests; its DialContext must be PinnedDial's
	// (NewAddrTransport sets it).
	Base http.RoundTripper
	// Resolver chooses the address (required).
	Resolver *Resolver
	// Limiter and MaxPerIP: at most MaxPerIP requests at once per
	// address (AddrKey), fleet-wide; 0 takes no address permit.
	Limiter  *limiter.Limiter
	MaxPerIP int

	waiting    atomic.Int64
	mismatches atomic.Int64
}

// NewAddrTransport returns an AddrTransport over a clone of base (nil:
// http.DefaultTransport's) whose DialContext is PinnedDial of base's. base
// must not set DialTLSContext or DialTLS, which would dial unpinned.
func NewAddrTransport(base *http.Transport, res *Resolver, l *limiter.Limiter, maxPerIP int) *AddrTransport {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	b := base.Clone()
	b.DialContext = PinnedDial(b.DialContext)
	return &AddrTransport{Base: b, Resolver: res, Limiter: l, MaxPerIP: maxPerIP}
}

// Waiting is how many requests wait for an address permit now.
func (t *AddrTransport) Waiting() int { return int(t.waiting.Load()) }

// Mismatches is how many connections to another address than the
// request's were refused (see AddrTransport).
func (t *AddrTransport) Mismatches() int64 { return t.mismatches.Load() }

// CloseIdleConnections closes Base's idle connections.
func (t *AddrTransport) CloseIdleConnections() {
	if c, ok := t.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip resolves the request's host, takes the address permit, and
// sends the request to that address. An error in taking the permit (ctx
// done, Redis) or a permit lost mid-request wraps robots.ErrNotFetched:
// the crawler's doing, no verdict on the server.
func (t *AddrTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if t.proxied(req) {
		// The proxy connects: which server it reaches is not ours to
		// know, so neither the pin nor the address cap applies.
		return t.Base.RoundTrip(req)
	}
	timeout, _ := ctx.Value(addrTimeoutKey{}).(time.Duration)
	host, port := req.URL.Hostname(), urlPort(req.URL)
	addr, err := t.Resolver.Resolve(ctx, host, port)
	if err != nil {
		return nil, err
	}
	ctx = WithDialAddr(ctx, host, port, addr)
	trace, refused := t.guard(addr)
	ctx = httptrace.WithClientTrace(ctx, trace)
	if t.MaxPerIP <= 0 {
		return t.sendUncapped(ctx, req, timeout, refused)
	}
	p, err := t.waitAddr(ctx, addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", err, robots.ErrNotFetched)
	}
	return t.sendHolding(ctx, req, p, timeout, refused)
}

// sendUncapped sends req under ctx with no address permit, within timeout
// if it is positive (its body then ends the timeout when done).
func (t *AddrTransport) sendUncapped(ctx context.Context, req *http.Request, timeout time.Duration, refused *atomic.Bool) (*http.Response, error) {
	if timeout <= 0 {
		resp, err := t.Base.RoundTrip(req.WithContext(ctx))
		return resp, wrongAddr(req, err, refused)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	resp, err := t.Base.RoundTrip(req.WithContext(rctx))
	if err != nil {
		cancel()
		return nil, wrongAddr(req, err, refused)
	}
	resp.Body = &permitBody{ReadCloser: resp.Body, done: func(bool) { cancel() }}
	return resp, nil
}

// waitAddr takes addr's permit, waiting at most timeout if it is positive,
// else at most half of what is left of ctx's deadline, so that a request
// that never had its permit ends as ours (ErrNotFetched), not as the
// server's timeout.
func (t *AddrTransport) waitAddr(ctx context.Context, addr netip.Addr, timeout time.Duration) (*limiter.Permit, error) {
	wctx, wcancel := withTimeout(ctx, timeout)
	if dl, ok := ctx.Deadline(); ok && timeout <= 0 {
		wcancel()
		wctx, wcancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
	}
	defer wcancel()
	t.waiting.Add(1)
	defer t.waiting.Add(-1)
	return AcquireAddr(wctx, t.Limiter, addr, t.MaxPerIP)
}

// sendHolding sends req under the address permit p, kept alive until the
// response's body is done (or the request fails), then released. A request
// that fails once p is lost wraps limiter.ErrPermitLost and
// robots.ErrNotFetched. A body closed early first waits AbortGrace, as the
// server sends on until it notices.
func (t *AddrTransport) sendHolding(ctx context.Context, req *http.Request, p *limiter.Permit, timeout time.Duration, refused *atomic.Bool) (*http.Response, error) {
	kctx, stopKeep := context.WithCancel(context.WithoutCancel(ctx))
	p.KeepAlive(kctx) // ends at Release, at loss, or when the body is done
	pctx, pcancel := p.Context(ctx)
	rctx, tcancel := withTimeout(pctx, timeout)
	release := func() {
		tcancel()
		pcancel()
		stopKeep()
		rel, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		p.Release(rel) // lost meanwhile: the request was cancelled already
	}
	resp, err := t.Base.RoundTrip(req.WithContext(rctx))
	if err != nil {
		release()
		if p.Err() != nil {
			return nil, fmt.Errorf("fetch: %s: %w (%w; %v)", req.URL, limiter.ErrPermitLost, robots.ErrNotFetched, err)
		}
		return nil, wrongAddr(req, err, refused)
	}
	empty := resp.ContentLength == 0
	resp.Body = &permitBody{ReadCloser: resp.Body, done: func(early bool) {
		if early && !empty {
			time.Sleep(AbortGrace) // the server sends on until it notices
		}
		release()
	}}
	return resp, nil
}

// proxied reports whether Base sends req through a proxy.
func (t *AddrTransport) proxied(req *http.Request) bool {
	ht, ok := t.Base.(*http.Transport)
	if !ok || ht.Proxy == nil {
		return false
	}
	u, err := ht.Proxy(req)
	return err == nil && u != nil
}

// guard closes an HTTP/1 connection whose far end is not addr before the
// request is written on it (see AddrTransport), and reports whether it
// did. An HTTP/2 connection carries other requests' streams too: it is
// counted (Mismatches) but left open, and the request goes on it.
func (t *AddrTransport) guard(addr netip.Addr) (*httptrace.ClientTrace, *atomic.Bool) {
	want := addr.Unmap().WithZone("")
	refused := new(atomic.Bool)
	return &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		ap, err := netip.ParseAddrPort(info.Conn.RemoteAddr().String())
		if err != nil {
			return // not TCP: nothing to compare
		}
		if ap.Addr().Unmap().WithZone("") == want {
			return
		}
		t.mismatches.Add(1)
		if tc, ok := info.Conn.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
			return
		}
		refused.Store(true)
		info.Conn.Close()
	}}, refused
}

// wrongAddr names ErrWrongAddress in err when the guard refused a
// connection of the request and net/http did not retry it.
func wrongAddr(req *http.Request, err error, refused *atomic.Bool) error {
	if err != nil && refused.Load() {
		return fmt.Errorf("fetch: %s: %w (%w; %v)", req.URL, ErrWrongAddress, robots.ErrNotFetched, err)
	}
	return err
}

// withTimeout is ctx bounded by d, or ctx when d is 0.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// urlPort is u's port, or its scheme's default.
func urlPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
