package sitemap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// Fetcher finds and reads the sitemaps of sites. Its fields are read, never
// written, so one Fetcher may serve many Discover calls at once.
type Fetcher struct {
	// Client makes the requests (default http.DefaultClient). In a crawl
	// its Transport is the crawl's fetch.Transport, so that every sitemap
	// request (redirect hops included) checks robots.txt and takes the
	// site's permit like any other request; the body is always closed,
	// which releases the permit.
	Client *http.Client
	// Options bound the cost (nil: the defaults).
	Options *Options
	// UserAgent, when set, is sent with every request.
	UserAgent string
	// Accept, when set, decides which page URLs of a site's sitemaps are
	// handed on, in place of the default rule: on the site's own host.
	Accept func(site, u *url.URL) bool
	// Log hears of each sitemap read, at Debug (nil: nothing).
	Log *slog.Logger
}

// Stats is what one Discover did.
type Stats struct {
	Fetched    int // sitemap documents answered with a 2xx and read
	Failed     int // requests that failed, or answered other than 2xx, 404 and 410
	Missing    int // requests answered 404 or 410: no such sitemap, no error
	Indexes    int // of Fetched, sitemap indexes
	NotSitemap int // of Fetched, neither a urlset, an index nor text (an HTML page, say)
	Malformed  int // of Fetched, abandoned part way (ErrMalformed); their entries before the fault count
	Truncated  int // of Fetched, cut at Options.MaxBytes or Options.MaxURLsPerFile
	Gzip       int // of Fetched, gzipped
	URLs       int // URLs handed to found
	// Dropped counts the entries not taken: empty, too long, not an
	// absolute http(s) URL, or (page URLs) off the site.
	Dropped int
	// Skipped counts the sitemaps named but not fetched: seen already
	// (an index listing itself or looping), deeper than
	// Options.MaxIndexDepth, past Options.MaxSitemaps, or on a host that is
	// neither the site's nor the listing index's.
	Skipped int
	// Limited is set when Options.MaxURLs or Options.MaxSitemaps ended the
	// discovery before every sitemap named was read.
	Limited bool
}

// ErrSite is returned (wrapped) by Discover for a site that is not an
// absolute http(s) URL.
var ErrSite = errors.New("sitemap: site is not an absolute http(s) URL")

// errEnough stops a document once Options.MaxURLs URLs are handed on.
var errEnough = errors.New("sitemap: enough URLs")

// Discover reads the sitemaps of site (any URL of it: its scheme and host
// count) and hands the page URLs they list to found, in batches of at most
// Options.BatchSize, in the order read; found may keep the slice. The
// sitemaps read are fromRobots (the site's robots.txt Sitemap: lines, on
// any host: robots.txt vouches for them) or, when that names none,
// /sitemap.xml of the site; then, breadth first, the sitemaps their
// indexes list, each once. Page URLs are taken only on the site's host
// (name and port; http and https alike), unless Fetcher.Accept says
// otherwise, and are absolute (relative <loc>s are resolved against the
// sitemap's address) and not longer than Options.MaxLocLength.
//
// A sitemap that cannot be fetched, answers other than 2xx, or is not a
// sitemap is no error: it is counted in Stats and the others are read.
// Discover returns an error only when ctx ends (ctx.Err(), wrapped) or
// found fails (its error, wrapped); the URLs handed on before stay handed
// on. Each request is bounded by Options.Timeout, body included. It
// fails at once with ErrSite when site is not an absolute http(s) URL.
func (f *Fetcher) Discover(ctx context.Context, site *url.URL, fromRobots []string, found func(urls []string) error) (Stats, error) {
	if site == nil || !isHTTP(site) {
		return Stats{}, fmt.Errorf("%w: %v", ErrSite, site)
	}
	d := &discovery{f: f, o: f.Options.get(), site: site, found: found, seen: make(map[string]bool)}
	var roots []string
	for _, s := range fromRobots {
		if u, err := url.Parse(s); err == nil && isHTTP(u) {
			roots = append(roots, s)
		}
	}
	if len(roots) == 0 {
		roots = []string{(&url.URL{Scheme: site.Scheme, Host: site.Host, Path: "/sitemap.xml"}).String()}
	}
	for _, s := range roots {
		u, _ := url.Parse(s)
		d.queue(u, 0)
	}
	for len(d.todo) > 0 && !d.enough && ctx.Err() == nil {
		next := d.todo[0]
		d.todo = d.todo[1:]
		if err := d.read(ctx, next); err != nil {
			return d.st, err
		}
	}
	if err := d.flush(); err != nil {
		return d.st, err
	}
	if ctx.Err() != nil {
		return d.st, fmt.Errorf("sitemap: %w", ctx.Err())
	}
	return d.st, nil
}

