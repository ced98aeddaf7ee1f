package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/bench"
	"github.com/polite-crawler/polite/internal/redistest"
)

const replayUsage = `Usage: crawler redis-replay --capture FILE [--pages N] [--depth N] [--redis HOST:PORT|redis://HOST:PORT | --callgrind]

Replays the commands a crawl sent to Redis, captured with MONITOR, against a Redis of its own,
in order, and reports what they cost Redis: CPU time and commands run (those inside scripts
included), and with --pages, per page. A crawl's own figures move by a third on a shared machine;
a replay measures the same work without the crawl around it, and with --callgrind exactly: the
instructions Redis ran, counted by valgrind, the same on every run. Use it to show what a change
to a script saves.

The scripts read Redis's clock and a replay runs at its own pace (under callgrind some 50× slower),
so what depends on time (a lease or a park running out, a crawl delay) can go another way than
in the crawl: two replays of one capture agree to 0.3 %, two captures of one crawl to 0.7 %.

Capture on a fresh redis-server, so that the scripts' code (FUNCTION LOAD; SCRIPT LOAD or EVAL) is in it, but
start the crawl once it is past the limiter's restart guard (a Redis younger than a lease, plus
the crawl delay and a second, grants a site with no counter no permits), or the capture holds the
idle workers' polls of that wait (5 % of a 6,000-page crawl). For the same reason the replay starts
only once its own Redis has been up --age (12 s; longer for a crawl with a longer lease or crawl
delays), or the captured grants would be refused and what follows them go another way:
  redis-server --port 6399 --save '' &
  sleep 12    # the default 10 s lease and no crawl delay; longer with --lease or crawl delays
  redis-cli -p 6399 monitor > crawl.monitor &
  crawler run --redis redis://127.0.0.1:6399 ... ; kill %2
  crawler redis-replay --capture crawl.monitor --pages 6000 --callgrind

The capture's SUBSCRIBE, CLIENT, blocking pops, MULTI/EXEC and the like are left out (counted);
a transaction's commands are replayed one by one. --redis is FLUSHALLed: give only a Redis of
the replay's own. To see where the instructions go: callgrind_annotate on --callgrind-out.
`

// runRedisReplay wires crawler redis-replay: the capture → a Redis (its own
// unless --redis; under callgrind with --callgrind) → bench.Replay → a report.
func runRedisReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crawler redis-replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	capture := fs.String("capture", "", "MONITOR capture of a crawl (redis-cli monitor's output; - for stdin)")
	pages := fs.Int("pages", 0, "pages the captured crawl fetched, for figures per page (0: none)")
	depth := fs.Int("depth", 50, "commands sent per round trip (1: one at a time)")
	redisAddr := fs.String("redis", "", "host:port (or redis://host:port) of a redis-server of the replay's own (it is FLUSHALLed, its scripts and functions flushed); default: start a private one")
	grind := fs.Bool("callgrind", false, "run the private redis-server under valgrind's callgrind and report the instructions it ran for the replay (needs valgrind; slow: about 50× the replay)")
	grindOut := fs.String("callgrind-out", "", "with --callgrind, keep callgrind's profile in this file (for callgrind_annotate)")
	age := fs.Duration("age", replayAge, "replay only once the Redis has been up this long: the limiter's restart guard refuses new sites' permits on a Redis younger than a lease plus the crawl delay and a second (11 s with the defaults), and a replay run inside it measures the refusals, not the crawl (0: do not wait)")
	fs.Usage = func() { printUsage(fs, replayUsage) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	case *capture == "":
		return usageErr("--capture is required")
	case *depth < 1:
		return usageErr("--depth must be at least 1")
	case *pages < 0:
		return usageErr("--pages must not be negative")
	case *grind && *redisAddr != "":
		return usageErr("--callgrind runs its own redis-server: leave out --redis")
	case *grindOut != "" && !*grind:
		return usageErr("--callgrind-out needs --callgrind")
	case *age < 0:
		return usageErr("--age must not be negative")
	}
	var err error
	if *redisAddr, err = scratchRedis(*redisAddr); err != nil {
		return err
	}
	c, err := readCapture(*capture)
	if err != nil {
		return err
	}
	if len(c.Commands) == 0 {
		return fmt.Errorf("no commands to replay in %s (is it redis-cli monitor's output?)", *capture)
	}

	var srv *grindRedis
	addr, stop := *redisAddr, func() {}
	switch {
	case *grind:
		if srv, err = startGrindRedis(ctx, *grindOut); err != nil {
			return err
		}
		defer srv.close()
	case addr == "":
		if addr, _, stop, err = benchRedis(""); err != nil {
			return err
		}
	}
	defer stop()
	opts := &redis.Options{Addr: addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute, DisableIdentity: true}
	var start func() error
	if srv != nil {
		opts.Network, opts.Addr = "unix", srv.sock
		start = func() error { return srv.zero(ctx) } // count the replay, not the start-up
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := awaitAge(ctx, rdb, *age, stderr); err != nil {
		return err
	}
	r, err := bench.Replay(ctx, rdb, c, *depth, start)
	if err != nil {
		return err
	}
	var instr int64
	if srv != nil {
		if instr, err = srv.finish(ctx); err != nil {
			return err
		}
	}
	writeReplay(stdout, c, r, *depth, *pages, instr)
	return nil
}

