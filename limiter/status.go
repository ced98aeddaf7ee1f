package limiter

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed backoff.lua
	backoffLua string
	//go:embed status.lua
	statusLua string

	backoffScript = redis.NewScript(commonLua + backoffLua)
	statusScript  = redis.NewScript(commonLua + statusLua)
)

// Backoff holds every worker of the fleet off site for d (a 429 or 503 with
// Retry-After): no permit is granted before then, waiters included. It never
// shortens a backoff already in place.
func (l *Limiter) Backoff(ctx context.Context, site string, d time.Duration) error {
	k, _, err := l.prepare(site, Rule{Limit: 1})
	if err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	if err := backoffScript.Run(ctx, l.rdb, k.all(), ms(d), ms(l.opts.lease())).Err(); err != nil {
		return fmt.Errorf("limiter: backoff %s: %w", site, err)
	}
	return nil
}

// SiteStatus is a snapshot of one site's semaphore.
type SiteStatus struct {
	Site    string
	Holders int           // permits out (at most the limit asked about)
	Waiting int           // entries in line behind them
	NextIn  time.Duration // until a crawl delay or backoff ends (0 if none)
}

// Status reads site's semaphore without changing it; limit is the cap to
// count holders against.
func (l *Limiter) Status(ctx context.Context, site string, limit int) (SiteStatus, error) {
	k, rule, err := l.prepare(site, Rule{Limit: limit})
	if err != nil {
		return SiteStatus{}, err
	}
	v, err := statusScript.Run(ctx, l.rdb, k.all(), ms(l.opts.lease())).Int64Slice()
	if err != nil || len(v) != 2 {
		return SiteStatus{}, fmt.Errorf("limiter: status %s: %w", site, err)
	}
	live := int(v[0])
	held := min(live, rule.Limit)
	return SiteStatus{Site: site, Holders: held, Waiting: live - held, NextIn: time.Duration(v[1]) * time.Millisecond}, nil
}
