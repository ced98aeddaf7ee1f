package limiter

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/redisinfo"
)

// p50 returns the median of ds (sorted in place).
func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkAcquireRelease: one uncontended acquire+release per op, next to
// its physical limit, two PINGs (acquire and release are one round trip
// each at best). Each op is preceded by two PINGs on the same client, so both
// figures see the same machine state; ratio-2ping = p50(op) / p50(2 PINGs).
func BenchmarkAcquireRelease(b *testing.B) {
	for _, mode := range []Mode{ModeLocked, ModeAtomic} {
		b.Run(mode.String(), func(b *testing.B) {
			rdb := newClient(b)
			l := newLimiter(b, rdb, Options{Mode: mode})
			ctx := context.Background()
			ops := make([]time.Duration, 0, b.N)
			pings := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				rdb.Ping(ctx)
				rdb.Ping(ctx)
				t1 := time.Now()
				p, err := l.Acquire(ctx, "solo.example", 3)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Release(ctx); err != nil {
					b.Fatal(err)
				}
				ops = append(ops, time.Since(t1))
				pings = append(pings, t1.Sub(t0))
			}
			b.StopTimer()
			op, ping := p50(ops), p50(pings)
			b.ReportMetric(float64(op.Microseconds()), "p50-µs")
			b.ReportMetric(float64(ping.Microseconds()), "2ping-p50-µs")
			b.ReportMetric(float64(op)/float64(ping), "ratio-2ping")
		})
	}
}

// BenchmarkManySites: 64 goroutines over 1000 sites (limit 3), acquire+release
// pairs per second.
func BenchmarkManySites(b *testing.B) {
	for _, mode := range []Mode{ModeLocked, ModeAtomic} {
		b.Run(mode.String(), func(b *testing.B) {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
			defer rdb.Close()
			l := newLimiter(b, rdb, Options{Mode: mode})
			ctx := context.Background()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for g := 0; g < 64; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						p, err := l.Acquire(ctx, fmt.Sprintf("s%d.example", i%1000), 3)
						if err != nil {
							b.Error(err)
							return
						}
						p.Release(ctx)
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
		})
	}
}

// BenchmarkHotSite: 32 waiters on one site with limit 3, each holding its
// permit 2 ms. The nominal ideal is 3 / 2 ms = 1500 grants/s (pct-1500). A
// 2 ms sleep lasts longer than 2 ms on a real machine, so pct-ideal divides by
// the ideal for the holds as they really lasted (limit / mean hold): that is
// the share of slot time the hand-off did not waste. HOLD overrides 2ms.
func BenchmarkHotSite(b *testing.B) {
	for _, mode := range []Mode{ModeLocked, ModeAtomic} {
		b.Run(mode.String(), func(b *testing.B) {
			const waiters, limit = 32, 3
			hold := 2 * time.Millisecond
			if h, err := time.ParseDuration(os.Getenv("HOLD")); err == nil {
				hold = h
			}
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: waiters + 4})
			defer rdb.Close()
			l := newLimiter(b, rdb, Options{Mode: mode})
			ctx := context.Background()
			n := max(b.N, 300)
			var next, held atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for g := 0; g < waiters; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(n) {
						p, err := l.Acquire(ctx, "hot.example", limit)
						if err != nil {
							b.Error(err)
							return
						}
						t0 := time.Now()
						time.Sleep(hold)
						held.Add(int64(time.Since(t0)))
						p.Release(ctx)
					}
				}()
			}
			wg.Wait()
			rate := float64(n) / time.Since(start).Seconds()
			meanHold := time.Duration(held.Load() / int64(n))
			b.ReportMetric(rate, "grants/s")
			b.ReportMetric(float64(meanHold.Microseconds()), "hold-µs")
			if hold > 0 {
				b.ReportMetric(100*rate*hold.Seconds()/limit, "pct-1500")
				b.ReportMetric(100*rate*meanHold.Seconds()/limit, "pct-ideal")
			}
		})
	}
}

// redisUsage is what a Redis server has spent so far: CPU time of its main
// thread (used_cpu_user_main_thread + used_cpu_sys_main_thread), and from
// INFO commandstats the calls of every command (those run by scripts
// included) and the µs spent in scripts (EVAL, EVALSHA and FCALL, their inner
// commands included).
type redisUsage struct {
	cpu, scriptUsec, calls float64
}

