// Package sitemap reads sitemaps (sitemaps.org): XML <urlset> and
// <sitemapindex> documents, plain-text ones (a URL per line), gzipped or
// not, and finds a site's through its robots.txt Sitemap: lines or
// /sitemap.xml (Fetcher.Discover). Everything is read as a stream under
// limits (Options): a document costs memory for one XML token and one
// batch of URLs, whatever its size, and hostile input (entity bombs, deep
// nesting, endless values, index loops) ends early instead of costing CPU
// or memory.
package sitemap

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrMalformed is returned (wrapped) by Parse for a document it could not
// read to its end: broken XML or gzip, elements nested too deep, a token
// too long. The entries before the fault have been handed on.
var ErrMalformed = errors.New("sitemap: malformed document")

// Kind is what a document turned out to be.
type Kind int

const (
	// Unknown is anything else: an HTML page, another XML root, nothing.
	Unknown Kind = iota
	// URLSet is a <urlset>: its entries are pages.
	URLSet
	// Index is a <sitemapindex>: its entries are sitemaps.
	Index
	// Text is a plain-text sitemap: one URL per line.
	Text
)

func (k Kind) String() string {
	switch k {
	case URLSet:
		return "urlset"
	case Index:
		return "sitemapindex"
	case Text:
		return "text"
	}
	return "unknown"
}

// Entry is one <url> or <sitemap> of a document, or one line of a text one.
type Entry struct {
	// Loc is the <loc> value (or line) with surrounding white space
	// removed, as written: possibly relative, possibly not a URL at all.
	// Parse checks only its length.
	Loc string
	// LastMod is the <lastmod> value as written (W3C Datetime), or "".
	LastMod string
}

// Doc is what Parse found in one document.
type Doc struct {
	Kind Kind
	// Entries counts the entries handed to emit.
	Entries int
	// TooLong counts the entries dropped because their Loc was longer than
	// Options.MaxLocLength; Empty those with no Loc.
	TooLong, Empty int
	// Truncated is set when the document was cut at Options.MaxBytes or
	// Options.MaxURLsPerFile.
	Truncated bool
	// Gzip is set when the document was gzipped (detected by its magic
	// bytes, whatever its name or headers said).
	Gzip bool
}

// Parse reads one sitemap document from r and calls emit with the
// document's Kind (URLSet, Index or Text) and each entry, in document
// order. It undoes gzip (up to two layers, detected by the magic bytes),
// then reads XML when the first byte that is not a byte order mark or white
// space (within the first 512) is '<', and a text sitemap otherwise, when
// text allows one (otherwise the document is Unknown). XML is read with no
// DTD: custom entities are never expanded (an undefined reference such as
// "&lol;" is left as written). An XML document whose root is not <urlset>
// or <sitemapindex> is Unknown and read no further than its root's tag.
//
// Parse stops without error at Options.MaxBytes or Options.MaxURLsPerFile
// (Doc.Truncated). It returns ErrMalformed (wrapped) for broken gzip or
// XML, elements nested deeper than 16, or one XML token (a tag, a run of
// text, a comment, a DOCTYPE) longer than Options.MaxLocLength + 64 KiB;
// an error of r (wrapped); and emit's error as it is. It never reads more
// than Options.MaxBytes + 64 KiB from r, and emits nothing after an error.
func Parse(r io.Reader, o *Options, text bool, emit func(Kind, Entry) error) (Doc, error) {
	p := &parser{o: o.get(), emit: emit}
	body := &recorder{r: r}
	err := p.parse(io.LimitReader(body, p.o.MaxBytes+tokenSlack), text)
	switch {
	case p.emitErr != nil:
		return p.doc, p.emitErr
	case body.err != nil && body.err != io.EOF:
		return p.doc, fmt.Errorf("sitemap: read: %w", body.err)
	}
	return p.doc, err
}

