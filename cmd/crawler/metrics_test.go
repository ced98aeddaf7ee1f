package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/testserver"
)

// A --metrics-addr another process holds stops the run at once (exit 1),
// naming the address and saying it is in use, with nothing seeded.
func TestMetricsAddrTaken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, seeds := startSites(t, "mixed", 1)
	addr := taken.Addr().String()
	_, stderr, code := crawler(t, ctx, "run", "--redis", "redis://"+rs.Addr, "--crawl", t.Name(), "--metrics-addr", addr, seeds[0])
	if code != 1 || !strings.Contains(stderr, "--metrics-addr") || !strings.Contains(stderr, addr) || !strings.Contains(stderr, "in use") {
		t.Errorf("crawler run on a taken --metrics-addr: exit %d, want 1 with the address and 'in use'; stderr:\n%s", code, stderr)
	}
	rdb := rs.Client()
	defer rdb.Close()
	if keys, err := rdb.Keys(ctx, "*").Result(); err != nil || len(keys) > 0 {
		t.Errorf("keys in Redis after the refused run: %v (%v); want none", keys, err)
	}
}

// With --metrics-linger, /metrics stays up after the crawl, with its final
// figures (every page fetched, nothing queued or in flight), and says so in
// the log; Ctrl-C ends the linger and the run exits 0.
func TestMetricsLingerAfterTheCrawl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	_, seeds := serveSites(t, testserver.Profile{Name: "linger", Seed: 1, Sites: []testserver.SiteSpec{{Pages: 6, Links: 3}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.CommandContext(ctx, build(t), "run", "--redis", "redis://"+rs.Addr, "--crawl", t.Name(), "--progress", "1h",
		"--metrics-addr", addr, "--metrics-linger", "1h", seeds[0])
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "still serving /metrics") {
		log.WriteString(sc.Text() + "\n")
	}
	if !strings.Contains(sc.Text(), addr) || !strings.Contains(sc.Text(), "1h0m0s") {
		cmd.Process.Kill()
		t.Fatalf("no log line on lingering at %s for 1h; log:\n%s%s", addr, log.String(), sc.Text())
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("/metrics while lingering: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := metricValue(string(b), `polite_fetches_total{code="200"}`); n < 6 {
		t.Errorf(`polite_fetches_total{code="200"} = %v after a crawl of 6 pages`, n)
	}
	for _, want := range []string{"polite_fetch_duration_seconds_count ",
		"polite_fetched_bytes_total ", "polite_in_flight 0", "polite_crawl_queued 0", "polite_crawl_in_flight 0", "go_goroutines "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics after the crawl lacks %q", want)
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	io.Copy(io.Discard, stderr) // to the end: the process has exited
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after Ctrl-C while lingering: %v; want exit 0", err)
	}
}

// metricValue is the value of series (name and labels) in a /metrics body,
// or -1 if it is not there.
func metricValue(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return -1
}
