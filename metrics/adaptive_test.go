package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
)

// A headerless 503 recorded with a permit's release shows in /metrics: one
// backoff, one decrease, one site reduced and held off.
func TestAdaptiveFiguresReachMetrics(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := srv.Client()
	defer rdb.Close()
	lim := limiter.New(rdb, &limiter.Options{NoRestartGuard: true, Adaptive: &limiter.Adaptive{Backoff: time.Minute}})
	defer lim.Close()
	m := New()
	m.Adaptive(lim)
	ctx := context.Background()
	p, err := lim.Acquire(ctx, "a.example", 3)
	if err != nil {
		t.Fatal(err)
	}
	p.SetOutcome(limiter.Outcome{Class: limiter.OutcomeThrottled})
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, x := range f.GetMetric() {
			got[f.GetName()] = x.GetCounter().GetValue() + x.GetGauge().GetValue()
		}
	}
	for name, want := range map[string]float64{"polite_adaptive_backoffs_total": 1, "polite_adaptive_decreases_total": 1,
		"polite_adaptive_increases_total": 0, "polite_adaptive_sites_held_off": 1, "polite_adaptive_sites_reduced": 1,
		"polite_adaptive_sites_delayed": 0} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}
