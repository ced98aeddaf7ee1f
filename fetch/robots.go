package fetch

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// RobotsTransport is the transport of a robots.Cache's client: each
// robots.txt request takes its site's permit like any other request to the
// site, under limit 1 with no delay, so it waits behind every holder and is
// safe whatever the policy it is about to replace. It is not checked
// against robots.txt. The permit is released when the body is closed. It
// is safe for concurrent use. Its rule names no contributor
// (limiter.Rule.From): limit 1 is below any site's rule, and a robots.txt
// request asks for nothing the site's other hosts should follow.
type RobotsTransport struct {
	// Base makes the requests (default http.DefaultTransport).
	Base http.RoundTripper
	// Limiter is required.
	Limiter  *limiter.Limiter
	Observer Observer
	// SiteKey names the permit, as Transport.SiteKey does: give it the
	// crawl's Transport's, so a robots.txt request counts against the same
	// cap as the pages (nil: robots.Site).
	SiteKey robots.SiteKey
	// Timeout bounds the wait for the permit and then, timed from the
	// permit, the request: waiting behind other requests is the crawler's
	// doing and must not cut the time the site has to answer, or a busy
	// site would be judged unreachable and closed. Give it the Cache's
	// FetchTimeout (default 30s, as the Cache's).
	Timeout time.Duration
	// Log hears, as warnings, what the transport failed to do but went on
	// without, as Transport.Log does (nil: nothing is logged).
	Log *slog.Logger

	once sync.Once
	tr   *Transport
}

// RoundTrip takes the site's permit and makes the request under it.
func (t *RobotsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.once.Do(func() {
		t.tr = &Transport{Base: t.Base, Limiter: t.Limiter, Observer: t.Observer, SiteKey: t.SiteKey, Log: t.Log}
	})
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	actx, cancel := context.WithTimeout(req.Context(), timeout)
	p, err := t.tr.acquire(actx, t.tr.site(req.URL), limiter.Rule{Limit: 1})
	cancel()
	if err != nil {
		return nil, err
	}
	return t.tr.send(req, p, nil, timeout, false)
}
