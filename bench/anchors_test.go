package bench

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The token list holds exactly limit tokens whatever the key held before,
// never grants more than limit at once (counted by the holders, and at
// Redis: a holder never sees more than limit-1 tokens left in the list),
// gives every token back, and a waiter blocked in BLPOP leaves when its
// context ends, deadline or not.
func TestTokenList(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := srv.Client()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const prefix, site, limit = "bench:test", "hot.example", 3
	key := tokenKey(prefix, site)
	if err := rdb.RPush(ctx, key, "stale", "stale", "stale", "stale", "stale").Err(); err != nil {
		t.Fatal(err)
	}
	if err := fillTokens(ctx, rdb, prefix, site, limit, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, _ := rdb.LRange(ctx, key, 0, -1).Result(); strings.Join(got, ",") != "t0,t1,t2" {
		t.Fatalf("list after fillTokens: %q", got)
	}
	if ttl, _ := rdb.PTTL(ctx, key).Result(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("TTL %s, want (0, 1m]", ttl)
	}

	h, err := newHolder(rdb, AlgTokenList, prefix, limit)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	// 12 waiters, 25 grants each. held counts a holder from after its
	// BLPOP to before its RPUSH, so it never passes the number of tokens
	// out of the list. Adding held to LLEN would race (a holder that gives
	// its token back between the two reads is counted twice), so each
	// holder checks the two sides apart: held ≤ limit, and, its own token
	// being out for the whole LLEN, at most limit-1 left in the list.
	var held, grants, over atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				rel, err := h.acquire(ctx, site)
				if err != nil {
					t.Error(err)
					return
				}
				if held.Add(1) > limit {
					over.Add(1)
				}
				if left, err := rdb.LLen(ctx, key).Result(); err != nil || left > limit-1 {
					over.Add(1)
				}
				time.Sleep(time.Millisecond)
				held.Add(-1)
				rel()
				grants.Add(1)
			}
		}()
	}
	wg.Wait()
	if over.Load() > 0 || grants.Load() != 12*25 {
		t.Errorf("%d grants, %d seen over the limit", grants.Load(), over.Load())
	}
	if err := checkTokens(ctx, rdb, prefix, limit); err != nil {
		t.Errorf("tokens not all back: %v", err)
	}
	if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
		t.Error("checkTokens left the list behind")
	}

	// All tokens taken: a waiter blocks, then leaves at its deadline (a
	// BLPOP never blocks past it) or when cancelled (within maxBlock).
	if err := fillTokens(ctx, rdb, prefix, site, limit, time.Minute); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < limit; i++ {
		if _, err := h.acquire(ctx, site); err != nil {
			t.Fatal(err)
		}
	}
	dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer dcancel()
	t0 := time.Now()
	if _, err := h.acquire(dctx, site); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("acquire past its deadline: %v", err)
	}
	if took := time.Since(t0); took > 5*time.Second {
		t.Errorf("waiter left %s after a 300ms deadline", took)
	}
	cctx, ccancel := context.WithCancel(ctx)
	go func() { time.Sleep(100 * time.Millisecond); ccancel() }()
	t0 = time.Now()
	if _, err := h.acquire(cctx, site); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire after cancel: %v", err)
	}
	if took := time.Since(t0); took > maxBlock+5*time.Second {
		t.Errorf("cancelled waiter left after %s", took)
	}
	if n, _ := rdb.LLen(ctx, key).Result(); n != 0 {
		t.Errorf("%d tokens appeared while all were held", n)
	}
	if err := checkTokens(ctx, rdb, prefix, limit); err == nil {
		t.Error("checkTokens passed with every token still out")
	}
}

// The back-to-back baseline sends exactly two PINGs per pair (counted at
// Redis) and times each pair.
func TestBackToBack(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	pairs, err := backToBack(ctx, rdb, 50)
	if err != nil || len(pairs) != 50 || pct(pairs, 50) <= 0 {
		t.Fatalf("%d pairs, p50 %s, %v", len(pairs), pct(pairs, 50), err)
	}
	stats, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stats, "cmdstat_ping:calls=100,") {
		t.Errorf("want 100 PINGs at Redis:\n%s", stats)
	}
}

func TestRelateToTokens(t *testing.T) {
	rows := []HandoffRow{{Alg: AlgLocked, PerSec: 970}, {Alg: AlgTokenList, PerSec: 1000}, {Alg: AlgAtomic, PerSec: 500}}
	relateToTokens(rows)
	for i, want := range []float64{0.97, 1, 0.5} {
		if rows[i].VsTokens != want {
			t.Errorf("%s: %v× the token list, want %v", rows[i].Alg, rows[i].VsTokens, want)
		}
	}
	none := []HandoffRow{{Alg: AlgLocked, PerSec: 970}}
	if relateToTokens(none); none[0].VsTokens != 0 {
		t.Error("a ratio without a token list row")
	}
}