type pending struct {
	u     *url.URL
	depth int
}

// discovery is the state of one Discover: bounded by Options.MaxSitemaps
// (todo and seen) and Options.BatchSize (batch).
type discovery struct {
	f     *Fetcher
	o     Options
	site  *url.URL
	found func([]string) error
	st    Stats
	todo  []pending
	seen  map[string]bool // sitemaps queued, at most MaxSitemaps
	batch []string
	// enough is set once Options.MaxURLs URLs are handed on.
	enough bool
}

// queue adds a sitemap to read, unless seen already or past MaxSitemaps.
func (d *discovery) queue(u *url.URL, depth int) {
	u.Fragment, u.RawFragment = "", ""
	key := u.String()
	switch {
	case d.seen[key]:
		d.st.Skipped++
	case len(d.seen) >= d.o.MaxSitemaps:
		d.st.Skipped++
		d.st.Limited = true
	default:
		d.seen[key] = true
		d.todo = append(d.todo, pending{u, depth})
	}
}

// read fetches and parses one sitemap. It fails only when ctx ends or
// found fails.
func (d *discovery) read(ctx context.Context, p pending) error {
	rctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	req, err := d.request(rctx, p.u)
	if err != nil {
		d.st.Failed++
		return nil
	}
	client := d.f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		d.st.Failed++
		d.log("sitemap: fetch failed", "url", p.u.String(), "err", err)
		return d.ctxErr(ctx)
	}
	defer resp.Body.Close()
	if !d.ok(resp, p.u) {
		return nil
	}
	base := resp.Request.URL // relative <loc>s resolve against where the document was
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	text := mt != "text/html" && mt != "application/xhtml+xml"
	doc, err := Parse(resp.Body, &d.o, text, func(k Kind, e Entry) error {
		return d.entry(k, e, base, p)
	})
	d.count(doc)
	d.log("sitemap: read", "url", p.u.String(), "kind", doc.Kind, "entries", doc.Entries, "truncated", doc.Truncated, "err", err)
	return d.parsed(ctx, err)
}

// request is the GET of the sitemap at u, with the Fetcher's User-Agent.
func (d *discovery) request(ctx context.Context, u *url.URL) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if d.f.UserAgent != "" {
		req.Header.Set("User-Agent", d.f.UserAgent)
	}
	req.Header.Set("Accept", "application/xml, text/xml, text/plain;q=0.9, */*;q=0.5")
	return req, nil
}

// ok is whether resp, the answer for the sitemap at u, is a 2xx. When it is
// not, ok counts it (404 and 410 as Missing, others as Failed) and drains
// its body.
func (d *discovery) ok(resp *http.Response, u *url.URL) bool {
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return true
	}
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		d.st.Missing++
	} else {
		d.st.Failed++
	}
	d.log("sitemap: not fetched", "url", u.String(), "status", resp.StatusCode)
	drainError(resp.Body)
	return false
}

// count adds a parsed document to the Stats.
func (d *discovery) count(doc Doc) {
	d.st.Fetched++
	d.st.Dropped += doc.TooLong + doc.Empty
	if doc.Truncated {
		d.st.Truncated++
	}
	if doc.Gzip {
		d.st.Gzip++
	}
	switch doc.Kind {
	case Index:
		d.st.Indexes++
	case Unknown:
		d.st.NotSitemap++
	}
}

