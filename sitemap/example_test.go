package sitemap_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/polite-crawler/polite/sitemap"
)

// Discover reads the site's sitemaps (here /sitemap.xml, as robots.txt
// named none) and the index's children, and hands on the page URLs in
// batches. In a crawl, Client's Transport is the crawl's fetch.Transport.
func ExampleFetcher_Discover() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sitemap.xml":
			fmt.Fprint(w, `<sitemapindex><sitemap><loc>/pages.xml</loc></sitemap><sitemap><loc>/more.txt</loc></sitemap></sitemapindex>`)
		case "/pages.xml":
			fmt.Fprint(w, `<urlset><url><loc>/a</loc></url><url><loc>/b</loc></url><url><loc>https://elsewhere.example/</loc></url></urlset>`)
		case "/more.txt":
			fmt.Fprint(w, "/c\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	site, _ := url.Parse(srv.URL)
	f := &sitemap.Fetcher{Client: srv.Client(), UserAgent: "politebot/0.1"}
	st, err := f.Discover(context.Background(), site, nil, func(urls []string) error {
		for _, u := range urls {
			fmt.Println(strings.TrimPrefix(u, srv.URL))
		}
		return nil
	})
	fmt.Printf("%d sitemaps, %d index, %d URLs, %d dropped, err %v\n", st.Fetched, st.Indexes, st.URLs, st.Dropped, err)
	// Output:
	// /a
	// /b
	// /c
	// 3 sitemaps, 1 index, 3 URLs, 1 dropped, err <nil>
}

// Parse reads one document, gzipped or not, calling back for each entry.
func ExampleParse() {
	doc := `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://example.com/</loc><lastmod>2024-01-02</lastmod></url>
  <url><loc>https://example.com/about</loc></url>
</urlset>`
	d, err := sitemap.Parse(strings.NewReader(doc), nil, true, func(k sitemap.Kind, e sitemap.Entry) error {
		fmt.Printf("%v %s lastmod=%q\n", k, e.Loc, e.LastMod)
		return nil
	})
	fmt.Println(d.Entries, err)
	// Output:
	// urlset https://example.com/ lastmod="2024-01-02"
	// urlset https://example.com/about lastmod=""
	// 2 <nil>
}
