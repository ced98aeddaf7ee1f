package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// wakeCost measures a real Redis's CPU per PING both ways, and fails on a
// Redis it cannot reach.
func TestWakeCost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	w, err := wakeCost(ctx, srv.Addr, 2000, 20)
	if err != nil {
		t.Fatal(err)
	}
	// 2,000 PINGs cost a Redis milliseconds of CPU however fast it is; a
	// figure of 0 would be a counter that did not move.
	if w.One <= 0 || w.Many <= 0 || w.Clients != 20 {
		t.Errorf("wake cost %+v, want both figures above 0 and 20 clients", w)
	}
	srv.Close()
	if _, err := wakeCost(ctx, srv.Addr, 10, 2); err == nil {
		t.Error("no error from a Redis that is gone")
	}
}

// A capture holds what Redis ran up to stop, binary values as MONITOR
// quotes them, and not stop's own marker; one that outgrows maxCapture, or
// whose stop's context has ended, is an error, not a capture cut short.
func TestMonitor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()

	m, err := startMonitor(ctx, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := rdb.Set(ctx, fmt.Sprintf("k%d", i), "v\r\n\x00\"", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := m.stop(ctx, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	var sets []string
	for _, l := range lines {
		if args, ok := ParseMonitorLine(l); ok && args[0] == "set" {
			sets = append(sets, args[1]+"="+args[2])
		}
		if strings.Contains(l, m.marker) {
			t.Errorf("the capture holds stop's marker: %q", l)
		}
	}
	if len(sets) != 100 || sets[0] != "k0=v\r\n\x00\"" || sets[99] != "k99=v\r\n\x00\"" {
		t.Errorf("captured %d SETs (%q … ), want the 100 sent, in order", len(sets), sets[:min(2, len(sets))])
	}

	defer func(n int) { maxCapture = n }(maxCapture)
	maxCapture = 1000
	m, err = startMonitor(ctx, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		rdb.Set(ctx, fmt.Sprintf("k%d", i), "v", 0)
	}
	if _, err := m.stop(ctx, srv.Addr); err == nil || !strings.Contains(err.Error(), "passed") {
		t.Errorf("a capture past maxCapture: %v, want an error", err)
	}

	m, err = startMonitor(ctx, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ended, end := context.WithCancel(ctx)
	end()
	if _, err := m.stop(ended, srv.Addr); !errors.Is(err, context.Canceled) {
		t.Errorf("stop with an ended context: %v, want context.Canceled", err)
	}
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		t.Error("the reader still runs after stop")
	}

	// A Redis that refuses MONITOR (a managed one may): an error saying
	// so, before any crawl (the spec has no crawler to start).
	if err := rdb.Do(ctx, "acl", "setuser", "default", "-monitor").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := startMonitor(ctx, srv.Addr); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("MONITOR refused: %v, want Redis's NOPERM", err)
	}
	row, err := CrawlSpec{RedisAddr: srv.Addr}.busy(ctx, rdb, "atomic")
	if err == nil || !strings.Contains(err.Error(), "NOPERM") || row.Crawl.Pages != 0 || row.CPU != 0 {
		t.Errorf("busy on a Redis refusing MONITOR: %+v, %v; want no figure and its error", row, err)
	}
}
