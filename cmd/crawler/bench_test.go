package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crawler bench --quick completes, writes its report, and held every cap
// (it exits 1 if our limiter ever let a site see more than its cap, and the
// lines it prints say how many were at once). Timings are never asserted.
func TestBenchQuick(t *testing.T) {
	bin := build(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "--quick", "--out", out)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("crawler bench --quick: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr.String())
	}
	// "hot site    polite locked ... most at once 3 (cap 3)", "crawl       polite, 2 process(es) ...".
	atOnce := regexp.MustCompile(`^\s+(hot site|crawl|scale|cluster|fragile|healthy)\s+(.*?)\s{2,}.*most at once (\d+) \(cap (\d+)\)$`)
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(stdout)))
	for sc.Scan() {
		m := atOnce.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		seen[m[1]]++
		n, _ := strconv.Atoi(m[3])
		limit, _ := strconv.Atoi(m[4])
		ours := m[1] == "scale" || m[1] == "cluster" || m[1] == "fragile" || m[1] == "healthy" || strings.HasPrefix(m[2], "polite")
		if ours && (n > limit || n < 1) {
			t.Errorf("%s %s: %d at once, cap %d", m[1], m[2], n, limit)
		}
	}
	if seen["hot site"] != 4 || seen["crawl"] != 5 || seen["scale"] != 4 || seen["cluster"] != 2 || seen["fragile"] != 2 || seen["healthy"] != 2 {
		t.Errorf("summary lines per section %v, want 4 hot site, 5 crawl, 4 scale, 2 cluster, 2 fragile, 2 healthy:\n%s", seen, stdout)
	}
	// Every hot-site row's release was timed by its workers; the anchor
	// and ours kept the cap, so they have a gap (the unsafe book may not).
	release := regexp.MustCompile(`(?m)^\s+(hot site|anchor)\s+(.*?)\s{2,}.*, gap (–|[1-9][\d.]* (µs|ms)), release p50 [1-9][\d.]* (µs|ms), `)
	m := release.FindAllStringSubmatch(string(stdout), -1)
	gaps := 0
	for _, x := range m {
		if x[3] != "–" && (x[1] == "anchor" || strings.HasPrefix(x[2], "polite")) {
			gaps++
		}
	}
	if len(m) != 5 || gaps != 3 {
		t.Errorf("hot-site lines with a release time: %q (%d with a gap among the anchor and ours), want 5 and 3:\n%s", m, gaps, stdout)
	}
	// What a busy Redis spends a page, in each mode, and what a wake costs
	// it: figures measured, so only their presence and sign are checked.
	busy := regexp.MustCompile(`(?m)^\s+redis busy\s+polite (locked|atomic)\s+[\d.]+(µs|ms) Redis CPU per page replayed back to back \(50 to a round trip\): a busy Redis core serves at most [1-9]\d* pages/s$`)
	if m := busy.FindAllStringSubmatch(string(stdout), -1); len(m) != 2 || m[0][1] != "locked" || m[1][1] != "atomic" {
		t.Errorf("redis busy lines %q, want one for each mode with a cost:\n%s", m, stdout)
	}
	// Redis on a CPU of its own: a line for each mode where this machine
	// has two CPUs or more for the test, else the reason.
	own := regexp.MustCompile(`(?m)^\s+redis own\s+(?:polite (locked|atomic)\s+[1-9][\d.]*(µs|ms) Redis CPU per page \([\d.]+(µs|ms)–[\d.]+(µs|ms)\) with Redis on a CPU of its own: one Redis core serves [1-9]\d* pages/s|not measured: (.*))$`)
	m = own.FindAllStringSubmatch(string(stdout), -1)
	cpus := runtime.NumCPU() // those this process may use, as the bench's
	switch {
	case cpus >= 2 && (len(m) != 2 || m[0][1] != "locked" || m[1][1] != "atomic"):
		t.Errorf("redis own lines %q on %d CPUs, want one for each mode with a cost:\n%s", m, cpus, stdout)
	case cpus < 2 && (len(m) != 1 || !strings.Contains(m[0][5], "one of its own")):
		t.Errorf("redis own lines %q on 1 CPU, want the reason:\n%s", m, stdout)
	}
	if !regexp.MustCompile(`(?m)^\s+redis wake\s+a PING costs Redis [1-9][\d.]*(µs|ms) of CPU from 1 client at a time, [\d.]+(µs|ms|s) from 50 at once$`).Match(stdout) {
		t.Errorf("no redis wake line:\n%s", stdout)
	}
	md, err := os.ReadFile(filepath.Join(out, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	// What the machine spent a grant, in the anchor's and our rows: CPU
	// time, switches, then fairness.
	spent := regexp.MustCompile(`(?m)^\| (token list|polite) .*\| [1-9][\d.]* (µs|ms) \| [1-9][\d.]* \| [01]\.\d{3} \| \d+ \| \d+ \|`)
	if n := len(spent.FindAll(md, -1)); n != 3 {
		t.Errorf("%d hot-site rows of the anchor and ours with the machine's CPU and switches a grant, want 3", n)
	}
	for _, want := range []string{"--quick", "## Limiter: uncontended", "## Limiter: throughput", "## Limiter: hand-off", "## Crawl: utilisation", "## Crawl: how cost grows", "## Crawl: on a Redis Cluster", "## Adaptive politeness", "| cores | "} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	if svgs, _ := filepath.Glob(filepath.Join(out, "bench-charts", "*.svg")); len(svgs) != 5 {
		t.Errorf("charts: %v", svgs)
	}
}
