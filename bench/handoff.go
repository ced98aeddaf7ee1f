package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
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
	VsTokens     float64       // PerSec ÷ the token list's grants/s in the same run (0 when it did not run)
	Gap          time.Duration // slot time a grant spent outside its request: Limit ÷ PerSec − Hold (0: none to tell)
	ReleaseP50   time.Duration // median time of the holder's release call (0: not measured)
	MachineCPU   time.Duration // CPU time the whole machine spent a grant over the turns, every process included (0: unknown)
	Switches     float64       // context switches the whole machine made a grant over the turns (0: unknown)
	MaxAtOnce    int64         // most requests in flight at the server
	OverCapStart int64         // requests that started with limit already in flight
	HostSteal    float64       // share of the machine's CPU time the VM's host took during its turns (steal)
}

// keptCap reports whether the hot site never had more than limit requests
// in flight, nor one start with limit already in flight.
func (x HandoffRow) keptCap(limit int) bool {
	return x.MaxAtOnce <= int64(limit) && x.OverCapStart == 0
}

// HotSiteSpec says how to run the hot-site figure.
type HotSiteSpec struct {
	Exe                   string // the crawler binary, run as `bench-worker` per process
	RedisAddr             string
	Procs, WaitersPerProc int
	Limit                 int
	Hold, Duration        time.Duration // Duration: each algorithm's, over all rounds
	// Rounds splits each algorithm's Duration into turns taken by every
	// algorithm in order, round after round (0 or 1: one turn each), so
	// that a drift of the machine over the section hits every row alike.
	Rounds int
}

// rounds is how many turns each algorithm gets (Rounds, at least one).
func (spec HotSiteSpec) rounds() int { return max(spec.Rounds, 1) }

// hotSiteAlgorithms are the hot site's rows in report order: the token
// list, the physical anchor, first.
var hotSiteAlgorithms = append([]string{AlgTokenList}, algorithms...)

// hotSite is the site every hot-site waiter takes permits of.
const hotSite = "hot.example"

// hotTurn is one algorithm's turn on the hot site: its workers' figures
// and what the server counted.
type hotTurn struct {
	results      []workerResult
	maxAtOnce    int64
	overCapStart int64
	cpu0, cpu1   cpuTimes // the machine's CPU times before and after the turn's workers
}

// measureHotSite runs every algorithm of hotSiteAlgorithms on one site through
// spec.Procs processes, one after the other, in spec.Rounds rounds, adds
// up each algorithm's turns and relates each row's grants/s to the token
// list's.
func measureHotSite(ctx context.Context, spec HotSiteSpec) ([]HandoffRow, error) {
	rdb := redis.NewClient(&redis.Options{Addr: spec.RedisAddr})
	defer rdb.Close()
	rounds := spec.rounds()
	turn := spec
	turn.Duration = spec.Duration / time.Duration(rounds)
	turns := make([][]hotTurn, len(hotSiteAlgorithms))
	for r := 0; r < rounds; r++ {
		for i, alg := range hotSiteAlgorithms {
			// Keys of their own each turn: a book's lock left by the
			// last turn's workers, stopped holding it, would bar this
			// one's until it timed out.
			t, err := turn.turn(ctx, rdb, fmt.Sprintf("bench:h%d:%d", i, r), alg)
			if err != nil {
				return nil, err
			}
			turns[i] = append(turns[i], t)
		}
	}
	var rows []HandoffRow
	for i, alg := range hotSiteAlgorithms {
		rows = append(rows, spec.handoffRow(alg, turns[i]))
	}
	relateToTokens(rows)
	return rows, nil
}

