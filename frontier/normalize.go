package frontier

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/polite-crawler/polite/robots"
)

// ErrScheme rejects URLs that are not http or https (javascript:, mailto:,
// file:, ...).
var ErrScheme = errors.New("frontier: not an http(s) URL")

// Normalize puts a URL in the form the crawl de-duplicates on and returns its
// site (robots.Site): scheme lower-cased, the host in the site's canonical
// form (lower-case, IDNA ASCII, no trailing dot, canonical IP literal, the
// port in plain decimal and dropped when default: every spelling of a
// server is one URL), the fragment removed, an empty path made "/", an empty query
// removed, and the path in robots.CanonicalPath form (unreserved escapes
// decoded, other escapes upper-case, then dot segments resolved: "/%7Ea" is
// "/~a", "/%2E/private/x" is "/private/x", "%2F" stays). The query is kept
// as given. Only absolute http(s) URLs with a host pass.
func Normalize(raw string) (norm, site string, err error) {
	u, err := normalize(raw)
	if err != nil {
		return "", "", err
	}
	return u.String(), u.Host, nil
}

// normalize is Normalize as the frontier admits a URL: the normalised URL
// and the site it is scheduled under (Options.SiteKey).
func (f *Frontier) normalize(raw string) (norm, site string, err error) {
	u, err := normalize(raw)
	if err != nil {
		return "", "", err
	}
	if f.o.SiteKey == nil {
		return u.String(), u.Host, nil
	}
	return u.String(), f.o.SiteKey(u), nil
}

// normalize is Normalize's URL; its Host is its site.
func normalize(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("frontier: %q: %w", raw, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return nil, fmt.Errorf("%w: %q", ErrScheme, raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("frontier: %q: URLs with credentials are not crawled", raw)
	}
	if u.Host = robots.Site(u); u.Hostname() == "" { // "http://." has no host
		return nil, fmt.Errorf("%w: %q", ErrScheme, raw)
	}
	u.Fragment, u.RawFragment = "", ""
	esc := robots.CanonicalPath(u.EscapedPath()) // EscapedPath escapes '?', so this is the path alone
	if esc == "" {
		esc = "/"
	}
	if u.Path, err = url.PathUnescape(esc); err != nil {
		return nil, fmt.Errorf("frontier: %q: %w", raw, err)
	}
	u.RawPath = esc
	u.ForceQuery = false
	return u, nil
}
