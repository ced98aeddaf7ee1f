package robots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/redis/go-redis/v9"
)

// Cached returns the policy of u's robots.txt (u's scheme, host and port)
// if Redis has one, without fetching.
func (c *Cache) Cached(ctx context.Context, u *url.URL) (Policy, bool, error) {
	o, err := c.origin(u)
	if err != nil {
		return Policy{}, false, err
	}
	raw, err := c.rdb.Get(ctx, c.keys(o).policy).Bytes()
	if errors.Is(err, redis.Nil) {
		return Policy{}, false, nil
	}
	if err != nil {
		return Policy{}, false, fmt.Errorf("robots: %s: %w", o, err)
	}
	var e entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return Policy{}, false, fmt.Errorf("robots: %s: %w", o, err)
	}
	return e.Policy, true, nil
}

// SiteCap is the cap on a site's requests at once (site: host[:port],
// whose http and https robots.txt share its permits): the lower of
// configured and what each of its robots.txt asks (Policy.Cap), among those
// Redis has. known is false when Redis has neither (or cannot be read):
// the cap is then configured, until one is fetched. It fetches nothing.
func (c *Cache) SiteCap(ctx context.Context, site string, configured int) (limit int, known bool) {
	limit = configured
	for _, scheme := range []string{"http", "https"} {
		if pol, ok, err := c.Cached(ctx, &url.URL{Scheme: scheme, Host: site}); err == nil && ok {
			limit, known = min(limit, pol.Cap(configured)), true
		}
	}
	return limit, known
}
