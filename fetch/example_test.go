package fetch_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/redis/go-redis/v9"
)

// A client whose every request takes a permit of its site from the
// fleet-wide semaphore, after checking the site's robots.txt (fetched
// under a permit too). The permit is held until the body is closed.
func ExampleTransport() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
			return
		}
		fmt.Fprint(w, "<html>hello</html>")
	}))
	defer site.Close()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	lim := limiter.New(rdb, &limiter.Options{Prefix: "example-fetch"})
	defer lim.Close()
	rob := robots.NewCache(rdb, &http.Client{Transport: &fetch.RobotsTransport{Limiter: lim}},
		&robots.CacheOptions{Prefix: "example-fetch"})
	client := &http.Client{Transport: &fetch.Transport{Limiter: lim, Robots: rob, Cap: 2}}

	resp, err := client.Get(site.URL + "/page")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close() // gives the permit back
	fmt.Println("/page:", resp.StatusCode)

	_, err = client.Get(site.URL + "/private/x")
	fmt.Println("/private/x disallowed:", errors.Is(err, fetch.ErrDisallowed))
	// Output:
	// /page: 200
	// /private/x disallowed: true
}
