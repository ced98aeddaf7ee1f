package crawl

import (
	"testing"

	"github.com/polite-crawler/polite/robots"
)

// A robots.txt's crawl delay holds off the permits of its site's key: the
// site itself by host, its registered domain by domain. The site's port
// stays whatever the robots.txt's scheme, since the hook is given no scheme.
func TestPermitSite(t *testing.T) {
	for _, c := range []struct {
		key        robots.SiteKey
		site, want string
	}{
		{nil, "a.shop.example.com:8080", "a.shop.example.com:8080"},
		{robots.Site, "a.shop.example.com:8080", "a.shop.example.com:8080"},
		{robots.Site, "example.com:80", "example.com:80"}, // an https robots.txt on port 80
		{robots.Site, "[::1]:443", "[::1]:443"},
		{robots.Domain, "a.shop.example.com:8080", "example.com"},
		{robots.Domain, "b.shop.example.com", "example.com"},
		{robots.Domain, "127.0.0.1:8080", "127.0.0.1"},
		{robots.Domain, "[::1]:8080", "[::1]"},
	} {
		if got := permitSite(c.key, c.site); got != c.want {
			t.Errorf("permitSite(%s) = %q, want %q", c.site, got, c.want)
		}
	}
}
