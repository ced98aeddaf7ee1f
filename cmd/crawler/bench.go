package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/polite-crawler/polite/bench"
	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/internal/redistest"
)

// benchUsage is crawler bench's usage, before its flags.
const benchUsage = `Usage: crawler bench [--quick] [--out DIR] [--only SECTIONS] [--redis HOST:PORT|redis://HOST:PORT]

Measures the limiter against its physical limits (PINGs; a BLPOP/RPUSH token list on a hot
site) and against Redis in Action's semaphores, and the crawler against the sites' ideal and
against colly alone, all in one run on this machine, and writes DIR/BENCHMARKS.md with SVG
charts in DIR/` + bench.ChartsDir + `. It needs redis-server on PATH unless --redis is given.
Exits 1 if our limiter ever let a site see more than its cap, a disallowed request or a gap
under its crawl delay. A full run takes a few minutes; --quick under a minute.
`

// runBench wires crawler bench: flags → bench.Run on a redis-server (its
// own unless --redis) → the report in --out and a summary on stdout.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crawler bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "small counts, under a minute: a smoke run (CI); figures are not worth quoting")
	out := fs.String("out", ".", "directory for BENCHMARKS.md and its SVG charts")
	redisAddr := fs.String("redis", "", "host:port (or redis://host:port) of a redis-server of the bench's own (it is FLUSHALLed, its scripts and functions flushed, and MONITORed for a while); default: start a private one, which a few crawls pin to a CPU of its own")
	only := fs.String("only", "", "comma-separated sections to run: "+strings.Join(bench.Sections, ",")+" (default all)")
	fs.Usage = func() { printUsage(fs, benchUsage) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sections, err := benchSections(fs, *only)
	if err != nil {
		return err
	}
	if *redisAddr, err = scratchRedis(*redisAddr); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	addr, redisPID, stop, err := benchRedis(*redisAddr)
	if err != nil {
		return err
	}
	defer stop()
	r, err := bench.Run(ctx, bench.Options{Quick: *quick, Only: sections, Exe: exe, RedisAddr: addr, RedisPID: redisPID, UserAgent: config.Default().UserAgent,
		Command: strings.TrimSpace("crawler bench " + strings.Join(args, " ")), Log: stderr})
	if err == nil {
		err = r.Write(*out)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench: done in %s; report in %s\n", r.Took.Round(time.Second), filepath.Join(*out, "BENCHMARKS.md"))
	r.Summary(stdout)
	if !r.SafetyHeld() {
		return errors.New("our limiter (or the token-list anchor) let a site see more than its cap, a disallowed request or a gap under its crawl delay: see the report")
	}
	return nil
}

// benchRedis is the bench's redis-server: addr when given, else a private
// one that stop ends.
// pid is the private one's process ID (0 for addr: not the bench's to pin
// to a CPU).
func benchRedis(addr string) (_ string, pid int, stop func(), err error) {
	if addr != "" {
		return addr, 0, func() {}, nil
	}
	srv, err := redistest.Start()
	if err != nil {
		return "", 0, nil, fmt.Errorf("bench runs its own redis-server: %w", err)
	}
	return srv.Addr, srv.PID(), func() { srv.Close() }, nil
}

// scratchRedis is the address of a --redis flag naming a Redis that a
// command FLUSHALLs (bench, redis-replay): host:port, or a redis:// URL
// with nothing but a host and a port (6379 when left out, as crawler run
// reads it), since a database, user, password or options would be ignored
// while the whole server is flushed ("" stays ""). Anything else is a usage
// error, said before anything is flushed or dialled.
func scratchRedis(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	addr := s
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		switch {
		case err != nil:
			return "", usageErr("--redis %q: %v", s, err)
		case u.Scheme != "redis":
			return "", usageErr("--redis %q: only redis:// (no TLS, no unix socket)", s)
		case u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "":
			return "", usageErr("--redis %q: want redis://host:port alone (no database, user, password or options: the whole server is FLUSHALLed)", s)
		}
		addr = u.Host
		if u.Port() == "" && u.Hostname() != "" {
			addr = net.JoinHostPort(u.Hostname(), "6379")
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "", usageErr("--redis %q: want host:port or redis://host:port", s)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", usageErr("--redis %q: port %q is not a port number", s, port)
	}
	return addr, nil
}

// benchSections are --only's sections (nil: all); arguments or an unknown
// section are a usage error.
func benchSections(fs *flag.FlagSet, only string) ([]string, error) {
	if fs.NArg() > 0 {
		return nil, usageErr("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if only == "" {
		return nil, nil
	}
	sections := strings.Split(only, ",")
	if err := bench.CheckSections(sections); err != nil {
		return nil, usageErr("--only: %v", err)
	}
	return sections, nil
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
	start := fs.Int64("start", 0, "") // Unix ms when to begin (0: at once)
	d := fs.Duration("duration", time.Second, "")
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	return bench.Worker(ctx, *addr, *alg, *prefix, *url, *waiters, *limit, time.UnixMilli(*start), *d, stdout)
}

// runBenchColly is one colly-alone process of crawler bench.
func runBenchColly(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return bench.CollyWorker(ctx, args)
}
