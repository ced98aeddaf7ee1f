package fetch_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/redis/go-redis/v9"
)

// Pin names to addresses as curl's --resolve does, and see which address
// a request to each would dial and which address permit it would take.
func ExampleParseResolve() {
	pins, err := fetch.ParseResolve([]string{"shop.example:443:192.0.2.7", "*:8080:[2001:db8:1:2::10]"})
	if err != nil {
		panic(err)
	}
	res, err := fetch.NewResolver(&fetch.ResolverOptions{Pins: pins})
	if err != nil {
		panic(err)
	}
	for _, hp := range [][2]string{{"Shop.Example.", "443"}, {"any.example", "8080"}, {"2001:db8:1:2::99", "80"}} {
		a, err := res.Resolve(context.Background(), hp[0], hp[1])
		fmt.Println(hp[0], hp[1], "→", a, fetch.AddrKey(a), err)
	}
	fmt.Println(fetch.AddrKey(netip.MustParseAddr("::ffff:192.0.2.7")))
	// Output:
	// Shop.Example. 443 → 192.0.2.7 ip:192.0.2.7 <nil>
	// any.example 8080 → 2001:db8:1:2::10 ip:2001:db8:1:2::/64 <nil>
	// 2001:db8:1:2::99 80 → 2001:db8:1:2::99 ip:2001:db8:1:2::/64 <nil>
	// ip:192.0.2.7
}

// A crawler's transport with at most 3 requests at once per site and 4 per
// server address, fleet-wide: the site permit is taken by Transport, the
// address permit by its Base, robots.txt requests included.
func ExampleNewAddrTransport() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	lim := limiter.New(rdb, nil)
	defer lim.Close()
	res, err := fetch.NewResolver(nil) // DNS cache with the defaults
	if err != nil {
		panic(err)
	}
	at := fetch.NewAddrTransport(nil, res, lim, 4)
	tr := &fetch.Transport{Base: at, Limiter: lim, Cap: 3}
	tr.Robots = robots.NewCache(rdb, &http.Client{Transport: &fetch.RobotsTransport{Base: at, Limiter: lim}}, nil)
	_ = &http.Client{Transport: tr}
}
