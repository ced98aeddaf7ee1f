package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/polite-crawler/polite/testserver"
)

// workerArgs are the arguments of each worker process: 'crawler run' on
// --redis, on one new crawl, with the demo's --workers, --lease,
// --semaphore and --log-*, timings fit for a demo, then shared (the
// sites' flags, see siteArgs) and the seeds.
func (d *demoFlags) workerArgs(shared, seeds []string) []string {
	args := []string{"run", "--redis", d.redisURL, "--crawl", fmt.Sprintf("demo-%d", rand.Uint32()),
		"--workers", strconv.Itoa(d.workers), "--lease", d.lease.String(), "--semaphore", d.semaphore,
		"--timeout", "30s", "--visibility", "1m", "--progress", "1h", "--stop-grace", "5s",
		"--log-level", d.logLevel, "--log-format", d.logFormat}
	return append(append(args, shared...), seeds...)
}

// runWorkers runs procs processes of this executable with args until they
// end, saying every 2 s how many requests ts's sites have seen. It returns
// how many failed, other than by a signal that stopped ctx; each failure
// is printed on stderr with the last of what the process logged.
func runWorkers(ctx context.Context, args []string, procs int, ts *testserver.Server, stdout, stderr io.Writer) (failed int, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	results := make([]error, procs)
	logs := make([]bytes.Buffer, procs)
	var wg sync.WaitGroup
	for i := range procs {
		cmd := exec.CommandContext(ctx, exe, args...)
		cmd.Stdout, cmd.Stderr = &logs[i], &logs[i]
		// Let workers give URLs back: SIGTERM stops them gracefully even
		// after a Ctrl-C at the terminal reached them too (a second SIGINT
		// would make them quit at once).
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 10 * time.Second
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = cmd.Run() }()
	}
	watchWorkers(&wg, ts, stdout)
	for i, err := range results {
		if err != nil && signalled(ctx) == 0 { // stopped by a signal: each exits 130 or 143
			failed++
			fmt.Fprintf(stderr, "demo: worker process %d: %v\n%s", i+1, err, tail(logs[i].String(), 20))
		}
	}
	return failed, nil
}

// watchWorkers says every 2 s how many requests ts's sites have seen and
// have in flight, until wg is done.
func watchWorkers(wg *sync.WaitGroup, ts *testserver.Server, stdout io.Writer) {
	start := time.Now()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }() // ends when the children do
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-finished:
			return
		case <-tick.C:
			var reqs, inflight int64
			for _, s := range ts.Stats().Sites {
				reqs, inflight = reqs+s.Requests, inflight+int64(s.InFlight)
			}
			fmt.Fprintf(stdout, "demo: %4.0fs  %d requests so far, %d in flight\n", time.Since(start).Seconds(), reqs, inflight)
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
