package fetch

import (
	"context"

	"github.com/polite-crawler/polite/limiter"
	"github.com/redis/go-redis/v9"
)

// releaseOn is a stand-in until limiter.Permit.ReleaseOn lands: it releases
// after the pipeline, in a round trip of its own.
func releaseOn(ctx context.Context, p *limiter.Permit, _ redis.Pipeliner) func() error {
	return func() error { return p.Release(ctx) }
}
