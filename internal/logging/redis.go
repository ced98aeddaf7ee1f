package logging

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisLogger is go-redis's internal logger interface over a slog.Logger.
type redisLogger struct{ log *slog.Logger }

// Printf logs go-redis's line at warn level, with component=redis: what
// go-redis says (a pool or connection problem, a node it cannot reach) is
// worth attention but is not itself a failure of ours. A failed dial is
// logged at debug level: the command that needed the connection fails, and
// the caller says so (config.Connect's "Redis not reachable yet", a
// worker's "frontier unavailable"), so at warn level every such failure was
// said twice.
func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	level := slog.LevelWarn
	if strings.HasPrefix(format, dialFailed) {
		level = slog.LevelDebug
	}
	r.log.Log(ctx, level, fmt.Sprintf(format, v...), "component", "redis")
}

// dialFailed starts go-redis's line for a connection it could not make
// (internal/pool, v9).
const dialFailed = "redis: connection pool: failed to dial"

// RouteRedis sends go-redis's own log lines, from every client of the
// process, to log at warn level with the attribute component=redis. The
// setting is process-wide (redis.SetLogger); the last call wins.
func RouteRedis(log *slog.Logger) {
	redis.SetLogger(redisLogger{log})
}
