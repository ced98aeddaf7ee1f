// Package metrics exposes a crawler process's figures to Prometheus:
// permits held, time waited for permits, permits lost, responses by status,
// how robots policies were found, and Redis round trips.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/polite-crawler/polite/robots"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics implements fetch.Observer.
type Metrics struct {
	reg       *prometheus.Registry
	held      prometheus.Gauge
	wait      prometheus.Histogram
	waitFails prometheus.Counter
	lost      prometheus.Counter
	responses *prometheus.CounterVec
	rt        *roundTrips
}

// New registers the crawler's metrics.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "polite_permits_held",
			Help: "Permits this process holds now."}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "polite_permit_wait_seconds",
			Help: "Time a request waited for its site's permit.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		waitFails: prometheus.NewCounter(prometheus.CounterOpts{Name: "polite_permit_wait_failures_total",
			Help: "Permit waits that ended without a permit (cancelled, Redis error)."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "polite_permits_lost_total",
			Help: "Permits lost before release (lease ran out unrefreshed)."}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "polite_fetches_total",
			Help: "Responses by HTTP status."}, []string{"status"}),
		rt: &roundTrips{},
	}
	m.reg.MustRegister(m.held, m.wait, m.waitFails, m.lost, m.responses)
	m.registerRoundTrips()
	return m
}

// Robots adds the robots cache's counts: policies found in the process, in
// Redis, or by fetching robots.txt.
func (m *Metrics) Robots(rob *robots.Cache) {
	for i, source := range []string{"local", "redis", "fetched"} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "polite_robots_policies_total",
			Help: "Robots policies looked up, by where they were found.", ConstLabels: prometheus.Labels{"source": source}},
			func() float64 {
				var c [3]int64
				c[0], c[1], c[2] = rob.Counts()
				return float64(c[i])
			}))
	}
}

func (m *Metrics) PermitWait(site string, waited time.Duration, err error) {
	if err != nil {
		m.waitFails.Inc()
		return
	}
	m.wait.Observe(waited.Seconds())
}
func (m *Metrics) PermitHeld(delta int)   { m.held.Add(float64(delta)) }
func (m *Metrics) PermitLost(site string) { m.lost.Inc() }
func (m *Metrics) Response(site string, status int) {
	m.responses.WithLabelValues(strconv.Itoa(status)).Inc()
}

// Serve serves /metrics on addr until ctx ends.
func (m *Metrics) Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { // owned by Serve: ends when ctx does
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
