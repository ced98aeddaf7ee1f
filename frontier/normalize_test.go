package frontier

import (
	"errors"
	"testing"

	"github.com/polite-crawler/polite/robots"
)

// Encoded dot segments and unreserved escapes name the same resource as
// their plain forms, so they de-duplicate to one URL; reserved escapes are
// data and stay.
func TestNormalizeCanonicalPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://a.example/%2E/private/x", "http://a.example/private/x"},
		{"http://a.example/a/%2E%2E/private/x", "http://a.example/private/x"},
		{"http://a.example/a/%2e%2e/private/x?q=1", "http://a.example/private/x?q=1"},
		{"http://a.example/%7Ea", "http://a.example/~a"},
		{"http://a.example/~a", "http://a.example/~a"},
		{"http://a.example/%7ea/%41", "http://a.example/~a/A"},
		{"http://a.example/a%2Fb", "http://a.example/a%2Fb"},
		{"http://a.example/a%2f..%2fb", "http://a.example/a%2F..%2Fb"},
		{"http://a.example/a%3Fb?c=%3F", "http://a.example/a%3Fb?c=%3F"},
		{"http://a.example/a%20b/%C3%A4", "http://a.example/a%20b/%C3%A4"},
		{"http://a.example/a/b/..", "http://a.example/a/"},
		{"http://a.example/..", "http://a.example/"},
		{"http://a.example?x", "http://a.example/?x"},
		{"http://a.example/x?/../y", "http://a.example/x?/../y"},
	} {
		got, _, err := Normalize(c.in)
		if err != nil || got != c.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// Every spelling of a server is one URL: the crawl fetches it once.
func TestNormalizeSiteSpellings(t *testing.T) {
	for _, c := range []struct {
		want, site string
		in         []string
	}{
		{"http://127.0.0.1:8080/a", "127.0.0.1:8080", []string{"http://127.0.0.1:8080/a", "http://127.0.0.1:08080/a",
			"http://127.0.0.1:008080/a", "http://[::ffff:127.0.0.1]:8080/a"}},
		{"http://[::1]/a", "[::1]", []string{"http://[::1]/a", "http://[0::1]/a", "http://[0:0:0:0:0:0:0:1]:80/a", "HTTP://[::1]:0080/a"}},
		{"http://localhost/a", "localhost", []string{"http://localhost/a", "http://localhost./a", "http://LOCALHOST:80/a"}},
		{"http://xn--bcher-kva.example/a", "xn--bcher-kva.example", []string{"http://bücher.example/a", "http://xn--bcher-kva.example/a",
			"http://BÜCHER.example./a#x"}},
		{"https://example.com/a", "example.com", []string{"https://ｅｘａｍｐｌｅ．ｃｏｍ/a", "https://EXAMPLE.com:443/a", "https://example.com.:0443/a"}},
		{"http://[fe80::1%25eth0]:8080/a", "[fe80::1%eth0]:8080", []string{"http://[FE80::0:1%25eth0]:08080/a"}},
	} {
		for _, in := range c.in {
			got, site, err := Normalize(in)
			if err != nil || got != c.want || site != c.site {
				t.Errorf("Normalize(%q) = %q, %q, %v; want %q, %q", in, got, site, err, c.want, c.site)
			}
			if again, _, _ := Normalize(got); again != got {
				t.Errorf("Normalize(%q) = %q, not a fixed point", got, again)
			}
		}
	}
}

// A host that is only dots has none.
func TestNormalizeNoHost(t *testing.T) {
	for _, in := range []string{"http://.", "http://..:8080/", "https://./x"} {
		if got, site, err := Normalize(in); !errors.Is(err, ErrScheme) {
			t.Errorf("Normalize(%q) = %q, %q, %v; want ErrScheme", in, got, site, err)
		}
	}
}

// The frontier schedules a URL under its SiteKey's name, and its scope
// stays by host.
func TestNormalizeSiteKey(t *testing.T) {
	for _, c := range []struct {
		key  robots.SiteKey
		want string
	}{{nil, "a.shop.example.com:8080"}, {robots.Site, "a.shop.example.com:8080"}, {robots.Domain, "example.com"}} {
		f := New(nil, &Options{SiteKey: c.key})
		norm, site, err := f.normalize("http://A.Shop.Example.COM.:08080/x")
		if err != nil || norm != "http://a.shop.example.com:8080/x" || site != c.want {
			t.Errorf("normalize = %q, %q, %v; want site %q", norm, site, err, c.want)
		}
	}
}

// Spellings of one URL are admitted once, counted in Redis.
func TestNormalizeDedupAcrossSpellings(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 4})
	n, err := f.Add(ctx, 0, "http://127.0.0.1:8080/a", "http://127.0.0.1:08080/a", "http://[::ffff:127.0.0.1]:8080/a",
		"http://bücher.example/a", "http://xn--bcher-kva.example/a", "http://BÜCHER.example./a",
		"http://localhost/a", "http://localhost./a", "http://[::1]/a", "http://[0:0:0:0:0:0:0:1]/a")
	if err != nil || n != 4 {
		t.Fatalf("Add of 4 URLs in 10 spellings admitted %d, %v; want 4", n, err)
	}
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Queued != 4 {
		t.Errorf("queued %d, want 4", st.Queued)
	}
}

// With SiteKey robots.Domain, hosts of one registered domain are one site
// to the frontier: one cap on the items it hands out at once.
func TestSiteKeyDomainSchedulesTogether(t *testing.T) {
	ctx := ctxT(t)
	f := newFrontier(t, Options{Shards: 4, Cap: 2, SiteKey: robots.Domain})
	if _, err := f.Add(ctx, 0, "http://a.shop.example.com/1", "http://b.shop.example.com/2", "http://c.shop.example.com/3"); err != nil {
		t.Fatal(err)
	}
	var took []Item
	for range 3 {
		it, err := f.Next(ctx)
		if err != nil {
			break
		}
		took = append(took, it)
	}
	if len(took) != 2 {
		t.Fatalf("handed out %d items of one domain with cap 2, want 2: %+v", len(took), took)
	}
	for _, it := range took {
		if it.Site != "example.com" {
			t.Errorf("item %s scheduled under %q, want example.com", it.URL, it.Site)
		}
	}
}
