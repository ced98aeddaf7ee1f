package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ChartsDir is where Write puts the SVG charts, inside its dir.
const ChartsDir = "bench-charts"

// Write puts BENCHMARKS.md in dir and its SVG charts in dir/bench-charts,
// replacing any there, with a verdict per goal the run can judge ("Goals at
// a glance"). It returns the first error creating or writing a file.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, ChartsDir), 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for name, svg := range r.charts() {
		if err := os.WriteFile(filepath.Join(dir, ChartsDir, name), []byte(svg), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	var b strings.Builder
	r.markdown(&b)
	if err := os.WriteFile(filepath.Join(dir, "BENCHMARKS.md"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// charts are the report's SVGs by file name, for the sections that ran.
func (r *Report) markdown(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	quick := ""
	if r.Quick {
		quick = " (--quick: small counts, for smoke only; do not quote these figures)"
	}
	p("# Benchmarks")
	p("")
	p("Measured by `%s` on %s, in %s%s. Every figure comes from this one run. Times are noisy on a", r.Command, r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Took.Round(time.Second), quick)
	p("%s, so each is also given as a ratio to a baseline measured in the same run. Safety figures are counted", r.machineName())
	p("at HTTP servers, never taken from the limiter's bookkeeping.")
	p("")
	keys := make([]string, 0, len(r.Machine))
	for k := range r.Machine {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p("| machine | |")
	p("|---|---|")
	for _, k := range keys {
		p("| %s | %s |", k, r.Machine[k])
	}
	p("")
	p("Redis, the test sites and every worker process share this machine and its CPUs (but for the crawls of \"Redis on a CPU of its own\", which give Redis one of them alone). Redis is a private redis-server on loopback; worker processes are this binary (`crawler bench-worker`, `crawler run`, `crawler bench-colly`). \"The book\" is a faithful port of Redis in Action 6.3 (`internal/riabook`): the worker's own clock, polling every 1 ms, as its callers must.")
	p("")
	r.goalsSection(p)
	r.limiterSection(p)
	r.burstSection(p)
	r.hotSiteSection(p)
	r.crawlSection(p)
	r.scaleSection(p)
	r.clusterSection(p)
	r.adaptiveSection(p)
	r.robotsSection(p)
}

func (r *Report) limiterSection(p func(string, ...any)) {
	if len(r.Uncontended) > 0 {
		p("## Limiter: uncontended acquire + release")
		p("")
		p("One site, one client. The physical limit is two round trips (acquire, release), so the baseline is two PINGs, measured twice on the same client: interleaved (two PINGs before each pair, so they meet the connection as the pair leaves it) and back-to-back (pairs of PINGs in a tight loop, nothing else on the connection: usually the faster of the two, but not always on this VM, whose round trips slow down when its cores go idle between them). The pairs go in %d blocks, each followed by as many pairs of PINGs back to back, and \"p50 ÷ back-to-back\" is the median of the blocks' ratios (each block's pairs against its own PINGs): this VM's round trips change speed severalfold when its cores change how they idle, and PINGs timed after all the pairs could meet another such state (one run's locked row read 12.8×, its PINGs 32 µs against 247-262 µs for every other row's). So the back-to-back column is all the blocks' PINGs pooled, and the ratio beside it is not the p50 column divided by it. The goals judge by the higher of the two ratios, the stricter.", uncontendedBlocks)
		p("")
		p("![latency](%s/latency.svg)", ChartsDir)
		p("")
		p("| algorithm | p50 | p99 | 2×PING interleaved p50 | p50 ÷ interleaved | 2×PING back-to-back p50 | p50 ÷ back-to-back | round trips / pair | commands Redis ran / pair |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.Uncontended {
			p("| %s | %s | %s | %s | %.2f× | %s | **%.2f×** | %.1f | %.1f |", x.Alg, us(x.P50), us(x.P99), us(x.TwoPingP50), x.Ratio, us(x.BackToBack), x.RatioB2B, x.RoundTrips, x.Commands)
		}
		p("")
		p("Goals, by the stricter of the two ratios: atomic %s, locked %s. Commands inside Lua scripts count one by one in Redis's statistics, the script call too.", goals.uncontended[AlgAtomic].short(), goals.uncontended[AlgLocked].short())
		p("")
	}
	if len(r.Throughput) > 0 {
		p("## Limiter: throughput, 64 goroutines over 1000 sites")
		p("")
		p("![throughput](%s/throughput.svg)", ChartsDir)
		p("")
		p("| operation | per second | ÷ PINGs/s | ÷ book lock-guarded | Redis CPU / operation |")
		p("|---|---:|---:|---:|---:|")
		for _, x := range r.Throughput {
			p("| %s | %.0f | %.3f | **%.2f×** | %.1f µs |", x.Alg, x.PerSec, x.VsPing, x.VsBook, float64(x.RedisCPU)/float64(time.Microsecond))
		}
		p("")
		p("Goals: atomic %s and locked %s the book's lock-guarded semaphore. The book's unlocked semaphore is left out: it is not safe (see the hot site). Redis CPU is `used_cpu_user + used_cpu_sys` over the run ÷ operations. Client and server share %s here, so a round trip saved on the client side frees CPU for Redis too.",
			goals.throughput[AlgAtomic].short(), goals.throughput[AlgLocked].short(), r.cores())
		p("")
	}
	if f := r.Footprint; f != nil {
		p("## Limiter: Redis footprint")
		p("")
		p("- memory per active site (one permit held, 1000 sites): **%.0f bytes**", f.BytesPerActiveSite)
		p("- keys left %s after those sites went idle (the key TTL is 3 leases): **%d** (goal %s)", f.IdleWait.Round(100*time.Millisecond), f.KeysLeftAfterIdle, goals.keysLeft.short())
		p("")
	}
}

func (r *Report) hotSiteSection(p func(string, ...any)) {
	if len(r.HotSite) == 0 {
		return
	}
	s := r.HotSpec
	p("## Limiter: hand-off and safety on a hot site")
	p("")
	rounds := "."
	if n := s.rounds(); n > 1 {
		rounds = fmt.Sprintf(", in %d rounds: each round gives every algorithm a turn of %s, in the table's order, so that a drift of the machine over the section hits every row alike; a row adds up its turns.",
			n, s.Duration/time.Duration(n))
	}
	p("%d processes × %d waiters on one site, limit %d. Each grant holds its permit for one HTTP request that the server keeps open %s; the server counts requests in flight. %s per algorithm%s",
		s.Procs, s.WaitersPerProc, s.Limit, s.Hold, s.Duration, rounds)
	p("")
	p("![hand-off](%s/handoff.svg)", ChartsDir)
	p("")
	p("| algorithm | grants/s | ÷ token list | real hold | %% of nominal %.0f/s | %% of slot time used | hand-off gap | release p50 | machine CPU a grant | switches a grant | Jain fairness | most at once (cap %d) | starts over cap | host took |", float64(s.Limit)/s.Hold.Seconds(), s.Limit)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.HotSite {
		mark := ""
		if x.MaxAtOnce > int64(s.Limit) {
			mark = " ⚠"
		}
		switches := "–"
		if x.Switches > 0 {
			switches = fmt.Sprintf("%.1f", x.Switches)
		}
		p("| %s | %.0f | **%.3f×** | %s | %.1f%% | %.1f%% | %s | %s | %s | %s | %.3f | %d%s | %d | %s |", x.Alg, x.PerSec, x.VsTokens, us(x.Hold), x.PctNominal, x.PctOfHolds,
			usOrDash(x.Gap), usOrDash(x.ReleaseP50), usOrDash(x.MachineCPU), switches, x.Jain, x.MaxAtOnce, mark, x.OverCapStart, hostTook(x.HostSteal))
	}
	p("")
	p("The token list is the physical anchor: the fastest hand-off Redis can do. The site's key is a list of exactly %d tokens, made fresh for the run; a waiter takes one with `BLPOP` (the server queues blocked callers first come, first served, and hands a pushed token straight to the first) and gives it back with `RPUSH`: one round trip each way and no leases, so it is not crash-safe (a holder that dies takes its token with it) and no crawler should use it. It runs with the same processes, waiters, holds and counting server as the other rows. Goals for ours: %s its grants/s and fairness (Jain, across all %d waiters) %s.",
		s.Limit, goals.vsTokens.short(), s.Procs*s.WaitersPerProc, goals.jain.short())
	p("")
	p("\"Hand-off gap\" is what a grant costs its slot besides its request: %d ÷ grants/s − real hold, the mean time on a slot from one holder's request ending to the next holder's request starting. For the token list and ours that holds the holder's release reaching Redis and running there, Redis granting the next waiter (the `RPUSH` answering a `BLPOP`; our release script publishing a wake-up, or its answer carrying the grant when the waiter is in the releaser's own process), and the grant reaching that waiter and its goroutine running; the book's waiters poll every 1 ms instead. \"Release p50\" is the median time of the holder's release call, from the call to its return. It is not the gap's share: the release's answer goes back to the holder while the grant goes on to the waiter.", s.Limit)
	p("")
	p("\"Machine CPU\" and \"switches\" are what the whole machine spent a grant from a turn's common start to its workers' end, every process on it included (Redis, the workers, the test server, the bench, anything else running): CPU time (its busy share in /proc/stat, the host's steal left out, times its CPUs and the wall time) and context switches (/proc/stat's `ctxt`). Each is the machine's rate over grants/s, so a row that grants less at the same load shows more a grant. Besides round trips, the rows' hand-offs differ in how a waiter is woken: a token-list waiter is woken by its own connection's answer, in the round trip that queued it; ours queues in a round trip of its own (in locked mode through its process's gate) and, unless the releaser is in its own process, is woken by its process's pub/sub connection, which hands the grant to the waiting goroutine.")
	p("")
	p("\"–\": for the gap, a row that let the site see more than %d at once (it had no %d slots to tell a gap of); in the other columns, not measured.", s.Limit, s.Limit)
	p("")
	p("\"Slot time used\" divides by the holds as they really lasted (the server's %s sleep plus the request itself); \"nominal\" assumes exactly %s. The book's unlocked semaphore shows what the lock buys: under contention it lets the site see more than its cap; ours never may. \"Host took\" is the share of the machine's CPU time the VM's host took for itself during a row's turns (steal, in /proc/stat); above %.0f%% (⚠) the row's rate says more about the host than about the hand-off.", s.Hold, s.Hold, 100*hostTookMuch)
	p("")
}

// usOrDash is us(d), or "–" for 0 (not measured, or nothing to tell).
func usOrDash(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return us(d)
}

func us(d time.Duration) string {
	if d >= time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d µs", d.Microseconds())
}

// cores is the machine's cores as measured: "2 cores", or "this machine's
// cores" when they were not.
func (r *Report) cores() string {
	if c := r.Machine["cores"]; c != "" {
		return c + " cores"
	}
	return "this machine's cores"
}

// machineName is the machine as measured: "shared 2-core machine".
func (r *Report) machineName() string {
	if c := r.Machine["cores"]; c != "" {
		return "shared " + c + "-core machine"
	}
	return "shared machine"
}
