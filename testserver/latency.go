package testserver

import (
	"math"
	"slices"
	"time"
)

// Latency summarises how long a site took over some of its answers, from
// each request's arrival to its end (see SiteStats.InFlight), in ms.
// Percentiles are nearest-rank: P95 is the smallest time that at least
// 95 % of the answers took at most. They are exact for the first
// exactLatencies answers since a reset; past that they come from a
// histogram whose buckets are latencyRatio apart, so each is at most 5 %
// above the true value (never above Max, which stays exact). All are 0
// when Count is 0.
type Latency struct {
	Count int64   `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P95Ms float64 `json:"p95_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

const (
	// exactLatencies bounds the answers kept one by one per site (8 KiB);
	// past it they go to a histogram of latencyBuckets counts (2.7 KiB).
	// Both are allocated only when needed, so 60,000 quiet sites cost
	// nothing.
	exactLatencies = 1024
	// Buckets run from latencyFloor up, each latencyRatio times the one
	// below; the last also counts everything above.
	latencyFloor   = 100 * time.Microsecond
	latencyRatio   = 1.05
	latencyBuckets = 340 // up to 100 µs × 1.05^339 ≈ 25 min
)

// latencies records durations in bounded memory: exactly at first, then
// as a fixed-bucket histogram. Its owner's lock guards it.
type latencies struct {
	n     int64
	max   time.Duration
	exact []time.Duration // until it would pass exactLatencies; then nil
	hist  []int64         // per bucket, once exact has overflowed
}

func (l *latencies) reset() { *l = latencies{} }

// bucket is the index of the smallest bucket whose upper bound is >= d.
func bucket(d time.Duration) int {
	if d <= latencyFloor {
		return 0
	}
	i := int(math.Ceil(math.Log(float64(d)/float64(latencyFloor)) / math.Log(latencyRatio)))
	return min(i, latencyBuckets-1)
}

// bucketTop is bucket i's upper bound.
func bucketTop(i int) time.Duration {
	return time.Duration(float64(latencyFloor) * math.Pow(latencyRatio, float64(i)))
}

func (l *latencies) add(d time.Duration) {
	d = max(d, 0)
	l.n++
	l.max = max(l.max, d)
	if l.hist == nil && len(l.exact) < exactLatencies {
		l.exact = append(l.exact, d)
		return
	}
	if l.hist == nil { // overflow: move what was exact to the histogram
		l.hist = make([]int64, latencyBuckets)
		for _, e := range l.exact {
			l.hist[bucket(e)]++
		}
		l.exact = nil
	}
	l.hist[bucket(d)]++
}

// summary returns the count, percentiles and maximum.
func (l *latencies) summary() Latency {
	if l.n == 0 {
		return Latency{}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	out := Latency{Count: l.n, MaxMs: ms(l.max)}
	var at func(rank int64) time.Duration // rank 1..n in ascending order
	if l.hist == nil {
		sorted := slices.Clone(l.exact)
		slices.Sort(sorted)
		at = func(rank int64) time.Duration { return sorted[rank-1] }
	} else {
		at = func(rank int64) time.Duration {
			var seen int64
			for i, c := range l.hist {
				if seen += c; seen >= rank {
					if i == latencyBuckets-1 { // everything above: no top of its own
						return l.max
					}
					return min(bucketTop(i), l.max)
				}
			}
			return l.max
		}
	}
	rank := func(p int64) int64 { return max(1, (p*l.n+99)/100) } // ceil(p % of n), in integers
	out.P50Ms, out.P95Ms, out.P99Ms = ms(at(rank(50))), ms(at(rank(95))), ms(at(rank(99)))
	return out
}
