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
// dropped, the fragment removed, dot segments resolved, an empty path made
// "/", an empty query removed. Only absolute http(s) URLs with a host pass.
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
	if u.Path == "" {
		u.Path = "/"
	}
	u = u.ResolveReference(&url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}) // resolve ./ and ../
	u.ForceQuery = false
	return u.String(), site, nil
}
