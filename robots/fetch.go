package robots

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// maxRedirects is how many redirects a robots.txt fetch follows (RFC 9309:
// at least 5), across hosts too; past it the file counts as unavailable.
const maxRedirects = 5

// errRedirectRefused marks a robots.txt redirect that was not followed: its
// target is neither some site's /robots.txt nor a URL of the site that
// redirected (see followRedirect).
var errRedirectRefused = errors.New("robots: redirect refused")

// followRedirect reports whether a robots.txt fetch may follow a redirect
// from "from" to "to". It may when to is an http(s) URL and either
//
//   - some site's robots.txt: path exactly /robots.txt, no query, no
//     user info, any host (a CDN or a site's new name), or
//   - on the site that redirected (Site(to) == Site(from)), wherever it
//     points there: that site sends us around its own URLs.
//
// Anything else is not requested at all. Otherwise a site A could make every
// crawler of the fleet request any URL of another site B (say
// http://B/private/delete?id=1), which nothing but A's redirect chose and
// B's own robots.txt may forbid, and would read B's page as A's policy.
// /robots.txt is the one URL every robots.txt allows (Policy.Allowed), so a
// hop to it needs no check of its own.
//
// A refused redirect makes the robots.txt unreachable (status 0: disallow
// all, retried after a backoff, the last good copy standing in), not
// "unavailable" (allow all, as RFC 9309 §2.3.1.2 says when the redirects run
// out): the file could not be read, and a redirect must never be a way to
// open a site. What the site meant is unknown, and it can say "allow all"
// plainly with a 404.
func followRedirect(to, from *url.URL) bool {
	if to.Scheme != "http" && to.Scheme != "https" || to.Host == "" {
		return false
	}
	if to.EscapedPath() == "/robots.txt" && to.RawQuery == "" && !to.ForceQuery && to.User == nil {
		return true
	}
	return Site(to) == Site(from) && to.User == nil
}

// ErrNotFetched marks the error of a robots.txt request that failed on the
// crawler's side, not the site's: the transport had no permit for it in
// time, could not ask for one, or lost it mid-request. A transport wraps it
// in such errors; the Cache then returns the error, so the caller tries
// again later, rather than count the site unreachable and disallow it all.
var ErrNotFetched = errors.New("robots: not fetched (the crawler's doing, not the site's)")

// fetch gets robotsURL with the cache's client: up to maxRedirects
// redirects that followRedirect allows, at most MaxBytes+1 of body, within
// twice the fetch timeout (the client's transport bounds the wait for a
// permit and the request by it, each: fetch.RobotsTransport). A network error, a body cut
// short, or a refused redirect (errRedirectRefused) gives status 0
// (unreachable). Redirects past maxRedirects give the last 3xx.
func (c *Cache) fetch(ctx context.Context, robotsURL string) (int, []byte, error) {
	d := c.o.fetchTimeout()
	ctx, cancel := context.WithTimeout(ctx, 2*d)
	defer cancel()
	client := *c.client
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if from := via[len(via)-1].URL; !followRedirect(req.URL, from) {
			return fmt.Errorf("%w: %s to %s", errRedirectRefused, from, req.URL)
		}
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
		// Read a short error page to its end: a recording transport (WARC)
		// then keeps it whole, and the connection can be used again.
		io.Copy(io.Discard, io.LimitReader(resp.Body, 16<<10))
		return resp.StatusCode, nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBytes+1))
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, fmt.Errorf("robots: fetch %s: body: %w", robotsURL, err)
	}
	return resp.StatusCode, body, nil
}
