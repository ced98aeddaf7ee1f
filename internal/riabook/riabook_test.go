package riabook

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/metrics"
)

// The port behaves like the book: the lock-guarded semaphore counts to its
// limit, releases free a slot, and each call costs what the book says.
func TestPortBehavesLikeTheBook(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := srv.Client()
	defer rdb.Close()
	ctx := context.Background()
	s := New(rdb, "sem:test", 2, 10*time.Second)
	a, _ := s.AcquireWithLock(ctx)
	b, _ := s.AcquireWithLock(ctx)
	c, err := s.AcquireWithLock(ctx)
	if a == "" || b == "" || c != "" || err != nil {
		t.Fatalf("limit 2: %q %q %q %v", a, b, c, err)
	}
	s.ReleaseFair(ctx, a)
	if d, _ := s.AcquireWithLock(ctx); d == "" {
		t.Fatal("no slot after a release")
	}
	if n := rdb.Exists(ctx, "lock:sem:test").Val(); n != 0 {
		t.Fatal("lock left behind")
	}
	// Each call costs what the book's does, in round trips: 7 to acquire
	// under the lock, 1 to release.
	m := metrics.New()
	m.CountRoundTrips(rdb)
	s.ReleaseFair(ctx, b)
	if n := m.RoundTrips(); n != 1 {
		t.Fatalf("release_fair_semaphore: %d round trips, want 1", n)
	}
	if id, _ := s.AcquireWithLock(ctx); id == "" || m.RoundTrips() != 1+7 {
		t.Fatalf("acquire_semaphore_with_lock: %d round trips, want 7", m.RoundTrips()-1)
	}
	pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := Poll(pctx, time.Millisecond, s.AcquireWithLock); err == nil {
		t.Fatal("Poll on a full semaphore returned")
	}
}
