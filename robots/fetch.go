package robots

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxRedirects is how many redirects a robots.txt fetch follows (RFC 9309:
// at least 5), across hosts too; past it the file counts as unavailable.
const maxRedirects = 5

type fetchKey struct{}

// ErrNotFetched marks the error of a robots.txt request that failed on the
// crawler's side, not the site's: the transport had no permit for it in
// time, could not ask for one, or lost it mid-request. A transport wraps it
// in such errors; the Cache then returns the error, so the caller tries
// again later, rather than count the site unreachable and disallow it all.
var ErrNotFetched = errors.New("robots: not fetched (the crawler's doing, not the site's)")

// IsFetch reports whether ctx belongs to a robots.txt fetch made by a Cache
// (including its redirect hops). A permit-taking transport uses it to skip
// the robots check for the request that fetches robots.txt itself.
func IsFetch(ctx context.Context) bool { return ctx.Value(fetchKey{}) != nil }

// FetchTimeout is, for the ctx of a Cache's robots.txt fetch, the Cache's
// FetchTimeout; 0 for any other ctx. A permit-taking transport bounds its
// wait for the site's permit by it, and then the request by it again,
// timed from the permit: a wait behind other requests is the crawler's
// doing and must not shorten the time the site has to answer, or a busy
// site would be judged unreachable and closed. The fetch as a whole (every
// redirect hop) is bounded by twice FetchTimeout.
func FetchTimeout(ctx context.Context) time.Duration {
	d, _ := ctx.Value(fetchKey{}).(time.Duration)
	return d
}

// Site is the key a URL's site is known by, here and in the limiter: the
// lower-case host, with the port unless it is the scheme's default.
func Site(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" || (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// fetch gets robotsURL with the cache's client: up to maxRedirects
// redirects, at most MaxBytes+1 of body, within twice the fetch timeout
// (see FetchTimeout). A network error, or a body cut short, gives status 0
// (unreachable).
func (c *Cache) fetch(ctx context.Context, robotsURL string) (int, []byte, error) {
	d := c.o.fetchTimeout()
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, fetchKey{}, d), 2*d)
	defer cancel()
	client := *c.client
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > maxRedirects {
			return http.ErrUseLastResponse
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, robotsURL, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("robots: fetch %s: %w", robotsURL, err)
	}
	req.Header.Set("User-Agent", c.o.userAgent())
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("robots: fetch %s: %w", robotsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return resp.StatusCode, nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBytes+1))
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, fmt.Errorf("robots: fetch %s: body: %w", robotsURL, err)
	}
	return resp.StatusCode, body, nil
}
