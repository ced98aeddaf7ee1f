package bench

import (
	"context"
	"fmt"

	"github.com/polite-crawler/polite/frontier"
	"github.com/redis/go-redis/v9"
)

// SeenRow is the Redis memory a crawl's de-duplication takes per URL seen.
type SeenRow struct {
	URLs       int64
	Keys       int64 // the seen keys (fingerprint buckets over the shards)
	PerURL     float64
	URLSetPer  float64 // the same URLs kept whole in one SET (the design before fingerprints)
	AvgURLSize float64
}

// seenMemory admits n URLs (of 1,000 sites, about 60 bytes each) to a fresh
// crawl with the default 16 shards and measures its seen sets
// (frontier.SeenFootprint), beside one SET of the same URLs, in the same run.
func seenMemory(ctx context.Context, rdb *redis.Client, n int) (SeenRow, error) {
	f := frontier.New(rdb, &frontier.Options{Prefix: "bench:seen", Crawl: "seen"})
	set := "bench:seen:urlset"
	var total int64
	const batch = 1000
	for i := 0; i < n; i += batch {
		var urls []any
		var raw []string
		for j := i; j < min(i+batch, n); j++ {
			u := fmt.Sprintf("http://site-%d.example/section/%d/page-%d.html", j%1000, j/1000%97, j)
			norm, _, err := frontier.Normalize(u)
			if err != nil {
				return SeenRow{}, err
			}
			raw, urls = append(raw, u), append(urls, norm)
			total += int64(len(norm))
		}
		if _, err := f.Add(ctx, 0, raw...); err != nil {
			return SeenRow{}, fmt.Errorf("bench: seen: %w", err)
		}
		if err := rdb.SAdd(ctx, set, urls...).Err(); err != nil {
			return SeenRow{}, fmt.Errorf("bench: seen: %w", err)
		}
	}
	fp, err := f.SeenFootprint(ctx)
	if err != nil {
		return SeenRow{}, fmt.Errorf("bench: seen: %w", err)
	}
	whole, err := rdb.MemoryUsage(ctx, set, 0).Result()
	if err != nil {
		return SeenRow{}, fmt.Errorf("bench: seen: %w", err)
	}
	if fp.URLs == 0 {
		return SeenRow{}, fmt.Errorf("bench: seen: no URL admitted")
	}
	return SeenRow{URLs: fp.URLs, Keys: fp.Keys, PerURL: float64(fp.Bytes) / float64(fp.URLs),
		URLSetPer: float64(whole) / float64(n), AvgURLSize: float64(total) / float64(n)}, nil
}
