package robots

import (
	"errors"
	"net/url"
	"testing"
)

// Every spelling of one server is one site: each row's inputs
// must all give want.
func TestSiteCanonical(t *testing.T) {
	for _, c := range []struct {
		want string
		in   []string
	}{
		{"127.0.0.1:8080", []string{"http://127.0.0.1:8080/", "http://127.0.0.1:08080/", "http://127.0.0.1:008080/",
			"http://[::ffff:127.0.0.1]:8080/", "http://[::FFFF:7F00:1]:8080/"}},
		{"[::1]:8080", []string{"http://[::1]:8080/", "http://[0::1]:8080/", "http://[0:0:0:0:0:0:0:1]:8080/",
			"http://[0000:0000::0001]:08080/"}},
		{"[::1]", []string{"http://[::1]/", "http://[0::1]:80/", "http://[0:0:0:0:0:0:0:1]:0080/"}},
		{"[2001:db8::1]", []string{"https://[2001:DB8::1]/", "https://[2001:0db8:0:0:0:0:0:1]:443/"}},
		{"[fe80::1%eth0]", []string{"http://[fe80::1%25eth0]/", "http://[FE80:0::1%25eth0]:80/"}},
		{"localhost", []string{"http://localhost/", "http://localhost./", "http://LocalHost.:80/", "http://localhost:080/"}},
		{"localhost:8080", []string{"http://localhost:8080/", "http://localhost.:8080/", "http://localhost:0008080/"}},
		{"xn--bcher-kva.example", []string{"http://bücher.example/", "http://BÜCHER.example./", "http://xn--bcher-kva.example/",
			"http://XN--BCHER-KVA.example/", "http://b%C3%BCcher.example/"}},
		{"example.com", []string{"http://example.com/", "http://Example.COM/", "http://ｅｘａｍｐｌｅ．ｃｏｍ/",
			"http://ＥＸＡＭＰＬＥ．ｃｏｍ．/", "http://example.com./", "http://example.com:80/", "http://example.com:/"}},
		{"example.com", []string{"https://example.com/", "https://example.com:443/", "https://example.com:0443/"}},
		{"example.com:80", []string{"https://example.com:80/", "https://example.com:0080/"}},
		{"example.com:443", []string{"http://example.com:443/"}},
		{"example.com:0", []string{"http://example.com:0/", "http://example.com:000/"}},
		{"xn--fa-hia.de", []string{"http://faß.de/", "http://FAß.de/", "http://xn--fa-hia.de/"}}, // non-transitional: ß stays
		{"a_b.example", []string{"http://A_B.example/"}},                                         // ASCII: lower-cased, not validated, as net/http sends it
		// IDNA rejects a lone ZWJ (CONTEXTJ): the lower-cased form stays.
		{"x\u200d.example", []string{"http://X\u200d.example/", "http://x\u200d.example./"}},
		// IDNA rejects U+04C0, but maps its Unicode lower case (U+04CF): only
		// ASCII letters are lower-cased, so the site stays one it rejects.
		{"\u04c0.example", []string{"http://\u04c0.EXAMPLE/", "http://\u04c0.example./"}},
		// Invalid UTF-8 (a run of it) in a name IDNA rejects is one U+FFFD:
		// still rejected, and a valid key name. (IDNA takes invalid UTF-8
		// alone as U+FFFD and encodes it: "%FF.example" is "xn--zn7c.example".)
		{"\ufffd\u04c0.x.example", []string{"http://%FF%D3%80.X.example/", "http://%FF%FE%D3%80.x.example/"}},
		{"xn--zn7c.x.example", []string{"http://%FF.X.example/"}},
		{"127.000.000.001", []string{"http://127.000.000.001/"}}, // a name to Go's dialer, not an address
		{"a", []string{"http://a../", "http://A.../"}},           // invalid, but a fixed point
		{"", []string{"http://./", "http://..:80/"}},
	} {
		for _, in := range c.in {
			u, err := url.Parse(in)
			if err != nil {
				t.Errorf("url.Parse(%q): %v", in, err)
				continue
			}
			got := Site(u)
			if got != c.want {
				t.Errorf("Site(%q) = %q, want %q", in, got, c.want)
			}
			// A URL whose Host is its site has that site (Normalize relies on it).
			v := *u
			v.Host = got
			if again := Site(&v); again != got {
				t.Errorf("Site of %q's site %q = %q, not a fixed point", in, got, again)
			}
			if w, err := url.Parse(v.String()); err != nil || Site(w) != got {
				t.Errorf("%q (site %q) does not survive String and Parse: %v, %v", in, got, w, err)
			}
		}
	}
}