func (p *parser) parse(r io.Reader, text bool) error {
	src := bufio.NewReaderSize(r, 4096)
	for range 2 {
		magic, _ := src.Peek(2)
		if !bytes.Equal(magic, []byte{0x1f, 0x8b}) {
			break
		}
		zr, err := gzip.NewReader(src)
		if err != nil {
			return fmt.Errorf("%w: gzip: %w", ErrMalformed, err)
		}
		p.doc.Gzip = true
		src = bufio.NewReaderSize(zr, 4096)
	}
	head, err := src.Peek(512)
	if len(head) == 0 && err != nil && err != io.EOF {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	head = bytes.TrimLeft(head, " \t\r\n")
	g := &guard{r: src, left: p.o.MaxBytes}
	switch {
	case len(head) == 0:
		return nil
	case head[0] == '<':
		return p.xml(g)
	case text:
		p.doc.Kind = Text
		return p.text(g)
	}
	return nil
}

// recorder keeps the first error of the document's own reader, so that a
// body that broke off is told from a malformed one.
type recorder struct {
	r   io.Reader
	err error
}

func (r *recorder) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

type parser struct {
	o       Options
	emit    func(Kind, Entry) error
	emitErr error // emit's error, returned as it is
	doc     Doc
}

// add hands e on unless it breaks a limit; done reports that the
// document's entry limit has been reached.
func (p *parser) add(e Entry) (done bool, err error) {
	switch {
	case e.Loc == "":
		p.doc.Empty++
		return false, nil
	case len(e.Loc) > p.o.MaxLocLength:
		p.doc.TooLong++
		return false, nil
	}
	if err := p.emit(p.doc.Kind, e); err != nil {
		p.emitErr = err
		return true, err
	}
	p.doc.Entries++
	if p.doc.Entries >= p.o.MaxURLsPerFile {
		p.doc.Truncated = true
		return true, nil
	}
	return false, nil
}

// xml reads an XML document with RawToken: the decoder keeps no stack of
// open elements (this function counts the depth) and translates no name
// spaces, so an element is known by its local name whatever its prefix.
func (p *parser) xml(g *guard) error {
	g.maxTok = p.o.MaxLocLength + tokenSlack
	d := xml.NewDecoder(g)
	// Not strict: a bare '&' in a URL is common, and undefined entities
	// stay as written. Any declared encoding is read as it is: URLs are
	// ASCII.
	d.Strict = false
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	x := &xmlState{}
	for {
		g.token = 0
		tok, err := d.RawToken()
		if err != nil {
			return p.xmlStopped(g, x, err)
		}
		stop := false
		switch t := tok.(type) {
		case xml.StartElement:
			stop, err = p.xmlStart(x, t)
		case xml.CharData:
			p.xmlChars(x, t)
		case xml.EndElement:
			stop, err = p.xmlEnd(x)
		}
		if stop || err != nil {
			return err
		}
	}
}

// xmlState is where the XML parser is in a sitemap.
type xmlState struct {
	depth   int
	entry   string           // the entries' element: url or sitemap
	in      bool             // within an entry
	field   *strings.Builder // the entry's <loc> or <lastmod> being read, or nil
	long    bool             // the <loc> being read is too long
	loc, lm strings.Builder
}

// xmlStopped is what the parse returns when the decoder fails with err: nil
// at the end of a whole document or at the read limit (Doc.Truncated), an
// error wrapping ErrMalformed otherwise.
func (p *parser) xmlStopped(g *guard, x *xmlState, err error) error {
	switch {
	case g.cut:
		p.doc.Truncated = true
		return nil
	case g.tooLong:
		return fmt.Errorf("%w: a token longer than %d bytes", ErrMalformed, p.o.MaxLocLength+tokenSlack)
	case err == io.EOF && x.depth == 0:
		return nil
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}

// xmlStart notes an element's start: the root names the document's Kind
// (stop when it is no sitemap), an entry's element starts an entry, and its
// <loc> or <lastmod> starts a field.
func (p *parser) xmlStart(x *xmlState, t xml.StartElement) (stop bool, err error) {
	x.depth++
	switch {
	case x.depth > maxNesting:
		return true, fmt.Errorf("%w: elements nested deeper than %d", ErrMalformed, maxNesting)
	case x.depth == 1:
		switch t.Name.Local {
		case "urlset":
			p.doc.Kind, x.entry = URLSet, "url"
		case "sitemapindex":
			p.doc.Kind, x.entry = Index, "sitemap"
		default:
			return true, nil // not a sitemap: read no further
		}
	case x.depth == 2 && t.Name.Local == x.entry:
		x.in, x.long = true, false
		x.loc.Reset()
		x.lm.Reset()
	case x.depth == 3 && x.in && t.Name.Local == "loc":
		x.field = &x.loc
	case x.depth == 3 && x.in && t.Name.Local == "lastmod":
		x.field = &x.lm
	}
	return false, nil
}

// xmlChars adds text to the field being read, unless it grows too long.
func (p *parser) xmlChars(x *xmlState, t xml.CharData) {
	if x.field == nil {
		return
	}
	if x.field.Len()+len(t) > p.o.MaxLocLength+64 { // room for white space around it
		x.long = x.long || x.field == &x.loc
		return
	}
	x.field.Write(t)
}

// xmlEnd notes an element's end: a field's ends the field, an entry's
// adds the entry (stop when add says so), and the root's stops the parse.
func (p *parser) xmlEnd(x *xmlState) (stop bool, err error) {
	x.depth--
	switch x.depth {
	case 0:
		return true, nil // the root ended: what follows is not ours
	case 2:
		x.field = nil
	case 1:
		if !x.in {
			break
		}
		x.in = false
		e := Entry{Loc: strings.TrimSpace(x.loc.String()), LastMod: strings.TrimSpace(x.lm.String())}
		if x.long {
			p.doc.TooLong++
			break
		}
		if done, err := p.add(e); done || err != nil {
			return true, err
		}
	}
	return false, nil
}

// text reads a text sitemap: one entry per line. A line longer than
// MaxLocLength is skipped to its end, never held whole.
func (p *parser) text(g *guard) error {
	r := bufio.NewReaderSize(g, p.o.MaxLocLength+2)
	skipping := false
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			skipping = true
			continue
		}
		if err != nil && err != io.EOF {
			line = nil // cut short: not a whole line
		}
		if skipping {
			p.doc.TooLong++
			skipping = false
		} else if s := strings.TrimSpace(string(line)); s != "" {
			if done, aerr := p.add(Entry{Loc: s}); done || aerr != nil {
				return aerr
			}
		}
		switch {
		case err == nil:
		case g.cut:
			p.doc.Truncated = true
			return nil
		case err == io.EOF:
			return nil
		default:
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
	}
}

// guard is the reader the parsers read: it stops at Options.MaxBytes (cut)
// and, for XML, when one token grows past its bound (tooLong). It is an
// io.ByteReader so that encoding/xml reads it directly, byte by byte, and
// every byte the decoder takes is counted against the token being read.
type guard struct {
	r       *bufio.Reader
	left    int64 // bytes still allowed
	token   int   // bytes of the current token; reset by the XML parser
	maxTok  int
	cut     bool
	tooLong bool
}

var errGuard = errors.New("sitemap: limit reached")

func (g *guard) ReadByte() (byte, error) {
	if g.left <= 0 {
		if _, err := g.r.Peek(1); err != nil {
			return 0, err // the real end: not a cut
		}
		g.cut = true
		return 0, errGuard
	}
	if g.maxTok > 0 && g.token >= g.maxTok {
		g.tooLong = true
		return 0, errGuard
	}
	b, err := g.r.ReadByte()
	if err == nil {
		g.left--
		g.token++
	}
	return b, err
}

func (g *guard) Read(b []byte) (int, error) {
	if g.left <= 0 {
		if _, err := g.r.Peek(1); err != nil {
			return 0, err
		}
		g.cut = true
		return 0, errGuard
	}
	if int64(len(b)) > g.left {
		b = b[:g.left]
	}
	n, err := g.r.Read(b)
	g.left -= int64(n)
	return n, err
}