// turn runs alg's waiters for spec.Duration, with keys under prefix,
// against a test site of one page that takes Hold to answer and counts
// requests in flight.
func (spec HotSiteSpec) turn(ctx context.Context, rdb *redis.Client, prefix, alg string) (hotTurn, error) {
	if alg == AlgTokenList { // a fresh list of exactly Limit tokens, whatever an earlier run left
		prefix = fmt.Sprintf("%s:%d", prefix, time.Now().UnixNano())
		if err := fillTokens(ctx, rdb, prefix, hotSite, spec.Limit, spec.Duration+time.Minute); err != nil {
			return hotTurn{}, err
		}
	}
	ts, err := testserver.New(testserver.Profile{Name: "bench-hot", Seed: 1, DefaultCap: spec.Limit,
		Sites: []testserver.SiteSpec{{Pages: 1, Latency: testserver.Duration(spec.Hold), PageBytes: 64}}}, testserver.WithControl(""))
	if err == nil {
		err = ts.Start()
	}
	if err != nil {
		return hotTurn{}, fmt.Errorf("bench: hot site: %w", err)
	}
	// The machine's times from the workers' common start (not their
	// launch) to their end.
	results, errs, cpu0 := spec.runWorkers(ctx, alg, prefix, ts.Sites()[0].URL+"/p/0")
	cpu1 := machineCPU()
	st := ts.Stats().Sites[0]
	ts.Close()
	for p, err := range errs {
		if err != nil {
			return hotTurn{}, fmt.Errorf("bench: %s worker %d: %w", alg, p, err)
		}
	}
	if alg == AlgTokenList {
		if err := checkTokens(ctx, rdb, prefix, spec.Limit); err != nil {
			return hotTurn{}, err
		}
	}
	return hotTurn{results: results, maxAtOnce: int64(st.MaxInFlight), overCapStart: st.OverCap, cpu0: cpu0, cpu1: cpu1}, nil
}

// workerStartup is how long after they are started the worker processes
// of a turn begin together: long enough for every one to be up.
const workerStartup = 500 * time.Millisecond

// runWorkers runs spec.Procs `crawler bench-worker` processes of alg, which
// begin together workerStartup after their launch, and waits for their
// figures, which each writes as JSON on its stdout. It also returns the
// machine's CPU times read when they begin.
func (spec HotSiteSpec) runWorkers(ctx context.Context, alg, prefix, url string) ([]workerResult, []error, cpuTimes) {
	results := make([]workerResult, spec.Procs)
	errs := make([]error, spec.Procs)
	var wg sync.WaitGroup
	at := time.Now().Add(workerStartup)
	start := strconv.FormatInt(at.UnixMilli(), 10)
	for p := 0; p < spec.Procs; p++ {
		cmd := exec.CommandContext(ctx, spec.Exe, "bench-worker", "--redis", spec.RedisAddr, "--alg", alg, "--prefix", prefix, "--url", url,
			"--waiters", strconv.Itoa(spec.WaitersPerProc), "--limit", strconv.Itoa(spec.Limit), "--start", start, "--duration", spec.Duration.String())
		wg.Go(func() { // ends with the process
			out, err := cmd.Output()
			if err == nil {
				err = json.Unmarshal(out, &results[p])
			}
			errs[p] = err
		})
	}
	t := time.NewTimer(time.Until(at))
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	cpu0 := machineCPU()
	wg.Wait()
	return results, errs, cpu0
}

// handoffRow adds up alg's turns: grants and holds over all of them, each
// waiter's grants in each turn as one count for fairness, the turns'
// lengths (each its slowest process's) for the rate, the most the server
// saw at once, the release times of every turn and process pooled, and
// the machine's CPU time and context switches over all the grants (0 when
// a turn could not tell them). The gap follows from the rate and the
// hold, for a row that kept the cap.
func (spec HotSiteSpec) handoffRow(alg string, turns []hotTurn) HandoffRow {
	var grants []int64
	var total, holdNs int64
	var secs, steal, cpuAll, switches float64
	var machine time.Duration
	var releases []int64
	cpuKnown, swKnown := true, true // every turn's
	row := HandoffRow{Alg: alg}
	for _, t := range turns {
		c, sw, ok := t.cpu1.spent(t.cpu0)
		cpuKnown, swKnown = cpuKnown && ok, swKnown && sw > 0
		machine += c
		switches += sw
		if t.cpu1.total > t.cpu0.total {
			steal += t.cpu1.steal - t.cpu0.steal
			cpuAll += t.cpu1.total - t.cpu0.total
		}
		var long float64
		for _, r := range t.results {
			for _, g := range r.Grants {
				grants = append(grants, g)
				total += g
			}
			holdNs += r.HoldNs
			long = max(long, r.Seconds)
			releases = append(releases, r.Releases...)
		}
		secs += long
		row.MaxAtOnce = max(row.MaxAtOnce, t.maxAtOnce)
		row.OverCapStart += t.overCapStart
	}
	if len(releases) > 0 {
		row.ReleaseP50 = time.Duration(pct(releases, 50))
	}
	row.Grants, row.Jain = total, jain(grants)
	if cpuKnown && total > 0 {
		row.MachineCPU = machine / time.Duration(total)
	}
	if swKnown && total > 0 {
		row.Switches = switches / float64(total)
	}
	row.HostSteal = stealUnknown
	if cpuAll > 0 {
		row.HostSteal = steal / cpuAll
	}
	if total > 0 && secs > 0 {
		row.PerSec = float64(total) / secs
		row.Hold = time.Duration(holdNs / total)
		row.PctNominal = 100 * row.PerSec * spec.Hold.Seconds() / float64(spec.Limit)
		row.PctOfHolds = 100 * row.PerSec * row.Hold.Seconds() / float64(spec.Limit)
		// A row that let the site see more than Limit at once (an unsafe
		// semaphore) has no slots to tell a gap of.
		if cycle := time.Duration(float64(spec.Limit) / row.PerSec * float64(time.Second)); cycle > row.Hold && row.keptCap(spec.Limit) {
			row.Gap = cycle - row.Hold
		}
	}
	return row
}