// The fast path (Host already canonical) and the slow one agree.
func TestSiteFastPath(t *testing.T) {
	for _, h := range []string{"example.com", "a-b.example:8080", "127.0.0.1:9", "x:1", "9", "a..b"} {
		if !canonicalHost("http", h) {
			t.Errorf("canonicalHost(%q) = false, want true", h)
		}
	}
	for _, h := range []string{"", "Example.com", "example.com.", "example.com:", "example.com:080", "example.com:80",
		"[::1]", "bücher.example", "a_b", ":80", "a:8x"} {
		if canonicalHost("http", h) {
			t.Errorf("canonicalHost(%q) = true, want false", h)
		}
	}
	if canonicalHost("https", "a:443") || !canonicalHost("https", "a:80") {
		t.Error("canonicalHost does not follow the scheme's default port")
	}
}

func TestDomain(t *testing.T) {
	for in, want := range map[string]string{
		"http://a.shop.example.com/":     "example.com",
		"http://b.shop.example.com:8080": "example.com", // a domain has no port
		"https://WWW.Example.COM./":      "example.com",
		"http://a.shop.example/":         "shop.example", // unlisted TLD: the "*" rule
		"http://a.b.co.uk/":              "b.co.uk",
		"http://bücher.example/":         "xn--bcher-kva.example",
		"http://x.bücher.example/":       "xn--bcher-kva.example",
		"http://alice.github.io/":        "alice.github.io", // private suffix: a domain of its own
		"http://x.alice.github.io/":      "alice.github.io",
		"http://bob.blogspot.com/":       "bob.blogspot.com",
		"http://github.io/":              "github.io", // a public suffix itself: the host
		"http://co.uk/":                  "co.uk",
		"http://localhost:8080/":         "localhost", // single label: the host
		"http://localhost.:8080/":        "localhost",
		"http://127.0.0.1:8080/":         "127.0.0.1", // an IP: itself
		"http://127.0.0.1:08080/":        "127.0.0.1",
		"http://[::ffff:10.0.0.1]/":      "10.0.0.1",
		"http://[0::1]:8080/":            "[::1]",
		"http://[2001:db8::1]/":          "[2001:db8::1]",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := Domain(u); got != want {
			t.Errorf("Domain(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSiteKey(t *testing.T) {
	u, _ := url.Parse("http://a.shop.example.com:8080/")
	for name, want := range map[string]string{"": "a.shop.example.com:8080", "host": "a.shop.example.com:8080", "domain": "example.com"} {
		k, err := ParseSiteKey(name)
		if err != nil || k(u) != want {
			t.Errorf("ParseSiteKey(%q): %v; key %q, want %q", name, err, k(u), want)
		}
	}
	for _, name := range []string{"Host", "ip", "registered-domain"} {
		if _, err := ParseSiteKey(name); !errors.Is(err, ErrSiteKey) {
			t.Errorf("ParseSiteKey(%q) = %v, want ErrSiteKey", name, err)
		}
	}
}

func BenchmarkSite(b *testing.B) {
	for _, raw := range []string{"http://example.com/x", "http://example.com:8080/x", "http://Example.COM:080/x",
		"http://bücher.example/x", "http://[0:0:0:0:0:0:0:1]:8080/x"} {
		u, _ := url.Parse(raw)
		b.Run(u.Host, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Site(u)
			}
		})
	}
	u, _ := url.Parse("http://a.shop.example.com/x")
	b.Run("Domain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Domain(u)
		}
	})
}

// Site is a fixed point, through url.URL.String and url.Parse too, and
// Domain is one of its suffixes or the site itself.
func FuzzSite(f *testing.F) {
	for _, s := range []string{"http://Example.COM:080/", "http://[0::1]:8080/", "http://bücher.example./", "http://ｅｘａｍｐｌｅ．ｃｏｍ/",
		"https://[fe80::1%25eth0]:443/", "http://a..:1/", "HTTP://Ӏ.EXAMPLE/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		site := Site(u)
		v := *u
		v.Host = site
		if again := Site(&v); again != site {
			t.Fatalf("%q: site %q, then %q", raw, site, again)
		}
		// Through String and Parse, unless the site is empty: a URL with no
		// host and a path of "//0" prints as "//0", whose host is "0" (the
		// frontier admits no URL without a host).
		if w, err := url.Parse(v.String()); err == nil && site != "" && Site(w) != site {
			t.Fatalf("%q: site %q, through %q %q", raw, site, v.String(), Site(w))
		}
		if d := Domain(u); d != Domain(&v) {
			t.Fatalf("%q: domain %q, of its site %q", raw, d, Domain(&v))
		}
	})
}

// A robots.txt URL names its origin's host, a zone's '%' escaped.
func TestOriginRobotsURL(t *testing.T) {
	for _, raw := range []string{"http://[fe80::1%25eth0]:8080/x", "https://bücher.example/x", "http://127.0.0.1:08080/x"} {
		u, _ := url.Parse(raw)
		o := origin{scheme: u.Scheme, site: Site(u)}
		r, err := url.Parse(o.robotsURL())
		if err != nil || Site(r) != o.site || r.Scheme != u.Scheme || r.Path != "/robots.txt" {
			t.Errorf("%s: robots.txt URL %q (%v) is not of site %s", raw, o.robotsURL(), err, o.site)
		}
	}
}
