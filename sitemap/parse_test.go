package sitemap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func gz(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

type parsed struct {
	doc     Doc
	err     error
	kinds   []Kind
	entries []Entry
}

func parse(t testing.TB, r io.Reader, o *Options, text bool) parsed {
	t.Helper()
	var p parsed
	p.doc, p.err = Parse(r, o, text, func(k Kind, e Entry) error {
		p.kinds = append(p.kinds, k)
		p.entries = append(p.entries, e)
		return nil
	})
	if p.doc.Entries != len(p.entries) {
		t.Errorf("Doc.Entries %d, emitted %d", p.doc.Entries, len(p.entries))
	}
	return p
}

func locs(es []Entry) string {
	var s []string
	for _, e := range es {
		s = append(s, e.Loc)
	}
	return strings.Join(s, " ")
}

const urlset = `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url><loc>  http://a.example/1  </loc><lastmod>2024-01-02</lastmod>
    <image:image><image:loc>http://img.example/x.png</image:loc></image:image></url>
  <url><loc>http://a.example/2?x=1&amp;y=2</loc></url>
  <url><loc><![CDATA[http://a.example/3?a=1&b=2]]></loc></url>
  <url><loc></loc></url>
</urlset>`

const index = `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>http://a.example/s1.xml</loc><lastmod>2024-05-06T07:08:09Z</lastmod></sitemap>
<sitemap><loc>/s2.xml.gz</loc></sitemap>
</sitemapindex>`

func TestParse(t *testing.T) {
	long := "http://a.example/" + strings.Repeat("x", DefaultMaxLocLength)
	cases := []struct {
		name    string
		in      string
		text    bool
		kind    Kind
		locs    string
		tooLong int
		gzip    bool
		wantErr bool
	}{
		{name: "urlset", in: urlset, kind: URLSet, locs: "http://a.example/1 http://a.example/2?x=1&y=2 http://a.example/3?a=1&b=2"},
		{name: "index", in: index, kind: Index, locs: "http://a.example/s1.xml /s2.xml.gz"},
		{name: "gzip", in: gz(t, urlset), kind: URLSet, gzip: true, locs: "http://a.example/1 http://a.example/2?x=1&y=2 http://a.example/3?a=1&b=2"},
		{name: "gzip twice", in: gz(t, gz(t, index)), kind: Index, gzip: true, locs: "http://a.example/s1.xml /s2.xml.gz"},
		{name: "bom and space", in: "\xef\xbb\xbf \n" + index, kind: Index, locs: "http://a.example/s1.xml /s2.xml.gz"},
		{name: "text", in: "http://a.example/1\r\n\n  http://a.example/2  \nhttp://a.example/3", text: true, kind: Text, locs: "http://a.example/1 http://a.example/2 http://a.example/3"},
		{name: "text gzip", in: gz(t, "http://a.example/1\n"), text: true, kind: Text, gzip: true, locs: "http://a.example/1"},
		{name: "text not allowed", in: "http://a.example/1\n", kind: Unknown},
		{name: "html", in: "<!DOCTYPE html><html><body><a href=x>x</a><loc>http://a.example/1</loc></body></html>", text: true, kind: Unknown},
		{name: "other root", in: "<rss><channel><url><loc>http://a.example/1</loc></url></channel></rss>", kind: Unknown},
		{name: "empty", in: "", text: true, kind: Unknown},
		{name: "url in index ignored", in: "<sitemapindex><url><loc>http://a.example/1</loc></url><sitemap><loc>http://a.example/s</loc></sitemap></sitemapindex>", kind: Index, locs: "http://a.example/s"},
		{name: "loc not under entry", in: "<urlset><loc>http://a.example/0</loc><url><x><loc>http://a.example/1</loc></x></url><url><loc>http://a.example/2</loc></url></urlset>", kind: URLSet, locs: "http://a.example/2"},
		{name: "bare ampersand", in: "<urlset><url><loc>http://a.example/?a=1&b=2</loc></url></urlset>", kind: URLSet, locs: "http://a.example/?a=1&b=2"},
		{name: "latin1 declared", in: `<?xml version="1.0" encoding="ISO-8859-1"?><urlset><url><loc>http://a.example/1</loc></url></urlset>`, kind: URLSet, locs: "http://a.example/1"},
		{name: "long loc dropped", in: "<urlset><url><loc>" + long + "</loc></url><url><loc>http://a.example/2</loc></url></urlset>", kind: URLSet, tooLong: 1, locs: "http://a.example/2"},
		{name: "long loc in pieces dropped", in: "<urlset><url><loc>http://a.example/1<!---->" + long + long + "</loc></url><url><loc>http://a.example/2</loc></url></urlset>", kind: URLSet, tooLong: 1, locs: "http://a.example/2"},
		{name: "long line dropped", in: long + long + "\nhttp://a.example/2\n" + long, text: true, kind: Text, tooLong: 2, locs: "http://a.example/2"},
		{name: "trailing garbage", in: "<urlset><url><loc>http://a.example/1</loc></url></urlset><<<&&", kind: URLSet, locs: "http://a.example/1"},
		{name: "broken xml keeps what came before", in: "<urlset><url><loc>http://a.example/1</loc></url><url><loc>http://a.example/2</loc></url><url", kind: URLSet, locs: "http://a.example/1 http://a.example/2", wantErr: true},
		{name: "broken gzip", in: "\x1f\x8b\x08garbage", kind: Unknown, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := parse(t, strings.NewReader(c.in), nil, c.text)
			if (p.err != nil) != c.wantErr || (p.err != nil && !errors.Is(p.err, ErrMalformed)) {
				t.Errorf("err %v, want malformed: %v", p.err, c.wantErr)
			}
			if p.doc.Kind != c.kind || locs(p.entries) != c.locs || p.doc.TooLong != c.tooLong || p.doc.Gzip != c.gzip || p.doc.Truncated {
				t.Errorf("got %+v %q, want kind %v %q tooLong %d gzip %v", p.doc, locs(p.entries), c.kind, c.locs, c.tooLong, c.gzip)
			}
			for _, k := range p.kinds {
				if k != c.kind {
					t.Errorf("emitted kind %v, want %v", k, c.kind)
				}
			}
		})
	}
}