func readUsage(tb testing.TB, rdb *redis.Client) redisUsage {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var u redisUsage
	f := redisinfo.Fields(info)
	for _, name := range []string{"used_cpu_user_main_thread", "used_cpu_sys_main_thread"} {
		v, err := strconv.ParseFloat(f[name], 64)
		if err != nil {
			tb.Fatalf("INFO cpu %s: %v", name, err)
		}
		u.cpu += v * 1e6
	}
	for name, v := range f {
		cmd, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok || cmd == "info" {
			continue
		}
		for kv := range strings.SplitSeq(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseFloat(val, 64)
			switch {
			case k == "calls":
				u.calls += n
			case k == "usec" && (cmd == "evalsha" || cmd == "eval" || cmd == "fcall"):
				u.scriptUsec += n
			}
		}
	}
	return u
}

// BenchmarkRedisCPU: what one acquire+release pair costs Redis, uncontended
// (one goroutine, one site), uncontended with a fetch's outcome recorded in
// the site's health as a crawl's release does (health), and on a hot site
// (16 goroutines, limit 3, 200 µs holds): redis-cpu-µs is the server's
// main-thread CPU per pair (I/O included), script-µs the time INFO
// commandstats puts in EVAL/EVALSHA per pair, cmds the Redis commands per
// pair (those inside scripts included). Run it alone (it reads the whole
// server's counters), e.g.
//
//	go test ./limiter -run '^$' -bench RedisCPU -benchtime 4000x
func BenchmarkRedisCPU(b *testing.B) {
	for _, kind := range []string{"solo", "health", "hot"} {
		hot := kind == "hot"
		for _, mode := range []Mode{ModeLocked, ModeAtomic} {
			b.Run(kind+"/"+mode.String(), func(b *testing.B) {
				workers, limit, hold := 1, 3, time.Duration(0)
				if hot {
					workers, hold = 16, 200*time.Microsecond
				}
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: workers + 4})
				defer rdb.Close()
				l := newLimiter(b, rdb, Options{Mode: mode})
				ctx := context.Background()
				var next atomic.Int64
				var wg sync.WaitGroup
				if testing.Verbose() {
					rdb.ConfigResetStat(ctx)
				}
				before := readUsage(b, rdb)
				b.ResetTimer()
				for g := 0; g < workers; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							p, err := l.Acquire(ctx, "cpu.example", limit)
							if err != nil {
								b.Error(err)
								return
							}
							if hold > 0 {
								time.Sleep(hold)
							}
							if kind == "health" {
								p.SetOutcome(Outcome{Class: OutcomeOK, TTFB: 50 * time.Millisecond, TTLB: 60 * time.Millisecond})
							}
							if err := p.Release(ctx); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				after := readUsage(b, rdb)
				if testing.Verbose() {
					b.Log(rdb.Info(ctx, "commandstats").Val())
				}
				n := float64(b.N)
				b.ReportMetric((after.cpu-before.cpu)/n, "redis-cpu-µs")
				b.ReportMetric((after.scriptUsec-before.scriptUsec)/n, "script-µs")
				b.ReportMetric((after.calls-before.calls)/n, "cmds")
			})
		}
	}
}

// BenchmarkPage: what a crawl page costs the limiter and one other command
// (standing in for the frontier's settlement), uncontended: acquire, then
// either Release and the command in two round trips (separate), or both on
// one pipeline with ReleaseOn (pipelined). p50-µs is the median per page.
func BenchmarkPage(b *testing.B) {
	for _, mode := range []Mode{ModeLocked, ModeAtomic} {
		for _, pipelined := range []bool{false, true} {
			name := mode.String() + "/separate"
			if pipelined {
				name = mode.String() + "/pipelined"
			}
			b.Run(name, func(b *testing.B) {
				rdb := newClient(b)
				l := newLimiter(b, rdb, Options{Mode: mode})
				ctx := context.Background()
				ops := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					p, err := l.Acquire(ctx, "page.example", 3)
					if err != nil {
						b.Fatal(err)
					}
					if pipelined {
						pipe := rdb.Pipeline()
						after := p.ReleaseOn(ctx, pipe)
						pipe.Incr(ctx, "bench:pages")
						pipe.Exec(ctx)
						err = after()
					} else {
						err = p.Release(ctx)
						rdb.Incr(ctx, "bench:pages")
					}
					if err != nil {
						b.Fatal(err)
					}
					ops = append(ops, time.Since(t0))
				}
				b.StopTimer()
				b.ReportMetric(float64(p50(ops).Microseconds()), "p50-µs")
			})
		}
	}
}
