package metrics

import (
	"github.com/polite-crawler/polite/limiter"
	"github.com/prometheus/client_golang/prometheus"
)

// Adaptive adds adaptive politeness's figures as lim has seen them in this
// process's releases (limiter.AdaptStats): counters of the controller's
// decreases, increases and backoffs, and gauges of the sites last seen with
// a reduced cap, an extra delay, or held off. No per-site labels: the
// cardinality stays fixed however many sites the crawl meets.
func (m *Metrics) Adaptive(lim *limiter.Limiter) {
	counter := func(name, help string, f func(limiter.AdaptStats) int64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(lim.AdaptStats())) }))
	}
	gauge := func(name, help string, f func(limiter.AdaptStats) int) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(f(lim.AdaptStats())) }))
	}
	counter("polite_adaptive_decreases_total", "Times a site's effective cap was halved or its extra delay grown, by this process's releases.",
		func(s limiter.AdaptStats) int64 { return s.Decreases })
	counter("polite_adaptive_increases_total", "Times a site's effective cap grew by one or its extra delay shrank, by this process's releases.",
		func(s limiter.AdaptStats) int64 { return s.Increases })
	counter("polite_adaptive_backoffs_total", "Fleet-wide hold-offs started after a 429/503 without Retry-After, by this process's releases.",
		func(s limiter.AdaptStats) int64 { return s.Backoffs })
	gauge("polite_adaptive_sites_reduced", "Sites this process last saw with an effective cap below their rule's.",
		func(s limiter.AdaptStats) int { return s.Reduced })
	gauge("polite_adaptive_sites_delayed", "Sites this process last saw with an extra delay.",
		func(s limiter.AdaptStats) int { return s.Delayed })
	gauge("polite_adaptive_sites_held_off", "Sites held off now by a backoff after a 429/503 without Retry-After, as this process saw.",
		func(s limiter.AdaptStats) int { return s.HeldOff })
}
