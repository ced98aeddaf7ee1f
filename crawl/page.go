package crawl

import (
	"errors"
	"time"

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
	links         []string // absolute, at most maxLinks
	tooLong       int      // links dropped for being longer than the limit
}

func (p *page) reset() { p.status, p.bytes, p.links, p.tooLong = 0, 0, p.links[:0], 0 }

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

// result is one fetch, as written to Options.Out.
type result struct {
	URL       string    `json:"url"`
	Status    int       `json:"status"`
	Bytes     int       `json:"bytes"`
	FetchedAt time.Time `json:"fetched_at"`
	Worker    string    `json:"worker"`
	Error     string    `json:"error,omitempty"`
}

func (c *Crawler) record(it frontier.Item, status, size int, err error) {
	if c.enc == nil {
		return
	}
	r := result{URL: it.URL, Status: status, Bytes: size, FetchedAt: time.Now().UTC(), Worker: c.o.Name}
	if err != nil {
		r.Error = err.Error()
	}
	c.outMu.Lock()
	defer c.outMu.Unlock()
	c.enc.Encode(r)
}
