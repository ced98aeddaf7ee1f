package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/polite-crawler/polite/internal/redisinfo"
	"github.com/redis/go-redis/v9"
)

// evictionWhy says why only maxmemory-policy noeviction is safe.
const evictionWhy = "every key the crawler writes has a TTL, so under memory pressure any policy but noeviction (volatile-* ones too) " +
	"may evict a held permit, and its site would then get more requests than its cap; set maxmemory-policy noeviction " +
	"(a full Redis then refuses writes, and the crawler stops rather than overloading sites)"

// CheckEviction reads Redis's maxmemory-policy (INFO memory, on every
// master of a cluster). With any policy but noeviction, or when it cannot be
// read, it warns in log, or with --strict returns an error that says why
// and names the safe setting. With noeviction it says nothing.
func (c *Config) CheckEviction(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	policy, err := evictionPolicy(ctx, rdb)
	switch {
	case err != nil && c.Strict:
		return fmt.Errorf("--strict: cannot read the maxmemory-policy of Redis at %s (let the Redis user run INFO): %w", c.RedisAddrs(), err)
	case err != nil:
		log.Warn("cannot read Redis's maxmemory-policy, so cannot tell whether it may evict permits (let the Redis user run INFO)", "err", err, "safe", "maxmemory-policy noeviction")
	case policy != "noeviction" && c.Strict:
		return fmt.Errorf("--strict: Redis at %s has maxmemory-policy %s: %s", c.RedisAddrs(), policy, evictionWhy)
	case policy != "noeviction":
		log.Warn("Redis may evict permits: maxmemory-policy "+policy, "policy", policy, "safe", "maxmemory-policy noeviction", "why", evictionWhy)
	}
	return nil
}

// evictionPolicy is Redis's maxmemory_policy from INFO memory; on a
// cluster, the first master's that is not noeviction, if any.
func evictionPolicy(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	var mu sync.Mutex // ForEachMaster asks the masters at once
	policy := ""
	ask := func(ctx context.Context, c redis.UniversalClient) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return fmt.Errorf("INFO memory: %w", err)
		}
		v, ok := redisinfo.Field(info, "maxmemory_policy")
		if !ok {
			return errors.New("INFO memory has no maxmemory_policy")
		}
		mu.Lock()
		if policy == "" || policy == "noeviction" {
			policy = v
		}
		mu.Unlock()
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return ask(ctx, c) })
	} else {
		err = ask(ctx, rdb)
	}
	return policy, err
}
