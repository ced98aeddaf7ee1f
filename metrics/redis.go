package metrics

import (
	"context"
	"sync/atomic"

	"github.com/polite-crawler/polite/internal/rtkind"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// roundTrips counts the Redis round trips a process makes: one a command,
// one a pipeline or transaction, however many commands it carries.
type roundTrips struct {
	n      atomic.Int64
	robots atomic.Int64 // of n, those for robots.txt (rtkind.Robots)
}

func (h *roundTrips) count(ctx context.Context) {
	h.n.Add(1)
	if rtkind.Of(ctx) == rtkind.Robots {
		h.robots.Add(1)
	}
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(ctx)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(ctx)
		return next(ctx, cmds)
	}
}

// CountRoundTrips adds a hook to rdb that counts its round trips (a command,
// or a pipeline) as polite_redis_round_trips_total; RoundTrips reads the
// count. Call it once per client. A new connection's set-up (HELLO) counts
// too: it is a round trip as well. Pub/sub messages
// received are not round trips and are not counted.
func (m *Metrics) CountRoundTrips(rdb redis.UniversalClient) {
	rdb.AddHook(m.rt)
}

// RoundTrips is how many Redis round trips the client given to
// CountRoundTrips has made.
func (m *Metrics) RoundTrips() int64 { return m.rt.n.Load() }

// RobotsRoundTrips is how many of RoundTrips were for robots.txt: its
// cache, fetch lease and permit (a context marked rtkind.Robots).
func (m *Metrics) RobotsRoundTrips() int64 { return m.rt.robots.Load() }

func (m *Metrics) registerRoundTrips() {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "polite_redis_round_trips_total",
		Help: "Redis round trips made by this process (a command or a whole pipeline each)."},
		func() float64 { return float64(m.rt.n.Load()) }))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "polite_redis_round_trips_robots_total",
		Help: "Of polite_redis_round_trips_total, those for robots.txt (its cache, fetch lease and permit)."},
		func() float64 { return float64(m.rt.robots.Load()) }))
}

var _ redis.Hook = (*roundTrips)(nil)