// replayAge is redis-replay's default --age: the restart guard with the
// default 10 s lease and no crawl delay (11 s), and a second to spare.
const replayAge = 12 * time.Second

// awaitAge waits until the Redis of rdb has been up age (its
// uptime_in_seconds), saying so on w when it has to wait; a Redis whose
// INFO has no uptime is taken as old enough.
func awaitAge(ctx context.Context, rdb *redis.Client, age time.Duration, w io.Writer) error {
	_, err := redistest.AwaitUptime(ctx, rdb, age, func(up time.Duration) {
		fmt.Fprintf(w, "waiting until the Redis has been up %s (up %s): past the limiter's restart guard (--age)\n", age, up)
	})
	if err != nil {
		return fmt.Errorf("the Redis's %w", err)
	}
	return nil
}

func readCapture(name string) (bench.ReplayCapture, error) {
	if name == "-" {
		return bench.ReadCapture(os.Stdin)
	}
	f, err := os.Open(name)
	if err != nil {
		return bench.ReplayCapture{}, err
	}
	defer f.Close()
	return bench.ReadCapture(bufio.NewReaderSize(f, 1<<20))
}

func writeReplay(w io.Writer, c bench.ReplayCapture, r bench.ReplayResult, depth, pages int, instr int64) {
	fmt.Fprintf(w, "replayed %d commands, %d to a round trip, in %s: %d errors", r.Commands, depth, r.Took.Round(time.Millisecond), r.Errors)
	if r.FirstError != "" {
		fmt.Fprintf(w, " (first: %.120s)", r.FirstError)
	}
	fmt.Fprintln(w)
	if len(c.Skipped) > 0 {
		names := make([]string, 0, len(c.Skipped))
		for n := range c.Skipped {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s %d", n, c.Skipped[n])
		}
		fmt.Fprintf(w, "left out: %s\n", strings.Join(parts, ", "))
	}
	if len(c.Missing) > 0 {
		fmt.Fprintf(w, "scripts or functions called but not loaded in the capture: %d (their calls fail: capture on a fresh redis-server)\n", len(c.Missing))
	}
	if instr > 0 { // Redis's CPU time under valgrind says nothing
		fmt.Fprintf(w, "Redis: %d instructions (callgrind), %.0f commands run (those inside scripts included)\n", instr, r.Calls)
	} else {
		fmt.Fprintf(w, "Redis: %s CPU, %.0f commands run (those inside scripts included)\n", r.CPU.Round(time.Millisecond), r.Calls)
	}
	if pages > 0 {
		p := float64(pages)
		cost := fmt.Sprintf("%.1f µs Redis CPU", float64(r.CPU.Microseconds())/p)
		if instr > 0 {
			cost = fmt.Sprintf("%.0f instructions", float64(instr)/p)
		}
		fmt.Fprintf(w, "per page (%d pages): %s, %.1f commands sent, %.1f run\n", pages, cost, float64(r.Commands)/p, r.Calls/p)
	}
}

