package limiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Redis killed and restarted empty while a permit is held: the restarted
// server has forgotten the permit, but its holder goes on until its own
// clock stops it. No other permit for the site may be granted before then.
//
// The holder never refreshes, so it stops by its fence, just under one lease
// after it was granted. With the restart guard the next grant comes at least
// one lease after the server came back; without it, at once (the overlap the
// guard exists for).
func TestRestartGuard(t *testing.T) {
	forModes(t, func(t *testing.T, mode Mode) {
		const lease = time.Second
		rs, err := redistest.Start()
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Before the restart too, a fresh server makes acquirers wait.
		if err := rs.WaitUptime(lease + 2*time.Second); err != nil {
			t.Fatal(err)
		}
		rdb := rs.Client()
		defer rdb.Close()
		holder := New(rdb, &Options{Mode: mode, Lease: lease})
		defer holder.Close()
		p, err := holder.Acquire(ctx, "restart.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Restart(); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()

		// Another worker, as a crawler would ask: TryAcquire says how long.
		other := New(rdb, &Options{Mode: mode, Lease: lease})
		defer other.Close()
		_, err = other.TryAcquire(ctx, "restart.example", 1)
		var busy *BusyError
		if !errors.As(err, &busy) || busy.Full || busy.Wait <= 0 || busy.Wait > lease+time.Second {
			t.Fatalf("TryAcquire just after the restart: %v (%+v); want busy, not full, for up to lease + 1s", err, busy)
		}
		q, err := other.Acquire(ctx, "restart.example", 1)
		if err != nil {
			t.Fatal(err)
		}
		granted := time.Now()
		defer q.Release(ctx)
		select {
		case <-p.Done():
		default:
			t.Fatalf("a new permit was granted %s after the restart while the old holder was still running", granted.Sub(restarted))
		}
		if !errors.Is(p.Err(), ErrPermitLost) {
			t.Fatalf("old permit: %v, want ErrPermitLost", p.Err())
		}
		t.Logf("new permit %s after the restart (lease %s)", granted.Sub(restarted).Round(time.Millisecond), lease)

		// Without the guard the same restart hands the slot on at once.
		if err := rs.Restart(); err != nil {
			t.Fatal(err)
		}
		p2, err := holder.Acquire(ctx, "unguarded.example", 1) // waits out the guard
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Restart(); err != nil {
			t.Fatal(err)
		}
		unguarded := New(rdb, &Options{Mode: mode, Lease: lease, NoRestartGuard: true})
		defer unguarded.Close()
		q2, err := unguarded.TryAcquire(ctx, "unguarded.example", 1)
		if err != nil {
			t.Fatalf("NoRestartGuard: %v, want a permit at once", err)
		}
		defer q2.Release(ctx)
		select {
		case <-p2.Done():
			t.Fatal("the old holder had already stopped: this check proves nothing")
		default:
		}
	})
}

// GuardLeft says how long a fresh server will refuse, and 0 once it grants.
func TestGuardLeft(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rdb := rs.Client()
	defer rdb.Close()
	ctx := ctxT(t)
	l := New(rdb, &Options{Lease: time.Second})
	defer l.Close()
	left, err := l.GuardLeft(ctx)
	if err != nil || left <= 0 || left > 2*time.Second {
		t.Fatalf("GuardLeft on a fresh server: %s, %v; want (0, lease + 1s]", left, err)
	}
	if _, err := l.TryAcquire(ctx, "guard.example", 1); !errors.Is(err, ErrBusy) {
		t.Fatalf("TryAcquire while GuardLeft is %s: %v, want busy", left, err)
	}
	time.Sleep(left)
	if left, err = l.GuardLeft(ctx); err != nil || left > 0 {
		t.Fatalf("GuardLeft after waiting it out: %s, %v; want 0", left, err)
	}
	p, err := l.TryAcquire(ctx, "guard.example", 1)
	if err != nil {
		t.Fatalf("TryAcquire once GuardLeft is 0: %v", err)
	}
	p.Release(ctx)
	off := New(rdb, &Options{NoRestartGuard: true})
	defer off.Close()
	if left, err := off.GuardLeft(ctx); err != nil || left != 0 {
		t.Fatalf("GuardLeft with NoRestartGuard: %s, %v; want 0", left, err)
	}
}

// A Redis user that may not run INFO gets no guard (permits as before the
// guard existed), and GuardLeft says why.
func TestGuardWithoutInfo(t *testing.T) {
	rs, err := redistest.Start("--user", "lim", "on", ">pw", "~*", "&*", "+@all", "-info", "--user", "default", "off")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, Username: "lim", Password: "pw"})
	defer rdb.Close()
	ctx := ctxT(t)
	l := New(rdb, &Options{Lease: time.Second})
	defer l.Close()
	if _, err := l.GuardLeft(ctx); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("GuardLeft without INFO: %v, want NOPERM", err)
	}
	p, err := l.TryAcquire(ctx, "noinfo.example", 1)
	if err != nil {
		t.Fatalf("TryAcquire without INFO: %v, want a permit", err)
	}
	p.Release(ctx)
}