func TestParseLastMod(t *testing.T) {
	p := parse(t, strings.NewReader(index), nil, false)
	if len(p.entries) != 2 || p.entries[0].LastMod != "2024-05-06T07:08:09Z" || p.entries[1].LastMod != "" {
		t.Fatalf("entries %+v", p.entries)
	}
	p = parse(t, strings.NewReader(urlset), nil, false)
	if p.entries[0].LastMod != "2024-01-02" {
		t.Fatalf("entries %+v", p.entries)
	}
	if p.doc.Empty != 1 {
		t.Errorf("empty %d, want 1", p.doc.Empty)
	}
}

// endless is a reader of head followed by body repeated forever; it counts
// the bytes it gave.
type endless struct {
	head, body string
	off        int
	n          int64
}

func (e *endless) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		src := e.head
		if e.off >= len(e.head) {
			src = e.body
			off := (e.off - len(e.head)) % len(e.body)
			c := copy(b[n:], src[off:])
			n += c
			e.off += c
			continue
		}
		c := copy(b[n:], src[e.off:])
		n += c
		e.off += c
	}
	e.n += int64(n)
	return n, nil
}

func TestParseLimits(t *testing.T) {
	t.Run("urls per file", func(t *testing.T) {
		in := &endless{head: "<urlset>", body: "<url><loc>http://a.example/x</loc></url>\n"}
		p := parse(t, in, &Options{MaxURLsPerFile: 1000}, false)
		if p.err != nil || len(p.entries) != 1000 || !p.doc.Truncated {
			t.Fatalf("%+v %v, want 1000 entries, truncated", p.doc, p.err)
		}
	})
	t.Run("text urls per file", func(t *testing.T) {
		in := &endless{body: "http://a.example/x\n"}
		p := parse(t, in, &Options{MaxURLsPerFile: 1000}, true)
		if p.err != nil || len(p.entries) != 1000 || !p.doc.Truncated {
			t.Fatalf("%+v %v, want 1000 entries, truncated", p.doc, p.err)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		// Entries after the cut are not read, and the entry the cut falls in is not emitted half.
		in := &endless{head: "<urlset>", body: "<url><loc>http://a.example/x</loc></url><!-- padding padding -->\n"}
		p := parse(t, in, &Options{MaxBytes: 1 << 20}, false)
		if p.err != nil || !p.doc.Truncated || in.n > 1<<20+tokenSlack+8192 {
			t.Fatalf("%+v %v, read %d, want truncated near 1 MiB", p.doc, p.err, in.n)
		}
		per := int64(len(in.body))
		if got := int64(len(p.entries)); got < (1<<20)/per-1 || got > (1<<20)/per+1 {
			t.Errorf("%d entries in 1 MiB of %d-byte entries", got, per)
		}
	})
	t.Run("text bytes", func(t *testing.T) {
		in := &endless{body: "http://a.example/abcdefghij\n"}
		p := parse(t, in, &Options{MaxBytes: 1 << 20, MaxURLsPerFile: 1 << 30}, true)
		if p.err != nil || !p.doc.Truncated {
			t.Fatalf("%+v %v, want truncated", p.doc, p.err)
		}
		for _, e := range p.entries {
			if e.Loc != "http://a.example/abcdefghij" {
				t.Fatalf("entry %q: a line cut short was emitted", e.Loc)
			}
		}
		if want := (1 << 20) / len(in.body); len(p.entries) != want {
			t.Errorf("%d entries, want %d", len(p.entries), want)
		}
	})
	t.Run("gzip bomb", func(t *testing.T) {
		bomb := gz(t, "http://a.example/1\n"+strings.Repeat(" ", 8<<20))
		p := parse(t, strings.NewReader(bomb), &Options{MaxBytes: 1 << 20}, true)
		if p.err != nil || !p.doc.Truncated || !p.doc.Gzip || locs(p.entries) != "http://a.example/1" {
			t.Fatalf("%+v %v %q, want 1 entry, truncated", p.doc, p.err, locs(p.entries))
		}
	})
}

// TestParseHostile feeds inputs meant to cost memory or CPU: each must end
// after reading little of them, with little allocated.
func TestParseHostile(t *testing.T) {
	laughs := `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<urlset><url><loc>http://a.example/&lol9;</loc></url><url><loc>&lol9;</loc></url></urlset>`
	p := parse(t, strings.NewReader(laughs), nil, false)
	if p.err != nil || locs(p.entries) != "http://a.example/&lol9; &lol9;" {
		t.Errorf("billion laughs: %v %q, want the references left as written", p.err, locs(p.entries))
	}

	cases := []struct {
		name     string
		in       *endless
		entries  int
		maxRead  int64
		malforms bool
	}{
		{name: "deep nesting", in: &endless{head: "<urlset><url>", body: "<a>"}, maxRead: 4096, malforms: true},
		{name: "deep nesting at root", in: &endless{body: "<urlset>"}, maxRead: 4096, malforms: true},
		{name: "endless loc", in: &endless{head: "<urlset><url><loc>http://a.example/1</loc></url><url><loc>http://", body: "a"}, entries: 1, maxRead: 2 * (DefaultMaxLocLength + tokenSlack), malforms: true},
		{name: "endless attribute", in: &endless{head: "<urlset><url><loc>http://a.example/1</loc></url><url x=\"", body: "<>"}, entries: 1, maxRead: 2 * (DefaultMaxLocLength + tokenSlack), malforms: true},
		{name: "endless attributes", in: &endless{head: "<urlset><url ", body: "a='1' "}, maxRead: 2 * (DefaultMaxLocLength + tokenSlack), malforms: true},
		{name: "endless comment", in: &endless{head: "<urlset><!--", body: "-"}, maxRead: 2 * (DefaultMaxLocLength + tokenSlack), malforms: true},
		{name: "endless doctype", in: &endless{head: "<!DOCTYPE x [", body: "<!ENTITY a 'b'>"}, maxRead: 2 * (DefaultMaxLocLength + tokenSlack), malforms: true},
		{name: "endless line", in: &endless{head: "http://a.example/1\nhttp://", body: "a"}, entries: 1, maxRead: 4<<20 + tokenSlack + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			p := parse(t, c.in, &Options{MaxBytes: 4 << 20}, true)
			runtime.ReadMemStats(&after)
			if c.malforms != errors.Is(p.err, ErrMalformed) || (!c.malforms && p.err != nil) {
				t.Errorf("err %v, want malformed: %v", p.err, c.malforms)
			}
			if len(p.entries) != c.entries {
				t.Errorf("%d entries, want %d", len(p.entries), c.entries)
			}
			if c.in.n > c.maxRead {
				t.Errorf("read %d bytes, want at most %d", c.in.n, c.maxRead)
			}
			// The parser's own buffers, whatever the input: a few token
			// bounds, not the input.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
				t.Errorf("allocated %d bytes", alloc)
			}
		})
	}
}

func TestParseEmitError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	_, err := Parse(strings.NewReader(urlset), nil, false, func(Kind, Entry) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Fatalf("err %v after %d entries, want emit's error as it is after 1", err, n)
	}
}

type brokenReader struct{ r io.Reader }

var errBroken = errors.New("connection reset")

func (b *brokenReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, errBroken
	}
	return n, err
}

func TestParseReadError(t *testing.T) {
	for _, in := range []string{urlset[:200], gz(t, urlset)[:100], "http://a.example/1\nhttp://a.ex"} {
		p := parse(t, &brokenReader{strings.NewReader(in)}, nil, true)
		if !errors.Is(p.err, errBroken) || errors.Is(p.err, ErrMalformed) {
			t.Errorf("err %v, want the reader's, not malformed", p.err)
		}
	}
}
