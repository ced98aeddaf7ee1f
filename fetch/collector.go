package fetch

import (
	"context"
	"net/http"
	"time"

	"github.com/gocolly/colly/v2"
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
		if len(via) >= 10 {
			return http.ErrUseLastResponse // a redirect loop: stop here
		}
		return nil
	})
	return c
}
