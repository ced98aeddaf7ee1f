package fetch

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// ErrResolveSpec is wrapped by every error ParseResolve returns.
var ErrResolveSpec = errors.New("fetch: bad --resolve")

// Pins are addresses pinned to a host and port, as curl's --resolve has
// them: a request to a pinned host and port dials a pinned address and
// never asks DNS. The key is "host:port" (hostKey form, port in plain
// decimal); host "*" pins every host on that port. A pin of the exact
// host wins over "*". The zero value (nil) pins nothing.
type Pins map[string][]netip.Addr

// ParseResolve reads curl-style --resolve entries, HOST:PORT:ADDR[,ADDR...]:
// HOST is a name (matched case-insensitively, trailing dot ignored,
// internationalised names in their ASCII form) or "*" for any host; PORT
// is 1-65535; each ADDR is an IPv4 or IPv6 address, an IPv6 one optionally
// in brackets. An IP-literal HOST is refused (it dials itself), and so are
// curl's "+HOST" and "-HOST" forms and a HOST:PORT given twice. Every error
// wraps ErrResolveSpec and quotes the entry.
func ParseResolve(specs []string) (Pins, error) {
	pins := make(Pins, len(specs))
	for _, spec := range specs {
		key, addrs, err := parsePin(spec)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %s", ErrResolveSpec, spec, err)
		}
		if _, dup := pins[key]; dup {
			return nil, fmt.Errorf("%w %q: %s is pinned twice", ErrResolveSpec, spec, key)
		}
		pins[key] = addrs
	}
	return pins, nil
}

func parsePin(spec string) (string, []netip.Addr, error) {
	if strings.HasPrefix(spec, "+") || strings.HasPrefix(spec, "-") {
		return "", nil, errors.New("the +HOST and -HOST forms are not supported (want HOST:PORT:ADDR)")
	}
	host, rest, ok := strings.Cut(spec, ":")
	port, list, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return "", nil, errors.New("want HOST:PORT:ADDR[,ADDR...]")
	}
	if strings.HasPrefix(host, "[") {
		return "", nil, errors.New("HOST is an IP literal: it needs no --resolve")
	}
	if host != "*" {
		h, err := hostKey(host)
		if err != nil {
			return "", nil, err
		}
		if _, err := netip.ParseAddr(h); err == nil {
			return "", nil, errors.New("HOST is an IP literal: it needs no --resolve")
		}
		host = h
	}
	p, err := portKey(port)
	if err != nil {
		return "", nil, err
	}
	var addrs []netip.Addr
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			s = s[1 : len(s)-1]
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return "", nil, fmt.Errorf("ADDR %q is not an IP address", s)
		}
		addrs = append(addrs, a.Unmap())
	}
	return net.JoinHostPort(host, p), addrs, nil
}

// lookup returns the addresses pinned to host (in hostKey form) and port.
func (p Pins) lookup(host, port string) ([]netip.Addr, bool) {
	if len(p) == 0 {
		return nil, false
	}
	if a, ok := p[net.JoinHostPort(host, port)]; ok {
		return a, true
	}
	a, ok := p[net.JoinHostPort("*", port)]
	return a, ok
}

// hostKey is a host name as DNS and the pins know it: lowercase, ASCII
// (IDNA), no trailing dot. An IP literal comes back in canonical form.
func hostKey(host string) (string, error) {
	h := strings.TrimRight(host, ".") // as robots.Site: every trailing dot
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		return a.Unmap().String(), nil
	}
	if h == "" {
		return "", errors.New("empty host")
	}
	if isASCII(h) { // as net/http: IDNA only for names that need it
		for _, label := range strings.Split(h, ".") {
			if label == "" || strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
				return "", fmt.Errorf("host %q is not a host name", host)
			}
		}
		return strings.ToLower(h), nil
	}
	a, err := idna.Lookup.ToASCII(h)
	if err != nil {
		return "", fmt.Errorf("host %q: %w", host, err)
	}
	return a, nil
}

// portKey is a port in plain decimal, 1-65535.
func portKey(port string) (string, error) {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strings.HasPrefix(port, "+") {
		return "", fmt.Errorf("PORT %q is not 1-65535", port)
	}
	return strconv.Itoa(n), nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
