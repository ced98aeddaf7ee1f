package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// scrape serves m on a free loopback port, reads /metrics once, and stops.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	s, err := m.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v\n%s", resp.StatusCode, err, b)
	}
	return string(b)
}

// has fails t for each line of want that body lacks.
func has(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
}

func TestObserverFiguresReachMetrics(t *testing.T) {
	m := New()
	m.PermitHeld(1)
	m.PermitHeld(1)
	m.PermitHeld(-1)
	m.PermitWait("a.example", 30*time.Millisecond, nil)
	m.PermitWait("a.example", 0, errors.New("cancelled"))
	m.PermitLost("a.example")
	m.Response("a.example", 200)
	m.Response("a.example", 200)
	m.Response("a.example", 503)
	m.Fetched("a.example", 200, 1000, 20*time.Millisecond)
	m.Fetched("a.example", 200, 24, 3*time.Second)
	m.Fetched("a.example", 503, 0, 500*time.Millisecond)

	body := scrape(t, m)
	has(t, body, "polite_permits_held 1", "polite_permit_wait_seconds_count 1", "polite_permit_wait_failures_total 1",
		"polite_permits_lost_total 1", `polite_fetches_total{code="200"} 2`, `polite_fetches_total{code="503"} 1`,
		"polite_fetched_bytes_total 1024", "polite_fetch_duration_seconds_count 3", "polite_fetch_duration_seconds_sum 3.52",
		`polite_fetch_duration_seconds_bucket{le="0.02"} 1`, `polite_fetch_duration_seconds_bucket{le="0.64"} 2`,
		`polite_fetch_duration_seconds_bucket{le="+Inf"} 3`,
		"go_goroutines ", "go_memstats_alloc_bytes ", "process_start_time_seconds ")
	if strings.Contains(body, `status="`) {
		t.Error(`/metrics still labels a status as status="...", not code`)
	}
	if err := m.Serve(context.Background(), "not-an-address"); err == nil {
		t.Error("a bad address must be an error")
	}
}

// Outcomes shows the caller's names and totals as they are at each scrape.
func TestOutcomesByName(t *testing.T) {
	m := New()
	counts := map[string]int64{"fetched": 3, "gave up": 1}
	m.Outcomes(func() map[string]int64 { return counts })
	has(t, scrape(t, m), `polite_outcomes_total{outcome="fetched"} 3`, `polite_outcomes_total{outcome="gave up"} 1`)
	counts = map[string]int64{"fetched": 5, "gave up": 1, "disallowed": 2}
	has(t, scrape(t, m), `polite_outcomes_total{outcome="fetched"} 5`, `polite_outcomes_total{outcome="disallowed"} 2`)
}

// A taken port fails at Listen, naming the address; Serve keeps working
// on a free one until its context ends.
func TestListenOnATakenPort(t *testing.T) {
	m := New()
	first, err := m.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, err = New().Listen(first.Addr())
	if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), first.Addr()) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Listen on a taken port: %v; want ErrAddrInUse naming %s", err, first.Addr())
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	var none *Server
	none.Linger(context.Background(), time.Hour) // nil: at once
	if err := none.Close(); err != nil {
		t.Fatal(err)
	}
}

// Linger keeps serving until its time is up or its context ends, whichever
// comes first.
func TestLingerEndsWithItsContext(t *testing.T) {
	s, err := New().Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() { defer close(ended); s.Linger(ctx, time.Hour) }()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-ended:
		t.Fatal("Linger returned before its time or its context's end")
	default:
	}
	cancel()
	<-ended
	s.Linger(context.Background(), 10*time.Millisecond) // its time up
}