// A hot-site row adds up its turns: the grants over the turns' lengths
// (each its slowest process's), the holds per grant, each waiter's grants
// in each turn for fairness, the most at once of any turn and every start
// over the cap.
func TestHandoffRowAddsTurns(t *testing.T) {
	spec := HotSiteSpec{Limit: 2, Hold: 2 * time.Millisecond}
	turns := []hotTurn{
		{results: []workerResult{{Grants: []int64{300, 300}, HoldNs: int64(600 * 3 * time.Millisecond), Seconds: 1.9, Releases: []int64{400, 100}},
			{Grants: []int64{300, 300}, HoldNs: int64(600 * 3 * time.Millisecond), Seconds: 2}}, maxAtOnce: 2},
		{results: []workerResult{{Grants: []int64{100, 100}, HoldNs: int64(200 * 3 * time.Millisecond), Seconds: 1, Releases: []int64{300}},
			{Grants: []int64{100, 100}, HoldNs: int64(200 * 3 * time.Millisecond), Seconds: 0.5, Releases: []int64{200, 500, 600}}}, maxAtOnce: 3, overCapStart: 1},
	}
	row := spec.handoffRow(AlgAtomic, turns)
	if row.Grants != 1600 || row.PerSec != 1600.0/3 || row.Hold != 3*time.Millisecond {
		t.Errorf("grants %d, %.1f/s, hold %s; want 1600, %.1f/s (over 2 s + 1 s), 3ms", row.Grants, row.PerSec, row.Hold, 1600.0/3)
	}
	if want := jain([]int64{300, 300, 300, 300, 100, 100, 100, 100}); row.Jain != want {
		t.Errorf("fairness %v, want %v", row.Jain, want)
	}
	if row.MaxAtOnce != 3 || row.OverCapStart != 1 {
		t.Errorf("most at once %d, starts over %d; want 3 and 1", row.MaxAtOnce, row.OverCapStart)
	}
	// 2 slots at 533.3 grants/s: each slot 3.75 ms a grant, 3 ms of it
	// under the request (with the cap kept). The release times of every
	// turn and process are pooled: 100, 200, 300, 400, 500, 600 (each
	// turn's first process alone would give 300).
	turns[1].maxAtOnce, turns[1].overCapStart = 2, 0
	row = spec.handoffRow(AlgAtomic, turns)
	if row.Gap != 750*time.Microsecond || row.ReleaseP50 != 400 {
		t.Errorf("gap %s, release p50 %dns; want 750µs and 400ns", row.Gap, row.ReleaseP50)
	}
	// A row that went over the limit has no gap: whether the server saw
	// it (most at once) or only the sum tells (grants × hold above limit ×
	// time); without release times, no p50.
	for _, turn := range []hotTurn{
		{results: []workerResult{{Grants: []int64{100}, HoldNs: int64(100 * 3 * time.Millisecond), Seconds: 1}}, maxAtOnce: 3},
		{results: []workerResult{{Grants: []int64{100}, HoldNs: int64(100 * 3 * time.Millisecond), Seconds: 1}}, maxAtOnce: 2, overCapStart: 1},
		{results: []workerResult{{Grants: []int64{1000}, HoldNs: int64(1000 * 3 * time.Millisecond), Seconds: 1}}, maxAtOnce: 2},
	} {
		over := spec.handoffRow(AlgBookFair, []hotTurn{turn})
		if over.Gap != 0 || over.ReleaseP50 != 0 {
			t.Errorf("over the limit (most at once %d, %d grants): gap %s, release p50 %s; want 0 and 0", turn.maxAtOnce, over.Grants, over.Gap, over.ReleaseP50)
		}
	}
}

// Every row is related to colly alone in one process, never to colly in
// several (it fetches each page once per process).
func TestRelateToColly(t *testing.T) {
	rows := []CrawlRow{{Name: "polite locked, 1 process(es)", Mode: "locked", Steady: 1140},
		{Name: "colly alone, 4 process(es)", Peer: true, Procs: 4, Steady: 4000}, {Name: "colly alone, 1 process(es)", Peer: true, Procs: 1, Steady: 1200}}
	relateToColly(rows)
	if rows[0].VsColly != 0.95 || rows[2].VsColly != 1 {
		t.Errorf("ratios %v, %v; want 0.95, 1", rows[0].VsColly, rows[2].VsColly)
	}
}