// grindRedis is a private redis-server run under callgrind, on a unix
// socket in a directory of its own (no port another server could hold).
type grindRedis struct {
	sock, out, dir string
	cmd            *exec.Cmd
	exited         chan error
}

func startGrindRedis(ctx context.Context, out string) (*grindRedis, error) {
	for _, bin := range []string{"valgrind", "callgrind_control", "redis-server"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("--callgrind needs %s on PATH (Debian/Ubuntu: apt-get install -y valgrind redis-server)", bin)
		}
	}
	dir, err := os.MkdirTemp("", "redis-replay-")
	if err != nil {
		return nil, err
	}
	g := &grindRedis{sock: filepath.Join(dir, "redis.sock"), out: out, dir: dir, exited: make(chan error, 1)}
	if g.out == "" {
		g.out = filepath.Join(dir, "callgrind.out")
	}
	logName := filepath.Join(dir, "redis.log")
	log, err := os.Create(logName)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	g.cmd = exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+g.out, "redis-server",
		"--port", "0", "--unixsocket", g.sock, "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", dir)
	g.cmd.Stdout, g.cmd.Stderr = log, log
	if err := g.cmd.Start(); err != nil {
		log.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start valgrind: %w", err)
	}
	go func() { // owned by g: ends when the server exits (finish or close)
		err := g.cmd.Wait()
		log.Close()
		g.exited <- err
	}()
	deadline := time.NewTimer(time.Minute) // valgrind takes seconds to start
	defer deadline.Stop()
	for {
		conn, err := net.DialTimeout("unix", g.sock, time.Second)
		if err == nil {
			conn.Close()
			return g, nil
		}
		var why error
		select {
		case werr := <-g.exited:
			g.exited = nil
			why = fmt.Errorf("redis-server under callgrind exited (%v)", werr)
		case <-ctx.Done():
			why = ctx.Err()
		case <-deadline.C:
			why = errors.New("redis-server under callgrind did not answer within a minute")
		case <-time.After(100 * time.Millisecond):
			continue
		}
		tail := redistest.LogTail(logName)
		g.close()
		return nil, fmt.Errorf("%w; its log: %s", why, tail)
	}
}

// zero resets callgrind's counts, so that only what follows is counted.
func (g *grindRedis) zero(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "callgrind_control", "--zero", strconv.Itoa(g.cmd.Process.Pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("callgrind_control --zero: %w: %s", err, out)
	}
	return nil
}

// finish shuts the server down (callgrind then writes its profile) and
// returns the instructions counted since zero.
func (g *grindRedis) finish(ctx context.Context) (int64, error) {
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: g.sock, MaxRetries: -1, DisableIdentity: true})
	_ = rdb.ShutdownNoSave(ctx).Err() // the connection closes: no reply to read
	rdb.Close()
	select {
	case <-g.exited:
		g.exited = nil
	case <-time.After(time.Minute):
		return 0, errors.New("redis-server under callgrind did not exit within a minute of SHUTDOWN")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return callgrindTotal(g.out)
}

// close stops the server if it still runs (SIGTERM, then SIGKILL after 10 s)
// and removes its directory (and the profile, unless --callgrind-out asked
// to keep it elsewhere).
func (g *grindRedis) close() {
	if g.exited != nil {
		g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.exited:
		case <-time.After(10 * time.Second):
			g.cmd.Process.Kill()
			<-g.exited
		}
		g.exited = nil
	}
	os.RemoveAll(g.dir)
}

// callgrindTotal reads the instruction count of a callgrind profile: its
// "totals:" line (or, from older valgrinds, "summary:").
func callgrindTotal(name string) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var total int64 = -1
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "totals" && k != "summary") {
			continue
		}
		n, err := strconv.ParseInt(strings.Fields(v + " x")[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("callgrind profile %s: %s: %w", name, k, err)
		}
		total = n
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if total < 0 {
		return 0, fmt.Errorf("callgrind profile %s has no totals", name)
	}
	return total, nil
}
