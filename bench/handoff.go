package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/testserver"
	"github.com/redis/go-redis/v9"
)

// HandoffRow is one algorithm on a hot site: many waiters in several
// processes, each holding its permit for one real request to a test site
// that counts requests in flight.
type HandoffRow struct {
	Alg          string
	Grants       int64
	PerSec       float64
	Hold         time.Duration // mean request time under a permit (the real hold)
	PctNominal   float64       // PerSec / (limit / nominal hold)
	PctOfHolds   float64       // PerSec / (limit / Hold): share of slot time used
	Jain         float64       // fairness of grants across all waiters (1 = equal)
	MaxAtOnce    int64         // most requests in flight at the server
	OverCapStart int64         // requests that started with limit already in flight
}

// HotSiteSpec says how to run the hot-site figure.
type HotSiteSpec struct {
	Exe                   string // the crawler binary, run as `bench-worker` per process
	RedisAddr             string
	Procs, WaitersPerProc int
	Limit                 int
	Hold, Duration        time.Duration
}

// HotSite runs every algorithm on one site through spec.Procs processes.
func HotSite(ctx context.Context, spec HotSiteSpec) ([]HandoffRow, error) {
	var rows []HandoffRow
	for i, alg := range Algorithms {
		// One test site of one page that takes Hold to answer; it counts
		// requests in flight against Limit.
		ts, err := testserver.New(testserver.Profile{Name: "bench-hot", Seed: 1, DefaultCap: spec.Limit,
			Sites: []testserver.SiteSpec{{Pages: 1, Latency: testserver.Duration(spec.Hold), PageBytes: 64}}}, testserver.WithControl(""))
		if err == nil {
			err = ts.Start()
		}
		if err != nil {
			return nil, fmt.Errorf("bench: hot site: %w", err)
		}
		results := make([]workerResult, spec.Procs)
		errs := make([]error, spec.Procs)
		var wg sync.WaitGroup
		for p := 0; p < spec.Procs; p++ {
			cmd := exec.CommandContext(ctx, spec.Exe, "bench-worker", "--redis", spec.RedisAddr, "--alg", alg,
				"--prefix", fmt.Sprintf("bench:h%d", i), "--url", ts.Sites()[0].URL+"/p/0",
				"--waiters", strconv.Itoa(spec.WaitersPerProc), "--limit", strconv.Itoa(spec.Limit), "--duration", spec.Duration.String())
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := cmd.Output()
				if err == nil {
					err = json.Unmarshal(out, &results[p])
				}
				errs[p] = err
			}()
		}
		wg.Wait()
		st := ts.Stats().Sites[0]
		ts.Close()
		var grants []int64
		var total, holdNs int64
		var secs float64
		for p, r := range results {
			if errs[p] != nil {
				return nil, fmt.Errorf("bench: %s worker %d: %w", alg, p, errs[p])
			}
			for _, g := range r.Grants {
				grants = append(grants, g)
				total += g
			}
			holdNs += r.HoldNs
			secs = max(secs, r.Seconds)
		}
		row := HandoffRow{Alg: alg, Grants: total, MaxAtOnce: int64(st.MaxInFlight), OverCapStart: st.OverCap, Jain: jain(grants)}
		if total > 0 && secs > 0 {
			row.PerSec = float64(total) / secs
			row.Hold = time.Duration(holdNs / total)
			row.PctNominal = 100 * row.PerSec * spec.Hold.Seconds() / float64(spec.Limit)
			row.PctOfHolds = 100 * row.PerSec * row.Hold.Seconds() / float64(spec.Limit)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²).
func jain(xs []int64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

type workerResult struct {
	Grants  []int64 `json:"grants"`
	HoldNs  int64   `json:"hold_ns"`
	Seconds float64 `json:"seconds"`
}

// Worker is one hot-site process (crawler bench-worker): waiters goroutines
// each take a permit of alg, make one request to url under it, give it back,
// until duration ends; it writes its counts as JSON to out.
func Worker(ctx context.Context, redisAddr, alg, prefix, url string, waiters, limit int, duration time.Duration, out io.Writer) error {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: waiters + 4})
	defer rdb.Close()
	h, err := newHolder(rdb, alg, prefix, limit)
	if err != nil {
		return err
	}
	defer h.close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: waiters}, Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	res := workerResult{Grants: make([]int64, waiters)}
	var holdNs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < waiters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				rel, err := h.acquire(ctx, "hot.example")
				if err != nil {
					return
				}
				t0 := time.Now()
				if resp, err := client.Get(url); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				holdNs.Add(int64(time.Since(t0)))
				rel()
				res.Grants[w]++
			}
		}()
	}
	wg.Wait()
	res.HoldNs, res.Seconds = holdNs.Load(), time.Since(start).Seconds()
	return json.NewEncoder(out).Encode(res)
}
