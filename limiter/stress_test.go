package limiter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The stress test re-executes this test binary as worker processes; childEnv
// marks a child and carries its settings.
const childEnv = "POLITE_LIMITER_STRESS_CHILD"

const (
	stressProcs      = 4
	stressGoroutines = 16
	stressIterations = 12
	stressLimit      = 3
)

// siteCounter is the stand-in for a real site: an HTTP handler that counts how
// many requests are in flight at once.
type siteCounter struct {
	limit    int64
	inflight atomic.Int64
	max      atomic.Int64
	over     atomic.Int64 // requests that started with limit already in flight
	total    atomic.Int64
}

func (s *siteCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	s.total.Add(1)
	if n > s.limit {
		s.over.Add(1)
	}
	for m := s.max.Load(); n > m && !s.max.CompareAndSwap(m, n); m = s.max.Load() {
	}
	hold, _ := time.ParseDuration(r.URL.Query().Get("hold"))
	time.Sleep(hold)
	io.WriteString(w, "ok")
}

// TestStressManyProcesses: 4 processes × 16 goroutines on one site with limit
// 3, each holding its permit for a real HTTP request; the server must never see
// more than 3 at once. Run in each mode and with half the processes in each.
func TestStressManyProcesses(t *testing.T) {
	for _, c := range []struct {
		name  string
		modes []Mode
	}{
		{"locked", []Mode{ModeLocked}},
		{"atomic", []Mode{ModeAtomic}},
		{"mixed", []Mode{ModeLocked, ModeAtomic}},
	} {
		t.Run(c.name, func(t *testing.T) {
			site := &siteCounter{limit: stressLimit}
			hs := httptest.NewServer(site)
			defer hs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			prefix := testPrefix(t)
			var wg sync.WaitGroup
			errs := make([]error, stressProcs)
			outs := make([][]byte, stressProcs)
			for i := 0; i < stressProcs; i++ {
				mode := c.modes[i%len(c.modes)]
				cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(),
					childEnv+"=1",
					"STRESS_REDIS="+srv.Addr,
					"STRESS_URL="+hs.URL+"/work?hold=2ms",
					"STRESS_PREFIX="+prefix,
					"STRESS_MODE="+strconv.Itoa(int(mode)),
				)
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[i], errs[i] = cmd.CombinedOutput()
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("worker process %d: %v\n%s", i, err, outs[i])
				}
			}
			want := int64(stressProcs * stressGoroutines * stressIterations)
			t.Logf("requests %d, max in flight %d, over cap %d", site.total.Load(), site.max.Load(), site.over.Load())
			if got := site.total.Load(); got != want {
				t.Errorf("server saw %d requests, want %d", got, want)
			}
			if m := site.max.Load(); m > stressLimit {
				t.Errorf("server saw %d requests in flight at once; the cap is %d", m, stressLimit)
			}
			if m := site.max.Load(); m < stressLimit {
				t.Errorf("server saw at most %d in flight: the site was never saturated, so the test proved nothing", m)
			}
			if o := site.over.Load(); o != 0 {
				t.Errorf("%d requests started over the cap", o)
			}
			rdb := newClient(t)
			l := New(rdb, &Options{Prefix: prefix})
			defer l.Close()
			if h, o := members(t, rdb, l, "stress.example"); len(h)+len(o) != 0 {
				t.Errorf("entries left behind: holders %v owners %v", h, o)
			}
		})
	}
}

// stressChild is a worker process: 16 goroutines, each taking a permit and
// making one held request under it, stressIterations times.
func stressChild() int {
	mode, _ := strconv.Atoi(os.Getenv("STRESS_MODE"))
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("STRESS_REDIS"), PoolSize: stressGoroutines + 4})
	defer rdb.Close()
	l := New(rdb, &Options{Mode: Mode(mode), Prefix: os.Getenv("STRESS_PREFIX"), Lease: 5 * time.Second})
	defer l.Close()
	url := os.Getenv("STRESS_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g := 0; g < stressGoroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < stressIterations; i++ {
				if err := stressOnce(ctx, l, client, url); err != nil {
					fmt.Fprintln(os.Stderr, err)
					failed.Add(1)
					return
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		return 1
	}
	return 0
}

func stressOnce(ctx context.Context, l *Limiter, client *http.Client, url string) error {
	p, err := l.Acquire(ctx, "stress.example", stressLimit)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	defer p.Release(ctx)
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return p.Err()
}
