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
// site (see robots.Site): scheme and host lower-cased, the default port
// dropped, the fragment removed, an empty path made "/", an empty query
// removed, and the path in robots.CanonicalPath form (unreserved escapes
// decoded, other escapes upper-case, then dot segments resolved: "/%7Ea" is
// "/~a", "/%2E/private/x" is "/private/x", "%2F" stays). The query is kept
// as given. Only absolute http(s) URLs with a host pass.
func Normalize(raw string) (norm, site string, err error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", "", fmt.Errorf("frontier: %q: %w", raw, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return "", "", fmt.Errorf("%w: %q", ErrScheme, raw)
	}
	if u.User != nil {
		return "", "", fmt.Errorf("frontier: %q: URLs with credentials are not crawled", raw)
	}
	site = robots.Site(u)
	u.Host = site
	u.Fragment, u.RawFragment = "", ""
	esc := robots.CanonicalPath(u.EscapedPath()) // EscapedPath escapes '?', so this is the path alone
	if esc == "" {
		esc = "/"
	}
	if u.Path, err = url.PathUnescape(esc); err != nil {
		return "", "", fmt.Errorf("frontier: %q: %w", raw, err)
	}
	u.RawPath = esc
	u.ForceQuery = false
	return u.String(), site, nil
}
