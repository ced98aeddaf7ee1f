package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

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

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- m.Serve(ctx, addr) }()
	var body string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && body == ""; time.Sleep(10 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"polite_permits_held 1", "polite_permit_wait_seconds_count 1", "polite_permit_wait_failures_total 1",
		"polite_permits_lost_total 1", `polite_fetches_total{status="200"} 2`, `polite_fetches_total{status="503"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if err := m.Serve(context.Background(), "not-an-address"); err == nil {
		t.Error("a bad address must be an error")
	}
}
