package sitemap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"testing"
)

// FuzzParse: no input panics Parse, and whatever it emits keeps to the
// limits: non-empty locs no longer than MaxLocLength, at most
// MaxURLsPerFile entries, all of the document's kind.
func FuzzParse(f *testing.F) {
	for _, s := range []string{urlset, index, laughsSeed, "http://a.example/1\nhttp://a.example/2\n",
		"<urlset><url><loc>http://a.example/?a=1&b=2</loc></url></urlset>", "<a><b><c><d>",
		"\xef\xbb\xbf<sitemapindex><sitemap><loc>x</loc></sitemap>", "<urlset><url><loc>a<!--x-->b</loc><lastmod>1</lastmod></url>"} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		f.Add(b.Bytes(), true)
	}
	small := &Options{MaxBytes: 4096, MaxURLsPerFile: 10, MaxLocLength: 64}
	f.Fuzz(func(t *testing.T, data []byte, text bool) {
		for _, o := range []*Options{nil, small} {
			opt := o.get()
			var kind Kind = -1
			n := 0
			doc, err := Parse(bytes.NewReader(data), o, text, func(k Kind, e Entry) error {
				n++
				if e.Loc == "" || len(e.Loc) > opt.MaxLocLength {
					t.Fatalf("emitted loc of %d bytes", len(e.Loc))
				}
				if kind != -1 && k != kind || k == Unknown || (k == Text && !text) {
					t.Fatalf("emitted kind %v after %v (text %v)", k, kind, text)
				}
				kind = k
				return nil
			})
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v, not malformed", err)
			}
			if n != doc.Entries || n > opt.MaxURLsPerFile || (n > 0 && doc.Kind != kind) {
				t.Fatalf("doc %+v after %d entries of kind %v", doc, n, kind)
			}
		}
	})
}

const laughsSeed = `<!DOCTYPE l [<!ENTITY a "b"><!ENTITY c "&a;&a;&a;">]><urlset><url><loc>&c;</loc></url></urlset>`
