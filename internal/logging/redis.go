package logging

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// redisLogger is go-redis's internal logger interface over a slog.Logger.
type redisLogger struct{ log *slog.Logger }

// Printf logs go-redis's line at warn level, with component=redis: what
// go-redis says (a pool or connection problem, a node it cannot reach) is
// worth attention but is not itself a failure of ours.
func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.log.Log(ctx, slog.LevelWarn, fmt.Sprintf(format, v...), "component", "redis")
}

// RouteRedis sends go-redis's own log lines, from every client of the
// process, to log at warn level with the attribute component=redis. The
// setting is process-wide (redis.SetLogger); the last call wins.
func RouteRedis(log *slog.Logger) {
	redis.SetLogger(redisLogger{log})
}
