package metrics

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/prometheus/client_golang/prometheus"
)

// Fleet is what a crawl has queued and in flight over all its processes.
type Fleet struct{ Queued, InFlight int64 }

// How often, and for how long at most, a scrape reads the fleet's figures
// (see Progress).
const (
	FleetEvery   = 5 * time.Second
	FleetTimeout = 2 * time.Second
)

// Progress adds the crawl's progress gauges: polite_in_flight, this
// process's fetches under way (inFlight, read at every scrape), and
// polite_crawl_queued and polite_crawl_in_flight, the whole crawl's
// (fleet, read from Redis). fleet is called by a scrape at most once every
// FleetEvery, under a context that ends after FleetTimeout, and must return
// when its context ends; in between, and while another scrape is reading,
// scrapes show the last figures read. A failed read keeps the last figures
// and counts in polite_crawl_stats_failures_total. Call Progress once.
func (m *Metrics) Progress(inFlight func() int64, fleet func(context.Context) (Fleet, error)) {
	m.progress(inFlight, fleet, FleetEvery, FleetTimeout)
}

func (m *Metrics) progress(inFlight func() int64, fleet func(context.Context) (Fleet, error), every, timeout time.Duration) {
	c := &fleetCache{read: fleet, every: every, timeout: timeout}
	c.val.Store(&Fleet{})
	c.queued = prometheus.NewDesc("polite_crawl_queued", "URLs the whole crawl has queued (read from Redis at most every 5 s).", nil, nil)
	c.inFlight = prometheus.NewDesc("polite_crawl_in_flight",
		"Fetches the whole crawl has under way, over all its processes (read from Redis at most every 5 s).", nil, nil)
	c.failed = prometheus.NewDesc("polite_crawl_stats_failures_total",
		"Reads of the crawl's figures from Redis that failed or timed out (the gauges then keep their last figures).", nil, nil)
	m.reg.MustRegister(c, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "polite_in_flight", Help: "Fetches this process has under way."},
		func() float64 { return float64(inFlight()) }))
}

// fleetCache keeps the fleet's last figures; one reader at a time asks
// again, when they are older than every. It is the collector of both
// gauges and of the failures' counter, so that one scrape shows the
// outcome of one read.
type fleetCache struct {
	read                     func(context.Context) (Fleet, error)
	every, timeout           time.Duration
	queued, inFlight, failed *prometheus.Desc
	val                      atomic.Pointer[Fleet]
	failures                 atomic.Int64

	mu sync.Mutex // held by the one reader
	at time.Time  // last read's start, failed or not (under mu)
}

// get returns the last figures, read again first if they are older than
// every and no one else is reading them now. A failed read waits its turn
// too, so that a sick Redis is not asked at every scrape.
func (c *fleetCache) get() Fleet {
	if !c.mu.TryLock() {
		return *c.val.Load()
	}
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.every {
		return *c.val.Load()
	}
	c.at = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	v, err := c.read(ctx)
	if err != nil {
		c.failures.Add(1)
		return *c.val.Load()
	}
	c.val.Store(&v)
	return v
}

func (c *fleetCache) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queued
	ch <- c.inFlight
	ch <- c.failed
}

func (c *fleetCache) Collect(ch chan<- prometheus.Metric) {
	f := c.get()
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(f.Queued))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(f.InFlight))
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(c.failures.Load()))
}

// FrontierFleet reads a crawl's Fleet from its frontier (one Redis round
// trip), for Progress.
func FrontierFleet(fr *frontier.Frontier) func(context.Context) (Fleet, error) {
	return func(ctx context.Context) (Fleet, error) {
		st, err := fr.Stats(ctx)
		if err != nil {
			return Fleet{}, fmt.Errorf("metrics: crawl figures: %w", err)
		}
		return Fleet{Queued: st.Queued, InFlight: st.InFlight}, nil
	}
}
