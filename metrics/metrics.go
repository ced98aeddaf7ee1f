// Package metrics exposes a crawler process's figures to Prometheus:
// permits held, time waited for permits, permits lost, responses by status
// code, fetch durations and bytes, the crawl's progress and outcomes, how
// robots policies were found, Redis round trips, and the Go runtime's and
// the process's own figures.
package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/polite-crawler/polite/robots"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics implements fetch.Observer.
type Metrics struct {
	reg       *prometheus.Registry
	held      prometheus.Gauge
	wait      prometheus.Histogram
	waitFails prometheus.Counter
	lost      prometheus.Counter
	responses *prometheus.CounterVec
	took      prometheus.Histogram
	bytes     prometheus.Counter
	rt        *roundTrips
}

// New registers the crawler's metrics, the Go runtime's (go_*) and the
// process's (process_*) among them.
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
			Help: "Responses by HTTP status code."}, []string{"code"}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "polite_fetch_duration_seconds",
			Help:    "Time from a request's start (its site permit held) to its response body closed; requests without a response are not counted.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "polite_fetched_bytes_total",
			Help: "Response body bytes read (robots.txt and sitemaps included)."}),
		rt: &roundTrips{},
	}
	m.reg.MustRegister(m.held, m.wait, m.waitFails, m.lost, m.responses, m.took, m.bytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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

// Fetched counts a response's body bytes and observes its fetch duration.
func (m *Metrics) Fetched(site string, status int, bytes int64, took time.Duration) {
	m.bytes.Add(float64(bytes))
	m.took.Observe(took.Seconds())
}

// Serve serves /metrics on addr until ctx ends (Listen, then Close when ctx
// is done).
func (m *Metrics) Serve(ctx context.Context, addr string) error {
	s, err := m.Listen(addr)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return s.Close()
}
