package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
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
	Impolite       int // sites whose testserver.SiteStats.Violation is not empty
	RobotsFetches  int64
	RoundTrips     float64       // Redis round trips per page, robots.txt's excepted, counted by the crawler processes (0 for colly)
	RedisCPU       time.Duration // Redis CPU per page (INFO cpu)
	CPUMin, CPUMax time.Duration // the lowest and highest RedisCPU of the crawls the row is the median of
	MachineBusy    float64       // share of this machine's CPU time busy during the crawl
	HostSteal      float64       // share of this machine's CPU time the VM's host took during the crawl (steal)
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

// crawlModes are the semaphore modes utilisation crawls with, in row order.
var crawlModes = []string{"locked", "atomic"}

// utilisation makes the rows of procsList processes in each of crawlModes,
// each crawl made by crawl (the polite one: procs processes sharing the
// crawl, its workers split between them). Each row is
// the median of runs crawls, with their range: on a shared machine one
// crawl's figure moves by several points, and this VM's host slows it down
// for 20-30 s at a time. So the crawls go in rounds: every row's first
// crawl, then every row's second, and so on, before (if not nil) running
// at the start of each round; a slow stretch then costs a row at most one
// of its crawls, which its median leaves out, instead of all of them.
func utilisation(procsList []int, runs int, before func() error, crawl func(procs int, mode string) (CrawlRow, error)) ([]CrawlRow, error) {
	all, err := inRounds(procsList, runs, before, crawl)
	if err != nil {
		return nil, err
	}
	rows := make([]CrawlRow, 0, len(all))
	for _, crawls := range all {
		rows = append(rows, medianOf(crawls))
	}
	return rows, nil
}

// inRounds makes runs crawls of each row (procsList processes in each of
// crawlModes, in that order), in rounds as utilisation says, and returns
// each row's crawls.
func inRounds(procsList []int, runs int, before func() error, crawl func(procs int, mode string) (CrawlRow, error)) ([][]CrawlRow, error) {
	all := make([][]CrawlRow, len(procsList)*len(crawlModes))
	for range max(runs, 1) {
		if before != nil {
			if err := before(); err != nil {
				return nil, err
			}
		}
		for i, procs := range procsList {
			for j, mode := range crawlModes {
				row, err := crawl(procs, mode)
				if err != nil {
					return nil, err
				}
				k := i*len(crawlModes) + j
				all[k] = append(all[k], row)
			}
		}
	}
	return all, nil
}

// relateToColly sets every row's VsColly from the one-process colly-alone
// row among them, the in-process optimum that keeps the cap (colly in
// several processes fetches every page once per process: no reference).
func relateToColly(rows []CrawlRow) {
	i := collyRef(rows)
	if i < 0 || rows[i].Steady == 0 {
		return
	}
	for j := range rows {
		rows[j].VsColly = rows[j].Steady / rows[i].Steady
	}
}

// collyRef is the index of the one-process colly-alone row among rows, the
// reference of VsColly (-1: none).
func collyRef(rows []CrawlRow) int {
	return slices.IndexFunc(rows, func(r CrawlRow) bool { return r.Peer && r.Procs == 1 })
}

// perCore is what one Redis core could serve in a mode's crawls: its Redis
// CPU per page over all those rows (weighted by pages), and 1 s ÷ that.
type perCore struct {
	Mode     string
	CPU      time.Duration // Redis CPU per page
	PagesSec float64       // pages/s one Redis core would serve
}

// coreRate is the pages/s one Redis core serves at cpu a page (0 for no
// cost measured).
func coreRate(cpu time.Duration) float64 {
	if cpu <= 0 {
		return 0
	}
	return float64(time.Second) / float64(cpu)
}

// perCoreByMode computes perCore for each of crawlModes that has rows
// with pages and CPU measured.
func perCoreByMode(rows []CrawlRow) []perCore {
	var out []perCore
	for _, mode := range crawlModes {
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
			out = append(out, perCore{Mode: mode, CPU: per, PagesSec: coreRate(per)})
		}
	}
	return out
}

// medianOf is the crawl of all with the median utilisation, with the range
// of all and the worst of their safety figures.
func medianOf(all []CrawlRow) CrawlRow {
	return medianBy(all, func(r CrawlRow) float64 { return r.Util })
}

// medianBy is the crawl of all with the median key, with the range of
// all's utilisation and Redis CPU, and the worst of their safety figures.
func medianBy(all []CrawlRow, key func(CrawlRow) float64) CrawlRow {
	all = slices.Clone(all)
	slices.SortFunc(all, func(a, b CrawlRow) int { return cmp.Compare(key(a), key(b)) })
	m := all[len(all)/2]
	m.Runs = len(all)
	m.UtilMin, m.UtilMax, m.CPUMin, m.CPUMax = m.Util, m.Util, m.RedisCPU, m.RedisCPU
	for _, r := range all {
		m.UtilMin, m.UtilMax = min(m.UtilMin, r.Util), max(m.UtilMax, r.Util)
		m.CPUMin, m.CPUMax = min(m.CPUMin, r.RedisCPU), max(m.CPUMax, r.RedisCPU)
		m.MaxAtOnce, m.OverCap, m.Disallowed = max(m.MaxAtOnce, r.MaxAtOnce), max(m.OverCap, r.OverCap), max(m.Disallowed, r.Disallowed)
		m.Impolite = max(m.Impolite, r.Impolite)
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
		args := append(s.runArgs(crawlName, workers, "--redis", "redis://"+s.RedisAddr), "--semaphore", mode)
		return append(append(args, extra...), seeds...)
	})
	row.Mode = mode
	return row, err
}
