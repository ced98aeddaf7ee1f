package robots

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Site is the name of a URL's server: the robots.txt cache's key (with the
// scheme, one robots.txt per scheme+host+port, RFC 9309) and, unless a crawl
// keys its sites by domain (SiteKey), the key of its permits, its frontier
// scheduling and its per-site figures. Every spelling of one server gives
// one name, the host in canonical form with the port unless it is the
// scheme's default:
//
//   - A name is lower-cased; one with non-ASCII characters is mapped to its
//     ASCII (A-label) form by IDNA UTS #46 with idna.Lookup, the profile
//     net/http applies to such a name before it goes on the wire:
//     "BÜCHER.example", "bücher.example" and "xn--bcher-kva.example" are
//     "xn--bcher-kva.example", a fullwidth "ｅｘａｍｐｌｅ．ｃｏｍ" is
//     "example.com". An all-ASCII name is only lower-cased, not validated,
//     as net/http sends it ("a_b.example" stays). A name IDNA rejects keeps
//     its form with only its ASCII letters lower-cased ("Ӏ.EXAMPLE" is
//     "Ӏ.example"): a deterministic key for a host no request can reach
//     (net/http fails it), so nothing more is at stake.
//   - Trailing dots are dropped: "localhost." is "localhost" (and the
//     invalid "a.." is "a", so that Site is a fixed point; "." is "").
//   - An IPv6 literal is in canonical form (net/netip): "[0::1]" and
//     "[0:0:0:0:0:0:0:1]" are "[::1]". An IPv4-mapped address is the IPv4
//     address it maps, which is where Go dials it ("[::ffff:127.0.0.1]" is
//     "127.0.0.1"). A zone stays as written, unescaped as url.URL.Host holds
//     it ("[fe80::1%eth0]"): zones name interfaces, and two may reach
//     different servers. Dotted IPv4 forms other than plain decimal
//     ("127.000.000.001", "0x7f.1") are names to Go's dialer, and stay names.
//   - The port is in plain decimal ("0P" and "00P" are "P") and dropped when
//     it is the scheme's default (http 80, https 443).
//
// A URL whose Host is Site(u) has the site Site(u). Site allocates nothing
// when u.Host is already canonical (lower-case ASCII letters, digits, '-'
// and '.', and a plain port if any), the common case.
func Site(u *url.URL) string {
	if canonicalHost(u.Scheme, u.Host) {
		return u.Host
	}
	host, _ := canonHost(u.Hostname())
	port := u.Port()
	if p := strings.TrimLeft(port, "0"); p != port {
		if p == "" {
			p = "0"
		}
		port = p
	}
	if port == "" || port == defaultPort(u.Scheme) {
		return host
	}
	return host + ":" + port
}

// defaultPort is the scheme's port, "" when it has none we know.
func defaultPort(scheme string) string {
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// canonicalHost reports whether hostport (url.URL.Host) is already in
// Site's form: a non-empty name of [a-z0-9.-] not ending in '.', then
// optionally ':' and a port that has no leading zero and is not the
// scheme's default. It is Site's fast path; anything else takes the slow
// one, which gives the same answer for what passes here.
func canonicalHost(scheme, hostport string) bool {
	i := 0
	for ; i < len(hostport); i++ {
		c := hostport[i]
		if c == ':' {
			break
		}
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	if i == 0 || hostport[i-1] == '.' {
		return false
	}
	if i == len(hostport) {
		return true
	}
	port := hostport[i+1:]
	if port == "" || port[0] == '0' || port == defaultPort(scheme) {
		return false
	}
	for j := 0; j < len(port); j++ {
		if port[j] < '0' || port[j] > '9' {
			return false
		}
	}
	return true
}

// canonHost is a hostname (url.URL.Hostname: no brackets, no port) in
// Site's form, IPv6 literals bracketed, and whether it is an IP address.
func canonHost(h string) (host string, ip bool) {
	if strings.Contains(h, ":") { // only an IPv6 literal has one
		a, err := netip.ParseAddr(h)
		if err != nil {
			return "[" + strings.ToLower(h) + "]", false
		}
		if a = a.Unmap(); a.Is4() {
			return a.String(), true
		}
		return "[" + a.String() + "]", true
	}
	ascii := true
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		h = lowerASCII(h)
	} else if a, err := idna.Lookup.ToASCII(h); err == nil {
		h = a // lower-case already: UTS #46 maps case
	} else {
		// Invalid UTF-8 as U+FFFD, which IDNA rejects too: a site name
		// is a Redis key name, which keyname.Check wants valid.
		h = lowerASCII(strings.ToValidUTF8(h, "\uFFFD"))
	}
	h = strings.TrimRight(h, ".")
	_, err := netip.ParseAddr(h)
	return h, err == nil
}

// lowerASCII is s with its ASCII letters lower-cased, and nothing else
// changed: a name IDNA rejects must stay one it rejects, or Site would not
// be a fixed point. Unicode lower-casing can make it one IDNA accepts:
// "Ӏ" (U+04C0) is disallowed, its lower case "ӏ" (U+04CF) is "xn--s5a".
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// A SiteKey maps a URL to the key its permits, its frontier scheduling and
// its per-site figures are kept under. Site (keyed by host) and Domain
// (keyed by registered domain) are the two a crawl can choose; every
// process of a crawl must choose the same. robots.txt stays per
// scheme+host+port whatever the key (Cache keys it by Site).
type SiteKey func(*url.URL) string

// Site key names, as --site-key takes them.
const (
	SiteKeyHost   = "host"
	SiteKeyDomain = "domain"
)

// ErrSiteKey rejects a site key name other than SiteKeyHost and
// SiteKeyDomain.
var ErrSiteKey = errors.New("robots: unknown site key")

// ParseSiteKey returns the SiteKey a name gives: "host" (or "") Site,
// "domain" Domain; otherwise an error wrapping ErrSiteKey.
func ParseSiteKey(name string) (SiteKey, error) {
	switch name {
	case "", SiteKeyHost:
		return Site, nil
	case SiteKeyDomain:
		return Domain, nil
	}
	return nil, fmt.Errorf("%w %q: want %s or %s", ErrSiteKey, name, SiteKeyHost, SiteKeyDomain)
}

// Domain is the registered domain of u's host (eTLD+1 by the Public Suffix
// List, publicsuffix.EffectiveTLDPlusOne), for crawls that cap one
// operator's hosts together: "a.shop.example.com" and "b.shop.example.com"
// are "example.com". The host is first put in Site's canonical form; the
// port is never part of it (a domain is not a server).
//
// The list's private section counts: "alice.github.io" and
// "bob.blogspot.com" are domains of their own, not "github.io" and
// "blogspot.com". Those suffixes are on the list because the names under
// them belong to different people; one cap for all of them would throttle
// thousands of unrelated sites as one. What they share is a server, and a
// server is capped by address, not by name.
//
// An IP literal is its own key (canonical, as in Site: "127.0.0.1",
// "[::1]"), and so is a host that has no registered domain: one that is a
// public suffix itself ("github.io", "co.uk") or a single label
// ("localhost").
func Domain(u *url.URL) string {
	var host string
	ip := false
	if canonicalHost(u.Scheme, u.Host) {
		host = u.Hostname()
		if c := host[len(host)-1]; '0' <= c && c <= '9' { // no TLD is all digits
			_, err := netip.ParseAddr(host)
			ip = err == nil
		}
	} else {
		host, ip = canonHost(u.Hostname())
	}
	if ip || host == "" {
		return host
	}
	if d, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		return d
	}
	return host
}
