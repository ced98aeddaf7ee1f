package robots

import (
	"net/http/httptest"
	"testing"
)

// SiteCap is the configured cap until a robots.txt of the site is cached,
// then the lower of that and what robots.txt asks; it fetches nothing.
func TestSiteCap(t *testing.T) {
	rs := &robotsServer{status: 200, body: "User-agent: *\nConcurrency: 2\n"}
	site := httptest.NewServer(rs)
	defer site.Close()
	c, _ := newCache(t, CacheOptions{})
	ctx := ctxT(t)
	host := mustURL(t, site.URL).Host
	if limit, known := c.SiteCap(ctx, host, 3); limit != 3 || known || rs.hits.Load() != 0 {
		t.Fatalf("before any fetch: SiteCap = %d, %v (%d fetches), want 3, false and none", limit, known, rs.hits.Load())
	}
	if _, err := c.Policy(ctx, mustURL(t, site.URL+"/")); err != nil {
		t.Fatal(err)
	}
	for _, c2 := range []struct{ configured, want int }{{3, 2}, {1, 1}} {
		if limit, known := c.SiteCap(ctx, host, c2.configured); limit != c2.want || !known {
			t.Errorf("configured %d, robots.txt asks 2: SiteCap = %d, %v, want %d, true", c2.configured, limit, known, c2.want)
		}
	}
}
