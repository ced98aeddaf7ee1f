package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
	"github.com/redis/go-redis/v9"
)

// CrawlRow is one crawl of uniform sites, measured at the test server.
type CrawlRow struct {
	Name           string
	Peer           bool   // colly alone: a peer measured for comparison, not ours (no goals, no safety verdict)
	Mode           string // semaphore mode of a polite crawl ("locked", "atomic"); "" for colly
	Procs, Workers int    // processes, and workers per process
	Sites, Cap     int
	Pages          int64 // pages answered 200, duplicates included
	Duplicates     int64 // pages fetched again
	Seconds        float64
	Steady         float64 // pages/s between 10% and 90% of the pages
	Ideal          float64 // min(all workers, Σ cap) ÷ page latency
	Util           float64 // Steady ÷ Ideal
	VsColly        float64 // Steady ÷ colly alone's (1 process) in the same run; 0 when unknown
	Runs           int     // crawls made of this row; the median by Util is shown
	UtilMin        float64 // the lowest and highest Util of those crawls
	UtilMax        float64
	MaxAtOnce      int   // most requests in flight at any one site
	OverCap        int64 // requests that started with the cap already in flight, all sites
	Disallowed     int64
	RobotsFetches  int64
	RoundTrips     float64       // Redis round trips per page, robots.txt's excepted, counted by the crawler processes (0 for colly)
	RedisCPU       time.Duration // Redis CPU per page (INFO cpu)
	MachineBusy    float64       // share of this machine's CPU time busy during the crawl
}

// CrawlSpec sizes a crawl.
type CrawlSpec struct {
	Exe       string
	RedisAddr string
	UserAgent string
	Sites     int
	Pages     int           // per site
	Latency   time.Duration // per page
}

// siteCap is what every uniform site allows at once.
const siteCap = 3

// slots is how many requests the sites allow at once, all together.
func (s CrawlSpec) slots() int { return s.Sites * siteCap }

// workers is how many workers the crawl section's crawls have in all: one
// per slot, and 12 spare so that no slot waits for a worker.
func (s CrawlSpec) workers() int { return s.slots() + 12 }

// keptCap reports whether no site saw more than its cap at once, nor a
// request start with the cap already in flight.
func (x CrawlRow) keptCap() bool {
	return x.MaxAtOnce <= x.Cap && goals.overCap.met(float64(x.OverCap))
}

