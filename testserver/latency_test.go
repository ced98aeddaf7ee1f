package testserver

import (
	"testing"
	"time"
)

func TestLatencyPercentilesExact(t *testing.T) {
	var l latencies
	if got := l.summary(); got != (Latency{}) {
		t.Fatalf("empty: %+v", got)
	}
	l.add(7 * time.Millisecond)
	if got := l.summary(); got != (Latency{Count: 1, P50Ms: 7, P95Ms: 7, P99Ms: 7, MaxMs: 7}) {
		t.Fatalf("one answer of 7 ms: %+v", got)
	}
	l.reset()
	// 1..100 ms, in an order that is not sorted.
	for i := 0; i < 100; i++ {
		l.add(time.Duration((i*37)%100+1) * time.Millisecond)
	}
	if got, want := l.summary(), (Latency{Count: 100, P50Ms: 50, P95Ms: 95, P99Ms: 99, MaxMs: 100}); got != want {
		t.Fatalf("1..100 ms: %+v, want %+v", got, want)
	}
	// 20 answers: nearest rank of p95 is the 19th, of p99 the 20th.
	l.reset()
	for i := 1; i <= 20; i++ {
		l.add(time.Duration(i) * time.Millisecond)
	}
	if got, want := l.summary(), (Latency{Count: 20, P50Ms: 10, P95Ms: 19, P99Ms: 20, MaxMs: 20}); got != want {
		t.Fatalf("1..20 ms: %+v, want %+v", got, want)
	}
}

// Past exactLatencies answers, the histogram keeps each percentile within
// one bucket (5 %) above the true value, the maximum exact, and its memory
// fixed.
func TestLatencyPercentilesHistogram(t *testing.T) {
	var l latencies
	const n = 20_000 // 1..20000 µs × 100: 0.1 ms .. 2 s
	for i := n; i >= 1; i-- {
		l.add(time.Duration(i) * 100 * time.Microsecond)
	}
	if l.exact != nil || len(l.hist) != latencyBuckets {
		t.Fatalf("after %d answers: %d exact, %d buckets", n, len(l.exact), len(l.hist))
	}
	got := l.summary()
	if got.Count != n || got.MaxMs != 2000 {
		t.Fatalf("count %d max %v", got.Count, got.MaxMs)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", got.P50Ms, 1000}, {"p95", got.P95Ms, 1900}, {"p99", got.P99Ms, 1980}} {
		if c.got < c.want*0.999 || c.got > c.want*1.05 {
			t.Errorf("%s: %v ms, want %v ms to +5 %%", c.name, c.got, c.want)
		}
	}
	// Beyond the last bucket, the maximum still bounds every percentile.
	l.reset()
	for i := 0; i < exactLatencies+1; i++ {
		l.add(time.Hour)
	}
	if got := l.summary(); got.P50Ms != 3_600_000 || got.MaxMs != 3_600_000 {
		t.Fatalf("an hour each: %+v", got)
	}
}