// checkTokens checks that every token came back once the workers ended,
// and removes the list.
func checkTokens(ctx context.Context, rdb *redis.Client, prefix string, limit int) error {
	key := tokenKey(prefix, hotSite)
	n, err := rdb.LLen(ctx, key).Result()
	if err == nil && n != int64(limit) {
		err = fmt.Errorf("%d tokens after the run, want %d", n, limit)
	}
	if err == nil {
		err = rdb.Del(ctx, key).Err()
	}
	if err != nil {
		return fmt.Errorf("bench: token list %s: %w", key, err)
	}
	return nil
}

// relateToTokens sets each row's VsTokens from the token list's row, if
// there is one with grants.
func relateToTokens(rows []HandoffRow) {
	i := tokensRef(rows)
	if i < 0 || rows[i].PerSec == 0 {
		return
	}
	for j := range rows {
		rows[j].VsTokens = rows[j].PerSec / rows[i].PerSec
	}
}

// tokensRef is the index of the token list's row among rows, the reference
// of VsTokens (-1: none).
func tokensRef(rows []HandoffRow) int {
	return slices.IndexFunc(rows, func(r HandoffRow) bool { return r.Alg == AlgTokenList })
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
	// Releases are the release calls' times in ns, up to maxReleaseTimes
	// a worker (its waiters' first ones).
	Releases []int64 `json:"releases_ns,omitempty"`
}

// maxReleaseTimes bounds the release times a worker reports: a 3 s turn
// has some 700 grants a process.
const maxReleaseTimes = 50_000

// Worker is one hot-site process (crawler bench-worker): from start (at
// once if it has passed), waiters goroutines each take a permit of alg,
// make one request to url under it, give it back, until duration ends; it
// writes its counts, its holds' time and its release calls' times (up to
// maxReleaseTimes) as JSON to out. The processes of one turn get the same
// start, so that none has the site to itself while the others start up.
func Worker(ctx context.Context, redisAddr, alg, prefix, url string, waiters, limit int, start time.Time, duration time.Duration, out io.Writer) error {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: waiters + 4})
	defer rdb.Close()
	h, err := newHolder(rdb, alg, prefix, limit)
	if err != nil {
		return err
	}
	defer h.close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: waiters}, Timeout: 10 * time.Second}
	if wait := time.Until(start); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	res := workerResult{Grants: make([]int64, waiters)}
	var holdNs atomic.Int64
	releases := make([][]int64, waiters) // each waiter's own: no lock on the way
	perWaiter := maxReleaseTimes / max(waiters, 1)
	var wg sync.WaitGroup
	start = time.Now()
	for w := 0; w < waiters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				rel, err := h.acquire(ctx, hotSite)
				if err != nil {
					return
				}
				t0 := time.Now()
				if resp, err := client.Get(url); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				t1 := time.Now()
				holdNs.Add(int64(t1.Sub(t0)))
				rel()
				if len(releases[w]) < perWaiter {
					releases[w] = append(releases[w], int64(time.Since(t1)))
				}
				res.Grants[w]++
			}
		}()
	}
	wg.Wait()
	res.HoldNs, res.Seconds = holdNs.Load(), time.Since(start).Seconds()
	for _, r := range releases {
		res.Releases = append(res.Releases, r...)
	}
	return json.NewEncoder(out).Encode(res)
}
