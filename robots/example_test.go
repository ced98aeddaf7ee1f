package robots_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"

	"github.com/polite-crawler/polite/robots"
	"github.com/redis/go-redis/v9"
)

func ExampleParse() {
	file := []byte(`
User-agent: *
Disallow: /

User-agent: politebot
Disallow: /private/
Allow: /private/press/
Concurrency: 2
`)
	pol := robots.Parse(200, file, "politebot/1.0 (+https://example.com/bot)")
	fmt.Println(pol.Allowed("/private/x"), pol.Allowed("/private/press/1"), pol.Allowed("/blog"))
	fmt.Println("cap:", pol.Cap(3), "delay:", pol.CrawlDelay)

	slow := robots.Parse(200, []byte("User-agent: *\nRequest-rate: 1/5s\n"), "politebot")
	fmt.Println("cap:", slow.Cap(3), "delay:", slow.CrawlDelay)

	down := robots.Parse(503, nil, "politebot")
	fmt.Println("503 allows /:", down.Allowed("/"))
	// Output:
	// false true true
	// cap: 2 delay: 0s
	// cap: 1 delay: 5s
	// 503 allows /: false
}

// Every worker asks the Cache; the site's robots.txt is fetched once for the
// whole fleet and kept in Redis.
func ExampleCache() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow: /cart/\nCrawl-delay: 2\n")
	}))
	defer site.Close()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	cache := robots.NewCache(rdb, http.DefaultClient, &robots.CacheOptions{Prefix: "example", UserAgent: "politebot/1.0"})
	defer cache.Close(context.Background()) // before rdb.Close: ends fetches under way, gives their leases back

	u, _ := url.Parse(site.URL + "/products/42")
	pol, err := cache.Policy(context.Background(), u)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(pol.Allowed(u.Path), pol.Allowed("/cart/add"), pol.Cap(3), pol.CrawlDelay)
	// Output: true false 1 2s
}
