package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/polite-crawler/polite/testserver"
	"github.com/redis/go-redis/v9"
)

// crawl runs procs processes, each started with argv(seeds), against fresh
// sites and measures what the sites saw.
func (s CrawlSpec) crawl(ctx context.Context, name string, procs, workers int, argv func(seeds []string) []string) (CrawlRow, error) {
	ts, err := testserver.New(s.profile(), testserver.WithControl(""))
	if err != nil {
		return CrawlRow{}, err
	}
	if err := ts.Start(); err != nil {
		return CrawlRow{}, err
	}
	defer ts.Close()
	var seeds []string
	for _, site := range ts.Sites() {
		seeds = append(seeds, site.URL+"/")
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr})
	defer rdb.Close()
	cpu0, err := redisCPU(ctx, rdb)
	if err != nil {
		return CrawlRow{}, err
	}
	busy0, start := machineCPU(), time.Now()
	kids, err := startChildren(ctx, s.Exe, procs, func() []string { return argv(seeds) })
	if err != nil {
		return CrawlRow{}, err
	}
	samples := samplePages(ts, start, kids.done())
	if err := errors.Join(kids.errs...); err != nil {
		return CrawlRow{}, fmt.Errorf("bench: %s: %w", name, err)
	}
	row := CrawlRow{Name: name, Procs: procs, Workers: workers, Sites: s.Sites, Cap: siteCap, Seconds: time.Since(start).Seconds(),
		Ideal: float64(min(procs*workers, s.slots())) / s.Latency.Seconds()}
	cpu := machineCPU()
	row.MachineBusy, row.HostSteal = cpu.busySince(busy0), cpu.stealSince(busy0)
	row.addSites(ts.Stats().Sites)
	if t := steadySpan(samples, row.Pages); t > 0 {
		row.Steady = 0.8 * float64(row.Pages) / t.Seconds()
		row.Util = row.Steady / row.Ideal
	}
	if row.Pages > 0 {
		row.RoundTrips = float64(kids.trips()) / float64(row.Pages)
		if cpu1, err := redisCPU(ctx, rdb); err == nil {
			row.RedisCPU = (cpu1 - cpu0) / time.Duration(row.Pages)
		}
	}
	return row, nil
}

// addSites adds up what the test sites counted.
func (row *CrawlRow) addSites(sites []testserver.SiteStats) {
	for _, st := range sites {
		row.Pages += st.Pages
		row.Duplicates += st.DuplicateFetches
		row.MaxAtOnce = max(row.MaxAtOnce, st.MaxInFlight)
		row.OverCap += st.OverCap
		row.Disallowed += st.DisallowedHits
		row.RobotsFetches += st.RobotsFetches
		if st.Violation() != "" {
			row.Impolite++
		}
	}
}

// sample is the pages the sites had answered t into a crawl.
type sample struct {
	t     time.Duration
	pages int64
}

// samplePages counts the sites' pages every 25 ms until done is closed,
// and once more then.
func samplePages(ts *testserver.Server, start time.Time, done <-chan struct{}) []sample {
	var samples []sample
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-tick.C:
		}
		var pages int64
		for _, st := range ts.Stats().Sites {
			pages += st.Pages
		}
		samples = append(samples, sample{time.Since(start), pages})
	}
	return samples
}

// steadySpan is how long the crawl took from 10% to 90% of its pages
// (0 when the samples cannot tell).
func steadySpan(samples []sample, pages int64) time.Duration {
	var t10, t90 time.Duration
	for _, sm := range samples {
		if t10 == 0 && sm.pages >= pages/10 {
			t10 = sm.t
		}
		if t90 == 0 && sm.pages >= pages*9/10 {
			t90 = sm.t
		}
	}
	if t90 > t10 {
		return t90 - t10
	}
	return 0
}

// children are a crawl's worker processes. Each one's stderr is read to
// its end by a goroutine that ends with the process; errs and roundTrips
// are set once done is closed.
type children struct {
	wg         sync.WaitGroup
	errs       []error
	roundTrips []int64
}

// startChildren starts procs processes of exe with argv()'s arguments.
func startChildren(ctx context.Context, exe string, procs int, argv func() []string) (*children, error) {
	c := &children{errs: make([]error, procs), roundTrips: make([]int64, procs)}
	var started []*exec.Cmd
	for i := 0; i < procs; i++ {
		cmd := exec.CommandContext(ctx, exe, argv()...)
		stderr, err := cmd.StderrPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			// Leave none of those started running against sites the
			// caller is about to close.
			for _, s := range started {
				s.Process.Kill()
			}
			c.wg.Wait()
			return nil, err
		}
		started = append(started, cmd)
		c.wg.Go(func() {
			var tail []string
			c.roundTrips[i], tail = scanLog(stderr)
			if err := cmd.Wait(); err != nil {
				c.errs[i] = fmt.Errorf("%w; last lines: %s", err, strings.Join(tail, " | "))
			}
		})
	}
	return c, nil
}

// done is closed when every process has ended.
func (c *children) done() <-chan struct{} {
	d := make(chan struct{})
	go func() { c.wg.Wait(); close(d) }() // ends with the processes
	return d
}

// trips is the Redis round trips all the processes reported, robots.txt's
// excepted.
func (c *children) trips() int64 {
	var total int64
	for _, n := range c.roundTrips {
		total += n
	}
	return total
}

// finished is the figures a `crawler run` child reports in its last log
// record, which bench asks for as JSON (--log-format json).
type finished struct {
	Msg        string `json:"msg"`
	RoundTrips int64  `json:"redis_round_trips"`
	Robots     int64  `json:"redis_round_trips_robots"`
}

