package bench

import (
	"context"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
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
