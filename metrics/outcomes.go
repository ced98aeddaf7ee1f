package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outcomes adds polite_outcomes_total{outcome="..."}: how the crawl's
// fetches ended, by outcome. count is called at every scrape and returns
// each outcome's total so far; the names are the caller's (keep them few:
// each is a series), and a total must never decrease. Call Outcomes once.
func (m *Metrics) Outcomes(count func() map[string]int64) {
	m.reg.MustRegister(&outcomes{count: count, desc: prometheus.NewDesc("polite_outcomes_total",
		"Fetches by how they ended (outcome).", []string{"outcome"}, nil)})
}

// outcomes is a prometheus.Collector over the caller's counts.
type outcomes struct {
	count func() map[string]int64
	desc  *prometheus.Desc
}

func (o *outcomes) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

func (o *outcomes) Collect(ch chan<- prometheus.Metric) {
	for name, n := range o.count() {
		m, err := prometheus.NewConstMetric(o.desc, prometheus.CounterValue, float64(n), name)
		if err != nil { // a name that is not UTF-8: the scrape says so
			m = prometheus.NewInvalidMetric(o.desc, err)
		}
		ch <- m
	}
}