// Redis CPU per page is averaged over a mode's crawls by pages; one core
// serves 1 s ÷ that.
func TestPerCoreByMode(t *testing.T) {
	rows := []CrawlRow{
		{Name: "polite locked, 1 process(es)", Mode: "locked", Pages: 100, RedisCPU: 40 * time.Microsecond},
		{Name: "polite locked, 2 process(es)", Mode: "locked", Pages: 300, RedisCPU: 60 * time.Microsecond},
		{Name: "polite atomic, 1 process(es)", Mode: "atomic", Pages: 100, RedisCPU: 20 * time.Microsecond},
		{Name: "colly alone, 1 process(es)", Peer: true, Procs: 1, Pages: 100},
	}
	pc := perCoreByMode(rows)
	if len(pc) != 2 || pc[0].Mode != "locked" || pc[0].CPU != 55*time.Microsecond || pc[1].CPU != 20*time.Microsecond || pc[1].PagesSec != 50000 {
		t.Errorf("per core %+v", pc)
	}
}

// Each crawl row is judged on its own goals: the steady-rate share by its
// process count, round trips by its mode.
func TestCrawlVerdicts(t *testing.T) {
	row := func(mode string, procs int, vs, trips float64, cpu time.Duration) CrawlRow {
		return CrawlRow{Name: "polite " + mode + ", " + strconv.Itoa(procs) + " process(es)", Mode: mode, Procs: procs, Cap: 3, MaxAtOnce: 3,
			VsColly: vs, RoundTrips: trips, RedisCPU: cpu}
	}
	r := &Report{Crawl: []CrawlRow{
		row("locked", 1, 0.96, 3, 100*time.Microsecond),  // steady short of 0.97 with 1 process
		row("locked", 2, 0.96, 3, 90*time.Microsecond),   // met: 0.95 with 2
		row("atomic", 1, 0.98, 2.5, 50*time.Microsecond), // atomic allows 2 round trips
		row("atomic", 4, 0.99, 2, 101*time.Microsecond),  // over 100 µs
	}}
	met := map[string]bool{}
	for _, v := range r.verdicts() {
		met[v.what] = v.met
	}
	for what, want := range map[string]bool{
		"crawl steady rate, polite locked, 1 process(es)": false, "crawl cost, polite locked, 1 process(es)": true,
		"crawl steady rate, polite locked, 2 process(es)": true, "crawl cap, polite locked, 2 process(es)": true,
		"crawl steady rate, polite atomic, 1 process(es)": true, "crawl cost, polite atomic, 1 process(es)": false,
		"crawl cost, polite atomic, 4 process(es)": false,
	} {
		if got, ok := met[what]; !ok || got != want {
			t.Errorf("%s: met %v (present %v), want %v", what, got, ok, want)
		}
	}
}

// measureUncontended keeps its two baselines apart from what it counts: the
// back-to-back PINGs add no round trips or commands to a pair (atomic is
// one round trip each way), and each ratio divides by its own baseline.
func TestUncontendedBaselines(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.WaitUptime(12 * time.Second); err != nil { // the limiter's restart guard
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	row, err := uncontended(ctx, srv.Addr, AlgAtomic, "bench:u", 40)
	if err != nil {
		t.Fatal(err)
	}
	// Exactly 2: neither the PINGs, the stats reset nor the INFO that
	// reads the commands after the pairs counts.
	if row.RoundTrips != 2 {
		t.Errorf("atomic: %.3f round trips per pair, want 2", row.RoundTrips)
	}
	if row.BackToBack <= 0 || row.RatioB2B != float64(row.P50)/float64(row.BackToBack) || row.Ratio != float64(row.P50)/float64(row.TwoPingP50) {
		t.Errorf("row %+v: ratios not against their own baselines", row)
	}
	if row.Judged != max(row.Ratio, row.RatioB2B) {
		t.Errorf("row %+v: judged against the slower baseline", row)
	}

	// Enough pairs for blocks, each followed by its own PINGs: those add
	// nothing to a pair's round trips and commands either, and the ratio
	// is a block's, not the whole run's p50 over the PINGs' p50.
	blocks, err := uncontended(ctx, srv.Addr, AlgAtomic, "bench:u5", 10*uncontendedBlocks)
	if err != nil {
		t.Fatal(err)
	}
	if blocks.RoundTrips != 2 || blocks.Commands != row.Commands {
		t.Errorf("in blocks: %.3f round trips and %.1f commands a pair, want 2 and %.1f as in one block", blocks.RoundTrips, blocks.Commands, row.Commands)
	}
	if blocks.BackToBack <= 0 || blocks.RatioB2B <= 0 || blocks.Judged != max(blocks.Ratio, blocks.RatioB2B) {
		t.Errorf("in blocks: row %+v", blocks)
	}
}

// pct takes the middle of an odd count of ratios (the blocks' are 1 or 5).
func TestPctOfRatios(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{12.8, 1.4, 1.5, 1.3, 1.6}, 1.5}} {
		if got := pct(c.xs, 50); got != c.want {
			t.Errorf("pct(%v, 50) = %v, want %v", c.xs, got, c.want)
		}
	}
}
