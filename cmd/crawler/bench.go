package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/polite-crawler/polite/bench"
	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/internal/redistest"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crawler bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "small counts, under a minute: a smoke run (CI); figures are not worth quoting")
	out := fs.String("out", ".", "directory for BENCHMARKS.md and its SVG charts")
	redisAddr := fs.String("redis", "", "host:port of a redis-server of the bench's own (it is FLUSHALLed); default: start a private one")
	only := fs.String("only", "", "comma-separated sections to run: "+strings.Join(bench.Sections, ",")+" (default all)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: crawler bench [--quick] [--out DIR] [--only SECTIONS] [--redis HOST:PORT]")
		fmt.Fprintln(stderr, "\nMeasures the limiter against its physical limits (PINGs; a BLPOP/RPUSH token list on a hot")
		fmt.Fprintln(stderr, "site) and against Redis in Action's semaphores, and the crawler against the sites' ideal and")
		fmt.Fprintln(stderr, "against colly alone, all in one run")
		fmt.Fprintln(stderr, "on this machine, and writes DIR/BENCHMARKS.md with SVG charts in DIR/"+bench.ChartsDir+". It needs")
		fmt.Fprintln(stderr, "redis-server on PATH unless --redis is given. Exits 1 if our limiter ever let a site see more")
		fmt.Fprintln(stderr, "than its cap. A full run takes a few minutes; --quick under a minute.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var sections []string
	if *only != "" {
		sections = strings.Split(*only, ",")
		for _, sec := range sections {
			if !slices.Contains(bench.Sections, sec) {
				return usageErr("--only: unknown section %q (known: %s)", sec, strings.Join(bench.Sections, ", "))
			}
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if *redisAddr == "" {
		srv, err := redistest.Start()
		if err != nil {
			return fmt.Errorf("bench runs its own redis-server: %w", err)
		}
		defer srv.Close()
		*redisAddr = srv.Addr
	}
	r, err := bench.Run(ctx, bench.Options{Quick: *quick, Only: sections, Exe: exe, RedisAddr: *redisAddr, UserAgent: config.Default().UserAgent,
		Command: strings.TrimSpace("crawler bench " + strings.Join(args, " ")), Log: stderr})
	if err != nil {
		return err
	}
	if err := r.Write(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench: done in %s; report in %s\n", r.Took.Round(time.Second), filepath.Join(*out, "BENCHMARKS.md"))
	for _, x := range r.Uncontended {
		fmt.Fprintf(stdout, "  uncontended %-28s p50 %6s = %.2f× two back-to-back PINGs (%.2f× interleaved)\n", x.Alg, x.P50.Round(time.Microsecond), x.RatioB2B, x.Ratio)
	}
	for _, x := range r.Burst {
		fmt.Fprintf(stdout, "  burst       %-28s %d callers, %d process(es): %s = %.2f× atomic, %.1f commands/caller = %.2f× atomic\n", x.Alg, x.Callers, x.Procs, x.Took.Round(100*time.Microsecond), x.VsAtomicTook, x.Commands, x.VsAtomicCmds)
	}
	for _, x := range r.HotSite {
		label := "hot site" // the token list is the anchor the others are measured by, not a contender
		if x.Alg == bench.AlgTokenList {
			label = "anchor"
		}
		fmt.Fprintf(stdout, "  %-11s %-28s %6.0f grants/s = %.3f× token list, %5.1f%% of slot time, fairness %.3f, most at once %d (cap %d)\n",
			label, x.Alg, x.PerSec, x.VsTokens, x.PctOfHolds, x.Jain, x.MaxAtOnce, r.HotSpec.Limit)
	}
	for _, x := range r.Throughput {
		fmt.Fprintf(stdout, "  throughput  %-28s %6.0f/s = %.2f× the book's lock-guarded\n", x.Alg, x.PerSec, x.VsBook)
	}
	for _, x := range r.Crawl {
		cost := ""
		if x.Mode != "" {
			cost = fmt.Sprintf(", %.2f round trips and %s Redis CPU per page", x.RoundTrips, x.RedisCPU.Round(time.Microsecond))
		}
		fmt.Fprintf(stdout, "  crawl       %-32s %4.0f%% of ideal, %.3f× colly alone%s, most at once %d (cap %d)\n", x.Name, 100*x.Util, x.VsColly, cost, x.MaxAtOnce, x.Cap)
	}
	for _, x := range bench.PerCoreByMode(r.Crawl) {
		fmt.Fprintf(stdout, "  redis core  %-28s %s Redis CPU per page: one Redis core serves %.0f pages/s (×M masters, as long as sites spread over them)\n",
			"polite "+x.Mode, x.CPU.Round(time.Microsecond), x.PagesSec)
	}
	for _, x := range r.Scale {
		fmt.Fprintf(stdout, "  scale       %-28s %4.0f%% of ideal, %.1f Redis round trips/page, most at once %d (cap %d)\n", x.Name, 100*x.Util, x.RoundTrips, x.MaxAtOnce, x.Cap)
	}
	for _, x := range r.Cluster {
		var spread []string
		for _, m := range x.Masters {
			spread = append(spread, fmt.Sprintf("%.0f%%", 100*m.ShareCPU))
		}
		fmt.Fprintf(stdout, "  cluster     %-32s %4.0f%% of ideal, %.2f round trips and %s Redis CPU per page (by master %s), most at once %d (cap %d)\n",
			x.Name, 100*x.Util, x.RoundTrips, x.RedisCPU.Round(time.Microsecond), strings.Join(spread, " "), x.MaxAtOnce, x.Cap)
	}
	for _, x := range r.Fragile {
		fmt.Fprintf(stdout, "  fragile     adaptive %-5v %d processes   %.1f pages/s, %d 503s, p95 %.0f ms, effective cap %d, most at once %d (cap 3)\n",
			x.Adaptive, x.Procs, x.PagesPerSec, x.Overloaded, x.P95, x.Cap, x.MaxAtOnce)
	}
	for _, x := range r.Healthy {
		fmt.Fprintf(stdout, "  healthy     %-32s %4.0f%% of ideal, %.0f pages/s steady, most at once %d (cap %d)\n", x.Name, 100*x.Util, x.Steady, x.MaxAtOnce, x.Cap)
	}
	if s := r.Seen; s != nil {
		fmt.Fprintf(stdout, "  seen        %d URLs: %.1f bytes of Redis each as fingerprints, %.1f kept whole\n", s.URLs, s.PerURL, s.URLSetPer)
	}
	for _, x := range r.Robots {
		fmt.Fprintf(stdout, "  robots      %s: %s per check (goal ≤ %s)\n", x.Name, x.PerCheck.Round(time.Microsecond), bench.RobotsGoal)
	}
	if !r.SafetyHeld() {
		return errors.New("our limiter (or the token-list anchor) let a site see more than its cap: see the report")
	}
	return nil
}

// runBenchWorker is one hot-site process of crawler bench.
func runBenchWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crawler bench-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("redis", "", "")
	alg := fs.String("alg", "", "")
	prefix := fs.String("prefix", "", "")
	url := fs.String("url", "", "")
	waiters := fs.Int("waiters", 8, "")
	limit := fs.Int("limit", 3, "")
	d := fs.Duration("duration", time.Second, "")
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	return bench.Worker(ctx, *addr, *alg, *prefix, *url, *waiters, *limit, *d, stdout)
}

// runBenchColly is one colly-alone process of crawler bench.
func runBenchColly(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return bench.CollyWorker(ctx, args)
}
