package fetch

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/gocolly/colly/v2"
	whatwgurl "github.com/nlnwa/whatwg-url/url"
)

// CollectorOptions configure NewCollector.
type CollectorOptions struct {
	// UserAgent is sent with every request; its product token is what
	// robots.txt groups are matched against (robots.Cache must use the same).
	UserAgent string
	// MaxBodySize cuts bodies (default 10 MiB).
	MaxBodySize int
	// Timeout bounds one request, waiting for its permit included (default
	// 60s).
	Timeout time.Duration
	// Context stops the collector's requests when done (SIGINT).
	Context context.Context
	// FollowRedirects lets colly follow up to this many redirects (each hop
	// still through the transport). 0, the default, hands 3xx responses back:
	// a crawler should queue Location as a link, so that a page reached both
	// directly and through a redirect is fetched once.
	FollowRedirects int
}

// NewCollector returns a colly collector whose every request, redirect hops
// included, goes through t. colly's own robots.txt handling stays off: it
// lets everything through when robots.txt answers 5xx and does not check
// redirect targets; t checks every hop with the robots package. colly's
// visited-URL memory is off too: the frontier de-duplicates for the whole
// fleet.
func NewCollector(t *Transport, o CollectorOptions) *colly.Collector {
	if o.MaxBodySize <= 0 {
		o.MaxBodySize = 10 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	opts := []colly.CollectorOption{
		colly.IgnoreRobotsTxt(),
		colly.AllowURLRevisit(),
		colly.MaxBodySize(o.MaxBodySize),
		colly.UserAgent(o.UserAgent),
	}
	if o.Context != nil {
		opts = append(opts, colly.StdlibContext(o.Context))
	}
	c := colly.NewCollector(opts...)
	c.WithTransport(t)
	c.SetRequestTimeout(o.Timeout)
	c.SetRedirectHandler(func(req *http.Request, via []*http.Request) error {
		if len(via) > o.FollowRedirects {
			return http.ErrUseLastResponse
		}
		return nil
	})
	return c
}

// whatwg parses URLs as colly does before it sends a request.
var whatwg = whatwgurl.NewParser(whatwgurl.WithPercentEncodeSinglePercentSign())

// RequestURL is raw as a collector from NewCollector will send it: colly
// parses a URL by the WHATWG rules (percent-encoding characters of the
// path and query, IDNA-mapping the host) before the request is made. A
// Reservation must be taken for this form, or the request would not find
// it and would wait for a second permit of the site.
func RequestURL(raw string) (*url.URL, error) {
	w, err := whatwg.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("fetch: %q: %w", raw, err)
	}
	u, err := url.Parse(w.Href(false))
	if err != nil {
		return nil, fmt.Errorf("fetch: %q: %w", raw, err)
	}
	return u, nil
}
