package bench

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/polite-crawler/polite/internal/redistest"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestJain(t *testing.T) {
	for _, c := range []struct {
		xs   []int64
		want float64
	}{
		{[]int64{5, 5, 5, 5}, 1},
		{[]int64{8, 0, 0, 0}, 0.25}, // one of four got everything: 1/n
		{[]int64{3, 1}, 0.8},        // 16 / (2 × 10)
		{nil, 0},
	} {
		if got := jain(c.xs); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("jain(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

func TestPct(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := pct(ds, 50); p != 51*time.Millisecond {
		t.Errorf("p50 = %v", p)
	}
	if p := pct(ds, 99); p != 100*time.Millisecond {
		t.Errorf("p99 = %v", p)
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("pct sorted its input in place")
	}
}

// The round trips come from the crawler's own "crawl finished" record, less
// robots.txt's; the last lines are kept for error messages.
func TestScanLog(t *testing.T) {
	log := strings.Join([]string{
		`{"level":"INFO","msg":"crawl started","workers":8}`,
		`not json at all`,
		`{"level":"INFO","msg":"crawl finished","pages":10,"redis_round_trips":123,"redis_round_trips_robots":20}`,
		`a`, `b`, `c`, `d`,
	}, "\n")
	trips, tail := scanLog(strings.NewReader(log))
	if trips != 103 {
		t.Errorf("round trips %d, want 103", trips)
	}
	if len(tail) != 5 || tail[4] != "d" {
		t.Errorf("tail %q", tail)
	}
}

func TestBusySince(t *testing.T) {
	t0, t1 := cpuTimes{busy: 100, steal: 10, total: 400}, cpuTimes{busy: 160, steal: 14, total: 480}
	if got := t1.busySince(t0); math.Abs(got-0.75) > 1e-9 {
		t.Errorf("busy %v, want 0.75", got)
	}
	if got := t1.stealSince(t0); math.Abs(got-0.05) > 1e-9 {
		t.Errorf("steal %v, want 0.05", got)
	}
	if got, st := t0.busySince(t0), t0.stealSince(t0); got != 0 || st != stealUnknown {
		t.Errorf("no time passed: busy %v, steal %v (want 0 and unknown)", got, st)
	}
	if m := machineCPU(); m.total <= 0 || m.busy > m.total || m.steal < 0 || m.steal > m.busy || m.ctxt <= 0 || m.cores < 1 || m.at.IsZero() {
		t.Errorf("/proc/stat read as %+v", m)
	}
}

// What a machine spent: its busy share less the host's steal, times its
// CPUs and the wall time, and its context switches; nothing when
// /proc/stat could not tell.
func TestMachineSpent(t *testing.T) {
	at := time.Now()
	t0 := cpuTimes{busy: 100, steal: 10, total: 400, ctxt: 1000, cores: 2, at: at}
	t1 := cpuTimes{busy: 260, steal: 20, total: 600, ctxt: 3000, cores: 2, at: at.Add(time.Second)}
	// Busy 160 of 200 ticks, 10 of them the host's: 0.75 of 2 CPUs for 1 s.
	if cpu, sw, ok := t1.spent(t0); cpu != 1500*time.Millisecond || sw != 2000 || !ok {
		t.Errorf("spent = %s, %v switches, %v; want 1.5s, 2000, true", cpu, sw, ok)
	}
	noCores, late, noCtxt := t1, t1, t1
	noCores.cores, late.at, noCtxt.ctxt = 0, at, 0
	t0NoCtxt := t0
	t0NoCtxt.ctxt = 0
	for name, c := range map[string]struct {
		t0, t1 cpuTimes
		sw     float64 // the switches still told
	}{
		"unreadable":            {cpuTimes{}, cpuTimes{}, 0},
		"no time elapsed":       {t0, t0, 0},
		"no CPUs counted":       {t0, noCores, 2000},
		"read at the same time": {t0, late, 2000},
	} {
		if cpu, sw, ok := c.t1.spent(c.t0); cpu != 0 || sw != c.sw || ok {
			t.Errorf("%s: %s, %v switches, %v; want no CPU time, %v switches", name, cpu, sw, ok, c.sw)
		}
	}
	// Without ctxt the CPU time is still told, the switches not.
	for name, c := range map[string]struct{ t0, t1 cpuTimes }{"none at the end": {t0, noCtxt}, "none at the start": {t0NoCtxt, t1}} {
		if cpu, sw, ok := c.t1.spent(c.t0); cpu != 1500*time.Millisecond || sw != 0 || !ok {
			t.Errorf("%s: %s, %v switches, %v; want 1.5s, 0, true", name, cpu, sw, ok)
		}
	}
	// A row adds up its turns, a turn without grants too, over all their
	// grants, and is unknown (0) when a turn could not tell.
	spec := HotSiteSpec{Limit: 3, Hold: 2 * time.Millisecond}
	t2 := cpuTimes{busy: 420, steal: 20, total: 800, ctxt: 4000, cores: 2, at: at.Add(2 * time.Second)}
	t3 := cpuTimes{busy: 580, steal: 20, total: 1000, ctxt: 4500, cores: 2, at: at.Add(3 * time.Second)}
	turns := []hotTurn{
		{results: []workerResult{{Grants: []int64{60, 40}, Seconds: 1}}, cpu0: t0, cpu1: t1}, // 1.5 s, 2000 switches
		{results: []workerResult{{Grants: []int64{300}, Seconds: 1}}, cpu0: t1, cpu1: t2},    // 1.6 s, 1000
		{results: []workerResult{{Grants: []int64{0}, Seconds: 1}}, cpu0: t2, cpu1: t3},      // none granted: 1.6 s, 500
	}
	row := spec.handoffRow(AlgAtomic, turns)
	if want := (1500*time.Millisecond + 3200*time.Millisecond) / 400; row.MachineCPU != want || math.Abs(row.Switches-3500.0/400) > 1e-9 {
		t.Errorf("row: %s, %v switches a grant; want %s, %v", row.MachineCPU, row.Switches, want, 3500.0/400)
	}
	turns[1].cpu1 = cpuTimes{}
	if row := spec.handoffRow(AlgAtomic, turns); row.MachineCPU != 0 || row.Switches != 0 {
		t.Errorf("a turn without CPU times: %s, %v switches; want unknown (0)", row.MachineCPU, row.Switches)
	}
}

// /proc/stat's text: the first line's times, the cpuN lines, ctxt; what
// the text lacks stays 0, and nothing in it panics.
func TestParseStat(t *testing.T) {
	const stat = "cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 50 2 25 400 10 1 1 5 3 0\ncpu1 50 3 25 400 10 2 1 5 4 0\n" +
		"intr 12345 0 1\nctxt 987654\nbtime 1700000000\nprocesses 42\n"
	// total = 100+5+50+800+20+3+2+10; busy leaves out idle (800) and iowait (20); steal 10.
	if got, want := parseStat([]byte(stat)), (cpuTimes{busy: 170, steal: 10, total: 990, ctxt: 987654, cores: 2}); got != want {
		t.Errorf("parseStat = %+v, want %+v", got, want)
	}
	for name, c := range map[string]struct {
		text string
		want cpuTimes
	}{
		"empty":          {"", cpuTimes{}},
		"no ctxt":        {"cpu  1 2 3 4\ncpu0 1 2 3 4\n", cpuTimes{busy: 6, total: 10, cores: 1}},
		"no cpuN lines":  {"cpu  1 2 3 4\nctxt 5\n", cpuTimes{busy: 6, total: 10, ctxt: 5}},
		"a bare cpu":     {"cpu\nctxt\n", cpuTimes{}},
		"cpu not first":  {"ctxt 5\ncpu  1 2 3 4\n", cpuTimes{ctxt: 5}},
		"a cpufreq line": {"cpu  1\ncpufreq 3\n", cpuTimes{busy: 1, total: 1}},
	} {
		if got := parseStat([]byte(c.text)); got != c.want {
			t.Errorf("%s: parseStat = %+v, want %+v", name, got, c.want)
		}
	}
}

// A hot-site row's host share is its turns' steal over their CPU time
// together, not the mean of the turns' shares.
func TestHandoffRowHostSteal(t *testing.T) {
	spec := HotSiteSpec{Limit: 3, Hold: 2 * time.Millisecond}
	turns := []hotTurn{
		{results: []workerResult{{Grants: []int64{10}, Seconds: 1}}, cpu0: cpuTimes{steal: 0, total: 0}, cpu1: cpuTimes{steal: 10, total: 100}},
		{results: []workerResult{{Grants: []int64{10}, Seconds: 1}}, cpu0: cpuTimes{steal: 10, total: 100}, cpu1: cpuTimes{steal: 10, total: 400}},
	}
	if got := spec.handoffRow(AlgAtomic, turns).HostSteal; math.Abs(got-0.025) > 1e-9 {
		t.Errorf("host took %v, want 0.025 (10 of 400)", got)
	}
	for i := range turns {
		turns[i].cpu0, turns[i].cpu1 = cpuTimes{}, cpuTimes{} // /proc/stat unreadable
	}
	if got := spec.handoffRow(AlgAtomic, turns).HostSteal; got != stealUnknown || hostTook(got) != "–" {
		t.Errorf("host took %v (%q) with no CPU times, want unknown (–)", got, hostTook(got))
	}
}

// A verdict names the host's share when it or its reference's is high.
func TestHostNote(t *testing.T) {
	for _, c := range []struct {
		steal, ref float64
		want       string
	}{
		{0.01, 0.02, ""},
		{0.05, stealUnknown, " (the host took 5.0 % of the CPU in its crawl)"},
		{0.01, 0.031, " (the host took 3.1 % of the CPU in colly alone's)"},
		{0.05, 0.031, " (the host took 5.0 % of the CPU in its crawl, 3.1 % in colly alone's)"},
	} {
		if got := hostNote(c.steal, "its crawl", c.ref, "colly alone's"); got != c.want {
			t.Errorf("hostNote(%v, %v) = %q, want %q", c.steal, c.ref, got, c.want)
		}
	}
}

// Only our own limiter's figures decide safety: the book's unlocked
// semaphore and colly in several processes are there to exceed the cap.
func TestSafetyHeld(t *testing.T) {
	ok := func() *Report {
		return &Report{
			HotSpec: HotSiteSpec{Limit: 3},
			HotSite: []HandoffRow{{Alg: AlgTokenList, MaxAtOnce: 3}, {Alg: AlgLocked, MaxAtOnce: 3}, {Alg: AlgAtomic, MaxAtOnce: 3}, {Alg: AlgBookFair, MaxAtOnce: 9, OverCapStart: 40}},
			Crawl:   []CrawlRow{{Name: "polite, 1 process(es)", Cap: 3, MaxAtOnce: 3}, {Name: "colly alone, 4 process(es)", Peer: true, Cap: 3, MaxAtOnce: 12, OverCap: 99}},
			Scale:   []CrawlRow{{Name: "10 sites", Cap: 3, MaxAtOnce: 3}},
		}
	}
	if !ok().SafetyHeld() {
		t.Fatal("a safe run reported unsafe")
	}
	for name, spoil := range map[string]func(r *Report){
		"hot site over cap":    func(r *Report) { r.HotSite[2].MaxAtOnce = 4 },
		"hot site start over":  func(r *Report) { r.HotSite[1].OverCapStart = 1 },
		"token list over cap":  func(r *Report) { r.HotSite[0].MaxAtOnce = 4 },
		"crawl over cap":       func(r *Report) { r.Crawl[0].OverCap = 1 },
		"crawl disallowed":     func(r *Report) { r.Crawl[0].Disallowed = 1 },
		"crawl site violation": func(r *Report) { r.Crawl[0].Impolite = 1 },
		"scale crawl too many": func(r *Report) { r.Scale[0].MaxAtOnce = 4 },
		"busy crawl over cap":  func(r *Report) { r.Busy = []BusyRow{{Mode: "atomic", Crawl: CrawlRow{Cap: 3, MaxAtOnce: 4}}} },
	} {
		r := ok()
		spoil(r)
		if r.SafetyHeld() {
			t.Errorf("%s: reported safe", name)
		}
	}
}

// The report is Markdown with a section per part that ran, and its charts
// are well-formed SVG.
func TestReportWrite(t *testing.T) {
	r := &Report{
		Started: time.Now(), Took: time.Minute, Command: "crawler bench", Machine: map[string]string{"cores": "2"},
		Uncontended: []LatencyRow{{Alg: AlgAtomic, P50: 140 * time.Microsecond, TwoPingP50: 100 * time.Microsecond, Ratio: 1.4,
			BackToBack: 80 * time.Microsecond, RatioB2B: 1.75, Judged: 1.75, RoundTrips: 2}},
		Throughput: []ThroughputRow{{Alg: AlgPing, PerSec: 50000}, {Alg: AlgAtomic, PerSec: 17000, VsBook: 2.8}, {Alg: AlgBookLocked, PerSec: 6000, VsBook: 1}},
		HotSpec:    HotSiteSpec{Procs: 4, WaitersPerProc: 8, Limit: 3, Hold: 2 * time.Millisecond, Duration: time.Second},
		HotSite: []HandoffRow{{Alg: AlgTokenList, PerSec: 1000, VsTokens: 1, Jain: 1, MaxAtOnce: 3}, {Alg: AlgAtomic, PerSec: 980, VsTokens: 0.98, Jain: 0.99, MaxAtOnce: 3, Gap: 450 * time.Microsecond, ReleaseP50: 380 * time.Microsecond,
			MachineCPU: 1200 * time.Microsecond, Switches: 31.25},
			{Alg: AlgLocked, PerSec: 960, VsTokens: 0.96, Jain: 0.99, MaxAtOnce: 3, HostSteal: 0.034}, {Alg: AlgBookFair, MaxAtOnce: 9, PctOfHolds: 75, HostSteal: 0.005}},
		Footprint: &Footprint{BytesPerActiveSite: 500},
		CrawlSpec: CrawlSpec{Sites: 20, Pages: 10, Latency: 50 * time.Millisecond},
		Crawl: []CrawlRow{{Name: "polite atomic, 1 process(es)", Mode: "atomic", Procs: 1, Cap: 3, Util: 0.9, VsColly: 0.98, RoundTrips: 1.9, Pages: 100, RedisCPU: 50 * time.Microsecond, HostSteal: 0.05},
			{Name: "colly <alone> & co", Peer: true, Procs: 1, Cap: 3}},
		Scale: []CrawlRow{{Name: "10 sites, 1 × 32 workers", RoundTrips: 8}},
		Busy:  []BusyRow{{Mode: "locked", NotMeasured: "bench: monitor: Redis replied \"-NOPERM\""}, {Mode: "atomic", Commands: 360, Depth: busyDepth, CPU: 40 * time.Microsecond, Calls: 26.5, HostSteal: 0.03, Crawl: CrawlRow{Pages: 100, Cap: 3, MaxAtOnce: 3}}},
		Wake:  &WakeCost{One: 33 * time.Microsecond, Many: 5 * time.Microsecond, Clients: 50},
	}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Goals at a glance", "| uncontended p50, polite atomic | ≤ 1.5× two PINGs (the stricter ratio) | 1.75× (1.75× back-to-back, 1.40× interleaved) | **not met** |",
		"| throughput, polite atomic | ≥ 4.0× the book's lock-guarded | 2.80× | **not met** |",
		"| hot-site hand-off, polite atomic | ≥ 0.97× the token list's grants/s, fairness ≥ 0.95 | 0.980×, 0.990 | met |",
		"| hot-site hand-off, polite locked | ≥ 0.97× the token list's grants/s, fairness ≥ 0.95 | 0.960×, 0.990 (the host took 3.4 % of the CPU in its turns) | **not met** |",
		"| 3 | 0 | 3.4% ⚠ |", "| 9 ⚠ | 0 | 0.5% |", "| 0% | 5.0% ⚠ |",
		"| hot-site cap, token list (BLPOP/RPUSH) | never over 3 at the server | most 3, 0 starts over | met |",
		"| crawl steady rate, polite atomic, 1 process(es) | ≥ 0.97× colly alone (1 process) | 0.980× (the host took 5.0 % of the CPU in its crawl) | met |",
		"| crawl cost, polite atomic, 1 process(es) | ≤ 2 round trips and ≤ 100 µs Redis CPU per page | 1.90, 50 µs (the host took 5.0 % of the CPU in its crawl) | met |",
		"| crawl cap, polite atomic, 1 process(es) | 0 starts over cap | most 0 (cap 3), 0 over | met |",
		"| crawl politeness, polite atomic, 1 process(es) | 0 sites with a violation | 0 (0 disallowed requests) | met |",
		"**20000 pages/s** in atomic mode (1 s ÷ 50 µs)", "×M masters, as long as sites spread over them",
		"atomic mode **40 µs a page** (100 pages, 3.6 commands sent a page, so a round trip carried 14 pages'; 26.5 commands run a page, those in scripts included; the host took 3.0% ⚠ of the CPU over its replays; its sites saw at most 3 at once, cap 3): at most **25000 pages/s** a core",
		"What a busy Redis spends a page in locked mode is not measured in this run: bench: monitor: Redis replied \"-NOPERM\".",
		"a PING cost it **33 µs** of CPU from one client at a time", "and **5 µs** from 50 clients at once", "at least the difference, **28 µs**",
		"| token list (BLPOP/RPUSH) | 1000 | **1.000×** |", "| 0.0% | 450 µs | 380 µs | 1.20 ms | 31.2 | 0.990 | 3 |", "| 75.0% | – | – | – | – | 0.000 | 9 ⚠ |",
		"3 ÷ grants/s − real hold", "\"–\": for the gap, a row that let the site see more than 3 at once (it had no 3 slots to tell a gap of); in the other columns, not measured.", "| 80 µs | **1.75×** |",
		"## Limiter: uncontended", "## Limiter: throughput", "## Limiter: hand-off", "## Limiter: Redis footprint",
		"## Crawl: utilisation", "## Crawl: how cost grows", "| polite atomic, 1 process(es) |", "9 ⚠", "| 90% | **0.980×** |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	svgs, _ := filepath.Glob(filepath.Join(dir, ChartsDir, "*.svg"))
	if len(svgs) != 5 {
		t.Fatalf("%d charts: %v", len(svgs), svgs)
	}
	for _, f := range svgs {
		if !strings.Contains(string(md), ChartsDir+"/"+filepath.Base(f)) {
			t.Errorf("BENCHMARKS.md does not show %s", filepath.Base(f))
		}
		b, _ := os.ReadFile(f)
		if err := wellFormed(b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}

	// A run of one section reports that section alone.
	part := &Report{Started: time.Now(), Command: "crawler bench --only hotsite", HotSpec: r.HotSpec, HotSite: r.HotSite}
	dir = t.TempDir()
	if err := part.Write(dir); err != nil {
		t.Fatal(err)
	}
	md, _ = os.ReadFile(filepath.Join(dir, "BENCHMARKS.md"))
	if strings.Contains(string(md), "## Crawl") || !strings.Contains(string(md), "## Limiter: hand-off") {
		t.Errorf("--only hotsite report:\n%s", md)
	}
}

func wellFormed(b []byte) error {
	d := xml.NewDecoder(strings.NewReader(string(b)))
	for {
		if _, err := d.Token(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// A row crawled several times shows the median crawl, the range, and the
// worst safety figures of any of them.
func TestMedian(t *testing.T) {
	all := []CrawlRow{{Util: 0.8, Cap: 3, MaxAtOnce: 4, OverCap: 1}, // the worst crawl is not the median one
		{Util: 0.9, Cap: 3, MaxAtOnce: 3}, {Util: 0.85, Cap: 3, MaxAtOnce: 3}}
	row := medianOf(all)
	if row.Util != 0.85 || row.UtilMin != 0.8 || row.UtilMax != 0.9 || row.Runs != 3 {
		t.Fatalf("median row %+v", row)
	}
	if row.MaxAtOnce != 4 || row.OverCap != 1 {
		t.Fatalf("an over-cap crawl hidden behind the median: %+v", row)
	}
}

// The crawl section goes in rounds, one crawl of every row a round after
// the reference, so that a slow stretch of the machine costs a row at most
// one crawl: here the second round is slow for everyone and no row's
// median is from it.
func TestUtilisationRounds(t *testing.T) {
	var order []string
	round := 0
	before := func() error {
		round++
		order = append(order, "ref")
		return nil
	}
	rows, err := utilisation([]int{1, 4}, 3, before, func(procs int, mode string) (CrawlRow, error) {
		order = append(order, fmt.Sprintf("%s-%d", mode, procs))
		util := 0.9 + 0.01*float64(round)
		if round == 2 {
			util = 0.5
		}
		return CrawlRow{Mode: mode, Procs: procs, Util: util}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := "ref locked-1 atomic-1 locked-4 atomic-4"
	if got, want := strings.Join(order, " "), r+" "+r+" "+r; got != want {
		t.Errorf("crawled %s; want %s", got, want)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows; want 4", len(rows))
	}
	for i, x := range rows {
		if x.Mode != crawlModes[i%2] || x.Procs != []int{1, 4}[i/2] || x.Util != 0.91 || x.UtilMin != 0.5 || x.UtilMax != 0.93 || x.Runs != 3 {
			t.Errorf("row %d: %+v; want %s with %d process(es), median 0.91 of 0.5-0.93", i, x, crawlModes[i%2], []int{1, 4}[i/2])
		}
	}
}

// The seen-memory figure is measured at Redis: fingerprints take a fraction
// of the URLs kept whole.
func TestSeenMemory(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := srv.Client()
	defer rdb.Close()
	s, err := seenMemory(context.Background(), rdb, 20000)
	if err != nil {
		t.Fatal(err)
	}
	if s.URLs != 20000 || s.PerURL <= 0 || s.PerURL >= s.URLSetPer || !goals.seenBytes.met(s.PerURL) {
		t.Fatalf("%+v: want 20000 URLs, each %s and less than kept whole", s, goals.seenBytes)
	}
}

// Neither setting of the healthy comparison always runs second.
func TestHealthyTurnsAlternate(t *testing.T) {
	var second []bool
	for i := range 4 {
		turns := healthyTurns(i)
		if len(turns) != 2 || turns[0] == turns[1] {
			t.Fatalf("round %d: %v, want off and on once each", i, turns)
		}
		second = append(second, turns[1])
	}
	if second[0] == second[1] || second[1] != second[3] {
		t.Fatalf("second crawls of rounds 0..3: %v; want alternating", second)
	}
}