func (s CrawlSpec) profile() testserver.Profile {
	p := testserver.Profile{Name: "bench-uniform", Seed: 7, Agent: robots.ProductToken(s.UserAgent)}
	for i := 0; i < s.Sites; i++ {
		p.Sites = append(p.Sites, testserver.SiteSpec{Pages: s.Pages, Links: 6, Latency: testserver.Duration(s.Latency),
			PageBytes: 2 << 10, Robots: testserver.Robots{Disallow: []string{"/private/"}}})
	}
	return p
}

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
	busy0 := machineCPU()

	var wg sync.WaitGroup
	errs := make([]error, procs)
	trips := make([]int64, procs)
	start := time.Now()
	for i := 0; i < procs; i++ {
		cmd := exec.CommandContext(ctx, s.Exe, argv(seeds)...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return CrawlRow{}, err
		}
		if err := cmd.Start(); err != nil {
			return CrawlRow{}, err
		}
		wg.Add(1)
		go func() { // owned by crawl: ends when the process does
			defer wg.Done()
			var tail []string
			trips[i], tail = scanLog(stderr)
			if err := cmd.Wait(); err != nil {
				errs[i] = fmt.Errorf("%w; last lines: %s", err, strings.Join(tail, " | "))
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }() // ends with the processes
	type sample struct {
		t     time.Duration
		pages int64
	}
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
	if err := errors.Join(errs...); err != nil {
		return CrawlRow{}, fmt.Errorf("bench: %s: %w", name, err)
	}
	row := CrawlRow{Name: name, Procs: procs, Workers: workers, Sites: s.Sites, Cap: siteCap, Seconds: time.Since(start).Seconds(),
		Ideal: float64(min(procs*workers, s.slots())) / s.Latency.Seconds(), MachineBusy: machineCPU().busySince(busy0)}
	for _, st := range ts.Stats().Sites {
		row.Pages += st.Pages
		row.Duplicates += st.DuplicateFetches
		row.MaxAtOnce = max(row.MaxAtOnce, st.MaxInFlight)
		row.OverCap += st.OverCap
		row.Disallowed += st.DisallowedHits
		row.RobotsFetches += st.RobotsFetches
	}
	var t10, t90 time.Duration
	for _, sm := range samples {
		if t10 == 0 && sm.pages >= row.Pages/10 {
			t10 = sm.t
		}
		if t90 == 0 && sm.pages >= row.Pages*9/10 {
			t90 = sm.t
		}
	}
	if t90 > t10 {
		row.Steady = 0.8 * float64(row.Pages) / (t90 - t10).Seconds()
		row.Util = row.Steady / row.Ideal
	}
	if row.Pages > 0 {
		var total int64
		for _, n := range trips {
			total += n
		}
		row.RoundTrips = float64(total) / float64(row.Pages)
		if cpu1, err := redisCPU(ctx, rdb); err == nil {
			row.RedisCPU = (cpu1 - cpu0) / time.Duration(row.Pages)
		}
	}
	return row, nil
}

// scanLog reads a crawler run's log to its end: the Redis round trips its
// "crawl finished" record reports, less those for robots.txt (the goal
// excepts them), and its last few lines for errors.
func scanLog(r interface{ Read([]byte) (int, error) }) (trips int64, tail []string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg        string `json:"msg"`
			RoundTrips int64  `json:"redis_round_trips"`
			Robots     int64  `json:"redis_round_trips_robots"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "crawl finished" {
			trips = rec.RoundTrips - rec.Robots
		}
		if tail = append(tail, sc.Text()); len(tail) > 5 {
			tail = tail[1:]
		}
	}
	return trips, tail
}

// CrawlModes are the semaphore modes Utilisation crawls with, in row order.
var CrawlModes = []string{"locked", "atomic"}

// Utilisation crawls the sites with each of procsList processes sharing one
// crawl, totalWorkers split between them, in each of CrawlModes (both modes
// of one process count next to each other, so drift on the machine hits
// them alike). Each row is the median of runs crawls, with their range: on
// a shared machine one crawl's figure moves by several points.
func Utilisation(ctx context.Context, s CrawlSpec, procsList []int, totalWorkers, runs int) ([]CrawlRow, error) {
	var rows []CrawlRow
	for _, procs := range procsList {
		for _, mode := range CrawlModes {
			row, err := median(runs, func() (CrawlRow, error) {
				return s.polite(ctx, fmt.Sprintf("polite %s, %d process(es)", mode, procs), mode, procs, (totalWorkers+procs-1)/procs)
			})
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// relateToColly sets every row's VsColly from the one-process colly-alone
// row among them, the in-process optimum that keeps the cap (colly in
// several processes fetches every page once per process: no reference).
func relateToColly(rows []CrawlRow) {
	i := slices.IndexFunc(rows, func(r CrawlRow) bool { return r.Peer && r.Procs == 1 })
	if i < 0 || rows[i].Steady == 0 {
		return
	}
	for j := range rows {
		rows[j].VsColly = rows[j].Steady / rows[i].Steady
	}
}

// PerCore is what one Redis core could serve in a mode's crawls: its Redis
// CPU per page over all those rows (weighted by pages), and 1 s ÷ that.
type PerCore struct {
	Mode     string
	CPU      time.Duration // Redis CPU per page
	PagesSec float64       // pages/s one Redis core would serve
}

// PerCoreByMode computes PerCore for each of CrawlModes that has rows
// with pages and CPU measured.
func PerCoreByMode(rows []CrawlRow) []PerCore {
	var out []PerCore
	for _, mode := range CrawlModes {
		var cpu time.Duration
		var pages int64
		for _, r := range rows {
			if r.Mode == mode && !r.Peer {
				cpu += r.RedisCPU * time.Duration(r.Pages)
				pages += r.Pages
			}
		}
		if pages > 0 && cpu > 0 {
			per := cpu / time.Duration(pages)
			out = append(out, PerCore{Mode: mode, CPU: per, PagesSec: float64(time.Second) / float64(per)})
		}
	}
	return out
}

// median makes runs crawls and returns the one of median utilisation, with
// the range of all and the worst safety figures of any.
func median(runs int, crawl func() (CrawlRow, error)) (CrawlRow, error) {
	var all []CrawlRow
	for i := 0; i < max(runs, 1); i++ {
		row, err := crawl()
		if err != nil {
			return CrawlRow{}, err
		}
		all = append(all, row)
	}
	return medianOf(all), nil
}

// medianOf is the crawl of all with the median utilisation, with the range
// of all and the worst of their safety figures.
func medianOf(all []CrawlRow) CrawlRow {
	all = slices.Clone(all)
	slices.SortFunc(all, func(a, b CrawlRow) int { return cmp.Compare(a.Util, b.Util) })
	m := all[len(all)/2]
	m.Runs, m.UtilMin, m.UtilMax = len(all), all[0].Util, all[len(all)-1].Util
	for _, r := range all {
		m.MaxAtOnce, m.OverCap, m.Disallowed = max(m.MaxAtOnce, r.MaxAtOnce), max(m.OverCap, r.OverCap), max(m.Disallowed, r.Disallowed)
	}
	return m
}

// polite crawls the sites with procs `crawler run` processes of workers
// each, on one shared crawl whose keys are its own (so no crawl finds
// another's robots.txt cached).
func (s CrawlSpec) polite(ctx context.Context, name, mode string, procs, workers int) (CrawlRow, error) {
	return s.politeArgs(ctx, name, mode, procs, workers)
}

// politeArgs is polite with extra flags for `crawler run`.
func (s CrawlSpec) politeArgs(ctx context.Context, name, mode string, procs, workers int, extra ...string) (CrawlRow, error) {
	crawlName := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	row, err := s.crawl(ctx, name, procs, workers, func(seeds []string) []string {
		args := append([]string{"run", "--redis", "redis://" + s.RedisAddr, "--crawl", crawlName, "--prefix", crawlName,
			"--semaphore", mode, "--workers", strconv.Itoa(workers), "--user-agent", s.UserAgent, "--progress", "1h",
			"--timeout", "30s", "--visibility", "1m"}, extra...)
		return append(args, seeds...)
	})
	row.Mode = mode
	return row, err
}

// CollyAlone crawls the sites with colly and nothing else, at most 3
// requests at once per site, in procs independent processes.
func CollyAlone(ctx context.Context, s CrawlSpec, procs int) (CrawlRow, error) {
	row, err := s.crawl(ctx, fmt.Sprintf("colly alone, %d process(es)", procs), procs, s.slots(), func(seeds []string) []string {
		return append([]string{"bench-colly", "--user-agent", s.UserAgent}, seeds...)
	})
	row.Peer = true
	return row, err
}

// CollyWorker is one colly-alone process (crawler bench-colly --user-agent
// UA SEED...): it crawls from the seeds within their hosts, at most 3
// requests at a time per host (a LimitRule per host: one rule's Parallelism
// is shared by every host it matches), honouring robots.txt the colly way.
func CollyWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("crawler bench-colly", flag.ContinueOnError)
	ua := fs.String("user-agent", "politebot/0.1", "User-Agent")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var hosts []string
	var rules []*colly.LimitRule
	for _, s := range fs.Args() {
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("bench: seed %q: %w", s, err)
		}
		hosts = append(hosts, u.Hostname())
		rules = append(rules, &colly.LimitRule{DomainGlob: u.Host, Parallelism: siteCap})
	}
	c := colly.NewCollector(colly.Async(true), colly.AllowedDomains(hosts...), colly.StdlibContext(ctx), colly.UserAgent(*ua))
	c.IgnoreRobotsTxt = false
	if err := c.Limits(rules); err != nil {
		return err
	}
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	for _, s := range fs.Args() {
		c.Visit(s)
	}
	c.Wait()
	return nil
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

// cpuTimes is the machine's CPU time so far (/proc/stat), busy and all.
type cpuTimes struct{ busy, total float64 }

func machineCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var t cpuTimes
	for i, v := range f[1:min(len(f), 9)] { // user … steal; guest time is already in user
		n, _ := strconv.ParseFloat(v, 64)
		t.total += n
		if i != 3 && i != 4 { // idle, iowait
			t.busy += n
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