// scanLog reads a crawler run's log to its end: the Redis round trips its
// "crawl finished" record reports, less those for robots.txt (the goal
// excepts them), and its last few lines for errors.
func scanLog(r io.Reader) (trips int64, tail []string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec finished
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "crawl finished" {
			trips = rec.RoundTrips - rec.Robots
		}
		if tail = append(tail, sc.Text()); len(tail) > 5 {
			tail = tail[1:]
		}
	}
	io.Copy(io.Discard, r) // past a line too long to scan: the process must not block on a full pipe
	return trips, tail
}

// runArgs are the arguments every `crawler run` child of the bench starts
// with: target names its Redis ("--redis", URL or "--redis-cluster",
// addresses), crawl its crawl and key prefix, so no crawl finds another's
// robots.txt cached. Its log is JSON, for scanLog.
func (s CrawlSpec) runArgs(crawl string, workers int, target ...string) []string {
	return append(append([]string{"run"}, target...), "--crawl", crawl, "--prefix", crawl, "--workers", strconv.Itoa(workers),
		"--user-agent", s.UserAgent, "--progress", "1h", "--timeout", "30s", "--visibility", "1m", "--log-format", "json")
}

// redisCPU is the CPU time Redis has used (INFO cpu, user + system).
func redisCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	f, err := info(ctx, rdb, "cpu")
	if err != nil {
		return 0, err
	}
	var secs float64
	for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, err := strconv.ParseFloat(f[k], 64)
		if err != nil {
			return 0, fmt.Errorf("bench: INFO cpu %s: %w", k, err)
		}
		secs += v
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// cpuTimes is the machine's CPU time so far (/proc/stat): busy, taken by
// the VM's host (steal, counted in busy too) and all, in its ticks; the
// context switches made since boot (ctxt); how many CPUs it counts
// (cores); and when they were read (at).
type cpuTimes struct {
	busy, steal, total float64
	ctxt               float64
	cores              int
	at                 time.Time
}

func machineCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	t := parseStat(b)
	t.at = time.Now()
	return t
}

// parseStat reads /proc/stat's text b: the first line's times ("cpu" then
// user … steal; guest time is already in user), the CPUs (the cpuN lines)
// and the context switches (ctxt). What b lacks stays 0.
func parseStat(b []byte) cpuTimes {
	var t cpuTimes
	for i, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
		case i == 0 && f[0] == "cpu":
			for k, v := range f[1:min(len(f), 9)] {
				n, _ := strconv.ParseFloat(v, 64)
				t.total += n
				if k != 3 && k != 4 { // idle, iowait
					t.busy += n
				}
				if k == 7 {
					t.steal += n
				}
			}
		case len(f[0]) > 3 && strings.HasPrefix(f[0], "cpu") && f[0][3] >= '0' && f[0][3] <= '9':
			t.cores++
		case f[0] == "ctxt" && len(f) > 1:
			t.ctxt, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	return t
}

// busySince is the share of CPU time busy since t0 (0 when unknown).
func (t cpuTimes) busySince(t0 cpuTimes) float64 {
	if t.total <= t0.total {
		return 0
	}
	return (t.busy - t0.busy) / (t.total - t0.total)
}

// stealSince is the share of CPU time the VM's host took since t0 (0 on a
// machine that is no VM; stealUnknown when /proc/stat could not tell).
func (t cpuTimes) stealSince(t0 cpuTimes) float64 {
	if t.total <= t0.total {
		return stealUnknown
	}
	return (t.steal - t0.steal) / (t.total - t0.total)
}

// spent is what the machine spent from t0 to t, on every core and for
// every process: CPU time (its busy share of the wall time, the host's
// steal left out, times its CPUs), ok false when /proc/stat could not
// tell; and context switches, 0 when it could not tell them.
func (t cpuTimes) spent(t0 cpuTimes) (cpu time.Duration, switches float64, ok bool) {
	if t.ctxt > t0.ctxt && t0.ctxt > 0 {
		switches = t.ctxt - t0.ctxt
	}
	if t.total <= t0.total || !t.at.After(t0.at) || t.cores < 1 {
		return 0, switches, false
	}
	share := t.busySince(t0) - t.stealSince(t0) // the host's steal left out
	return time.Duration(share * float64(t.cores) * float64(t.at.Sub(t0.at))), switches, true
}

// stealUnknown is a steal share /proc/stat could not give.
const stealUnknown = -1.0

// hostTookMuch is the steal share above which a row's speed says more about
// the VM's host than about what it measures: the report marks such rows.
const hostTookMuch = 0.02

// hostNote is a verdict's remark on the host's share of the CPU during a
// measurement (steal, of the measurement named own) and during the one it
// is divided by (ref, named what; stealUnknown when none): empty unless one
// of them is above hostTookMuch.
func hostNote(steal float64, own string, ref float64, what string) string {
	switch {
	case steal > hostTookMuch && ref > hostTookMuch:
		return fmt.Sprintf(" (the host took %.1f %% of the CPU in %s, %.1f %% in %s)", 100*steal, own, 100*ref, what)
	case steal > hostTookMuch:
		return fmt.Sprintf(" (the host took %.1f %% of the CPU in %s)", 100*steal, own)
	case ref > hostTookMuch:
		return fmt.Sprintf(" (the host took %.1f %% of the CPU in %s)", 100*ref, what)
	}
	return ""
}
