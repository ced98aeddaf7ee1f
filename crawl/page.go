package crawl

import (
	"errors"
	"strconv"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/polite-crawler/polite/frontier"
)

// DefaultMaxURLLength is Options.MaxURLLength's default, in bytes: what
// common crawlers and servers accept (longer request lines get 414).
const DefaultMaxURLLength = 8192

// ErrURLTooLong refuses a seed longer than Options.MaxURLLength.
var ErrURLTooLong = errors.New("crawl: URL too long")

// maxLinks bounds the links kept of one page: a page with a million links
// is not a million URLs.
const maxLinks = 10000

// page is what a worker's collector saw of the page it fetches.
type page struct {
	status, bytes int
	links         []string      // absolute, at most maxLinks
	tooLong       int           // links dropped for being longer than the limit
	ctype         string        // the Content-Type header
	location      string        // a redirect's Location, absolute
	truncated     bool          // the body was cut at Options.MaxBodySize
	start         time.Time     // the request's
	took          time.Duration // from start to the body read (not parsed)
}

func (p *page) reset() { *p = page{links: p.links[:0]} }

// link keeps an absolute link found on the page, unless it is longer than
// limit bytes (counted, then dropped) or the page has given maxLinks.
func (p *page) link(u string, limit int) {
	switch {
	case u == "":
	case len(u) > limit:
		p.tooLong++
	case len(p.links) < maxLinks:
		p.links = append(p.links, u)
	}
}

// countTooLong counts the links of it's page dropped for their length. The
// first page with such links in the process is logged at Info, the others
// at Debug, one record a page.
func (c *Crawler) countTooLong(it frontier.Item, n int) {
	if n == 0 {
		return
	}
	c.tooLong.Add(int64(n))
	msg, log := "links longer than the maximum URL length dropped (logged once at info; counted in progress)", c.o.Log.Debug
	if c.tooLongSeen.CompareAndSwap(false, true) {
		log = c.o.Log.Info
	}
	log(msg, "page", it.URL, "links", n, "max_url_length", c.o.MaxURLLength)
}

// result is one turn of a URL, as written to Options.Out (one JSON line).
type result struct {
	URL         string    `json:"url"`
	Outcome     string    `json:"outcome"`
	Cause       string    `json:"cause,omitempty"`
	Status      int       `json:"status"`
	Bytes       int       `json:"bytes"`
	Truncated   bool      `json:"truncated"`
	ContentType string    `json:"content_type,omitempty"`
	Location    string    `json:"location,omitempty"`
	Referrer    string    `json:"referrer,omitempty"`
	Depth       int       `json:"depth"`
	Attempt     int       `json:"attempt"`
	Final       bool      `json:"final"`
	DurationMS  float64   `json:"duration_ms"`
	FetchedAt   time.Time `json:"fetched_at"`
	Crawl       string    `json:"crawl"`
	Worker      string    `json:"worker"`
	Error       string    `json:"error,omitempty"`
}

// record counts a turn of it by its verdict, and writes it to Options.Out.
// attempt is 1 for a URL's first turn, and counts the failed ones before.
func (c *Crawler) record(it frontier.Item, pg *page, v verdict, err error) {
	c.counts[v.o].Add(1)
	c.bytes.Add(int64(pg.bytes))
	if it.Depth == 0 && v.o.Final() {
		c.seeds.finished(it.URL, v)
	}
	if c.enc == nil {
		return
	}
	r := result{URL: it.URL, Outcome: v.o.String(), Cause: v.cause, Status: pg.status, Bytes: pg.bytes, Truncated: pg.truncated,
		ContentType: pg.ctype, Location: pg.location, Referrer: it.From, Depth: it.Depth, Attempt: it.Attempts + 1,
		Final: v.o.Final(), DurationMS: float64(pg.took.Microseconds()) / 1000, FetchedAt: time.Now().UTC(), Crawl: c.crawl, Worker: c.o.Name}
	if err != nil && v.o != OutcomeFetched && v.o != OutcomeRedirect { // colly's "Moved Permanently" is no error
		r.Error = err.Error()
	}
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if err := c.enc.Encode(r); err != nil {
		c.o.Log.Warn("could not write a result to the output", "url", it.URL, "err", err)
	}
}

// response notes r's status, size and headers, and whether its body was cut
// at max bytes: colly reads at most max, so a body of that length was cut
// unless the response said it was exactly that long.
func (p *page) response(r *colly.Response, max int) {
	p.status, p.bytes, p.took = r.StatusCode, len(r.Body), time.Since(p.start)
	if r.Headers == nil {
		return
	}
	p.ctype = r.Headers.Get("Content-Type")
	p.truncated = len(r.Body) >= max && r.Headers.Get("Content-Length") != strconv.Itoa(len(r.Body))
}
