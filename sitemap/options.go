package sitemap

import "time"

// Defaults of Options. The per-file figures are the sitemaps.org limits.
const (
	DefaultMaxBytes       = 50 << 20 // decompressed bytes of one sitemap
	DefaultMaxURLsPerFile = 50_000   // entries (URLs or child sitemaps) of one sitemap
	DefaultMaxLocLength   = 8192     // bytes of one <loc> or text line; the crawl's MaxURLLength
	DefaultMaxSitemaps    = 100      // sitemap documents fetched per Discover
	DefaultMaxURLs        = 200_000  // URLs handed on per Discover
	DefaultMaxIndexDepth  = 2        // index → index → urlset at most
	DefaultTimeout        = time.Minute
	DefaultBatchSize      = 1000
)

// maxNesting is the deepest element nesting a document may have. A sitemap
// needs 3 (urlset/url/loc) and its extensions 4 or 5 (url/image:image/
// image:loc); deeper documents are abandoned as malformed.
const maxNesting = 16

// tokenSlack is how many bytes beyond MaxLocLength one XML token (a tag with
// its attributes, a run of text, a comment, a DOCTYPE) may take; a longer
// token ends the document as malformed. It bounds the parser's memory: the
// decoder holds one token at a time.
const tokenSlack = 64 << 10

// Options bound what sitemaps may cost. A nil *Options, and every zero
// field, means the default named on the field.
type Options struct {
	// MaxBytes is how many bytes of one sitemap are read, after gzip is
	// undone (default DefaultMaxBytes, 50 MiB). A longer one is cut there:
	// the entries before the cut count, the document is Truncated. The
	// compressed body read is bounded by the same figure (plus a little).
	MaxBytes int64
	// MaxURLsPerFile is how many entries of one document are taken
	// (default DefaultMaxURLsPerFile, 50,000); the rest is not read.
	MaxURLsPerFile int
	// MaxLocLength drops <loc> values and text lines longer than this many
	// bytes (default DefaultMaxLocLength, 8 KiB, as crawl.Options.MaxURLLength).
	MaxLocLength int
	// MaxSitemaps is how many sitemap documents one Discover fetches, the
	// robots.txt ones, /sitemap.xml and the children of indexes together
	// (default DefaultMaxSitemaps, 100). One sitemap index may list 50,000;
	// the first ones listed are taken.
	MaxSitemaps int
	// MaxURLs is how many URLs one Discover hands on (default
	// DefaultMaxURLs, 200,000); it stops fetching when they are reached.
	MaxURLs int
	// MaxIndexDepth is how many index levels are followed (default
	// DefaultMaxIndexDepth, 2). The sitemaps named by robots.txt (or
	// /sitemap.xml) are at depth 0 and the children of an index one deeper
	// than it; an index's children deeper than this are not fetched. With 2,
	// an index may list indexes once (sitemaps.org forbids it; some sites
	// do it anyway); 1 keeps to the letter of sitemaps.org.
	MaxIndexDepth int
	// Timeout bounds one sitemap request, its body included (default
	// DefaultTimeout, 1 minute).
	Timeout time.Duration
	// BatchSize is the most URLs handed on in one call of Discover's found
	// (default DefaultBatchSize, 1000).
	BatchSize int
}

func (o *Options) get() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.MaxBytes <= 0 {
		v.MaxBytes = DefaultMaxBytes
	}
	if v.MaxURLsPerFile <= 0 {
		v.MaxURLsPerFile = DefaultMaxURLsPerFile
	}
	if v.MaxLocLength <= 0 {
		v.MaxLocLength = DefaultMaxLocLength
	}
	if v.MaxSitemaps <= 0 {
		v.MaxSitemaps = DefaultMaxSitemaps
	}
	if v.MaxURLs <= 0 {
		v.MaxURLs = DefaultMaxURLs
	}
	if v.MaxIndexDepth <= 0 {
		v.MaxIndexDepth = DefaultMaxIndexDepth
	}
	if v.Timeout <= 0 {
		v.Timeout = DefaultTimeout
	}
	if v.BatchSize <= 0 {
		v.BatchSize = DefaultBatchSize
	}
	return v
}