// parsed counts how a document's parse ended (err, from Parse) and returns
// what ends the discovery: ctx's error, or the found callback's
// (foundError). A malformed document, or a body that broke off, counts and
// the discovery goes on.
func (d *discovery) parsed(ctx context.Context, err error) error {
	switch {
	case err == nil:
	case errors.Is(err, errEnough):
		d.st.Limited, d.enough = true, true
	case errors.Is(err, ErrMalformed):
		d.st.Malformed++
	default:
		if cerr := d.ctxErr(ctx); cerr != nil {
			return cerr
		}
		var fe foundError
		if errors.As(err, &fe) {
			return err
		}
		d.st.Failed++ // the body broke off (timeout, reset): what came before counts
		d.st.Fetched--
	}
	return nil
}

// foundError is found's error, wrapped.
type foundError struct{ err error }

func (e foundError) Error() string { return "sitemap: found: " + e.err.Error() }
func (e foundError) Unwrap() error { return e.err }

// entry takes one entry of a document of kind k read from base, listed by p.
func (d *discovery) entry(k Kind, e Entry, base *url.URL, p pending) error {
	u, err := base.Parse(e.Loc)
	if err != nil || !isHTTP(u) || len(u.String()) > d.o.MaxLocLength {
		d.st.Dropped++
		return nil
	}
	if k == Index {
		switch {
		case !sameHost(u, d.site) && !sameHost(u, p.u) && !sameHost(u, base):
			d.st.Skipped++
		case p.depth+1 > d.o.MaxIndexDepth:
			d.st.Skipped++
		default:
			d.queue(u, p.depth+1)
		}
		return nil
	}
	if !d.accept(u) {
		d.st.Dropped++
		return nil
	}
	d.batch = append(d.batch, u.String())
	d.st.URLs++
	if len(d.batch) >= d.o.BatchSize {
		if err := d.flush(); err != nil {
			return err
		}
	}
	if d.st.URLs >= d.o.MaxURLs {
		return errEnough
	}
	return nil
}

func (d *discovery) accept(u *url.URL) bool {
	if d.f.Accept != nil {
		return d.f.Accept(d.site, u)
	}
	return sameHost(u, d.site)
}

func (d *discovery) ctxErr(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("sitemap: %w", ctx.Err())
	}
	return nil
}

func (d *discovery) log(msg string, args ...any) {
	if d.f.Log != nil {
		d.f.Log.Debug(msg, args...)
	}
}

// flush hands the batch on.
func (d *discovery) flush() error {
	if len(d.batch) == 0 {
		return nil
	}
	b := d.batch
	d.batch = nil
	if err := d.found(b); err != nil {
		return foundError{err}
	}
	return nil
}

func isHTTP(u *url.URL) bool {
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Hostname() != ""
}

// sameHost reports whether a and b are on the same host: the same name
// (case and a trailing dot aside) and the same port, a scheme's default
// port counting as none (so http://h/ and https://h/ are the same host).
func sameHost(a, b *url.URL) bool {
	return strings.EqualFold(strings.TrimSuffix(a.Hostname(), "."), strings.TrimSuffix(b.Hostname(), ".")) && port(a) == port(b)
}

func port(u *url.URL) string {
	p := u.Port()
	if (p == "80" && u.Scheme == "http") || (p == "443" && u.Scheme == "https") {
		return ""
	}
	return p
}

// maxErrorBody bounds what is read of an error answer's body before it is
// closed: a short error page read to its end is kept whole by a recording
// transport (WARC), and its connection can be used again.
const maxErrorBody = 16 << 10

// drainError reads what is left of an error answer's body, up to
// maxErrorBody.
func drainError(body io.Reader) { io.Copy(io.Discard, io.LimitReader(body, maxErrorBody)) }
