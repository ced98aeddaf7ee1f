package limiter

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/redisinfo"
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
// shortens a backoff already in place. A d longer than MaxDelay counts as
// MaxDelay.
func (l *Limiter) Backoff(ctx context.Context, site string, d time.Duration) error {
	k, _, err := l.prepare(site, Rule{Limit: 1})
	if err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	if err := backoffScript.Run(ctx, l.rdb, k.all(), ms(min(d, MaxDelay)), ms(l.opts.lease())).Err(); err != nil {
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

// GuardLeft is how long Redis will still grant nothing for a site it has no
// state for, under a rule without a crawl delay, because it started less
// than a lease ago (the restart guard; see Options.NoRestartGuard). It is 0
// once every node may grant. On Redis Cluster it asks every master.
func (l *Limiter) GuardLeft(ctx context.Context) (time.Duration, error) {
	need := time.Duration(l.opts.restartGuard(Rule{})) * time.Millisecond
	if need == 0 {
		return 0, nil
	}
	var mu sync.Mutex // ForEachMaster asks the masters at once
	var left time.Duration
	ask := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("limiter: INFO server: %w", err)
		}
		if v, ok := redisinfo.Field(info, "uptime_in_seconds"); ok {
			up, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("limiter: uptime %q: %w", v, err)
			}
			mu.Lock()
			left = max(left, need-time.Duration(up)*time.Second)
			mu.Unlock()
		}
		return nil
	}
	var err error
	switch c := l.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, ask)
	case *redis.Client:
		err = ask(ctx, c)
	default:
		return 0, fmt.Errorf("limiter: GuardLeft: unsupported client %T", l.rdb)
	}
	return left, err
}
