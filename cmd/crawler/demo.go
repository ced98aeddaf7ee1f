package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/polite-crawler/polite/internal/logging"
	"github.com/polite-crawler/polite/testserver"
)

// demoUsage is crawler demo's help, before its flags.
const demoUsage = `Usage: crawler demo [flags]

Runs a whole polite crawl on this machine: an embedded Redis, a local test server with many
sites (each with its own address and robots.txt), and several 'crawler run' processes sharing
the crawl. Then prints what each site saw, measured at the server, and exits non-zero if any
site saw more requests at once than its cap, a disallowed request, or a gap under its delay.
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crawler demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sites := fs.Int("sites", 10, "number of test sites")
	profile := fs.String("profile", "mixed", "test site preset: "+strings.Join(testserver.PresetNames(), ", "))
	procs := fs.Int("procs", 3, "crawler worker processes")
	workers := fs.Int("workers", 4, "concurrent fetches per process")
	redisURL := fs.String("redis", "", "use this Redis instead of an embedded one (redis://host:port)")
	semaphore := fs.String("semaphore", "locked", "semaphore mode: locked or atomic")
	lease := fs.Duration("lease", 2*time.Second, "permit lease (the mixed profile has pages that stream longer)")
	listen := fs.String("listen", "127.0.0.1:0", "test server dashboard address")
	limit := fs.Duration("limit", 3*time.Minute, "give up after this long")
	warcDir := fs.String("warc", "", "write every request and response as WARC files here (default: a new directory under $TMPDIR; \"off\" for none)")
	logLevel := fs.String("log-level", "info", "the worker processes' --log-level (their logs are shown when one fails)")
	logFormat := fs.String("log-format", "auto", "the worker processes' --log-format")
	fs.Usage = func() { printUsage(fs, demoUsage) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *procs < 1 || *procs > 64:
		return usageErr("--procs %d: want 1..64", *procs)
	case *workers < 1 || *workers > 256:
		return usageErr("--workers %d: want 1..256", *workers)
	case *semaphore != "locked" && *semaphore != "atomic":
		return usageErr("--semaphore %q: want locked or atomic", *semaphore)
	case logging.CheckLevel(*logLevel) != nil:
		return usageErr("--log-level %q: want %s", *logLevel, logging.Levels)
	case logging.CheckFormat(*logFormat) != nil:
		return usageErr("--log-format %q: want %s", *logFormat, logging.Formats)
	case fs.NArg() > 0:
		return usageErr("unexpected arguments %q", fs.Args())
	}
	ctx, cancel := context.WithTimeout(ctx, *limit)
	defer cancel()

	if *redisURL == "" {
		m, stop, err := embeddedRedis()
		if err != nil {
			return err
		}
		defer stop()
		*redisURL = "redis://" + m.Addr()
		fmt.Fprintf(stdout, "demo: embedded Redis (miniredis) at %s\n", m.Addr())
	}
	p, err := testserver.Preset(*profile, *sites, 1)
	if err != nil {
		return usageErr("%v", err)
	}
	ts, err := testserver.New(p, testserver.WithControl(*listen))
	if err != nil {
		return err
	}
	if err := ts.Start(); err != nil {
		return err
	}
	defer ts.Close()
	var seeds []string
	for _, s := range ts.Sites() {
		seeds = append(seeds, s.URL+"/")
	}
	fmt.Fprintf(stdout, "demo: %d %s sites on 127.0.0.2 and up; dashboard %s\n", len(seeds), *profile, ts.ControlURL())
	var shared []string // --resolve for the sites reached by name, --max-per-ip for a profile's cap per IP
	for _, r := range ts.Resolve() {
		shared = append(shared, "--resolve", r)
	}
	if p.AddressCap > 0 {
		shared = append(shared, "--max-per-ip", strconv.Itoa(p.AddressCap))
	}
	if st := ts.Stats(); st.Shared() {
		fmt.Fprintf(stdout, "demo: the sites share %d IPs (%d by name, told apart by Host), cap per IP %d\n",
			len(st.Addresses), len(ts.Resolve()), p.AddressCap)
	}
	if fragile := slices.ContainsFunc(ts.Sites(), func(s testserver.Site) bool { return s.Spec.Fragile.On() }); fragile {
		// A 503 without Retry-After holds the fleet off a minute by
		// default, doubling: scaled down to the demo's seconds.
		shared = append(shared, "--adaptive-backoff", "2s", "--adaptive-backoff-max", "10s", "--adaptive-forgive", "30s")
		fmt.Fprintln(stdout, "demo: fragile sites: adaptive politeness lowers their cap; hold-offs after a 503 scaled to 2s..10s (60s..24h by default)")
	}
	if *warcDir, err = demoWARCDir(*warcDir); err != nil {
		return err
	}
	if *warcDir != "" {
		shared = append(shared, "--warc", *warcDir)
	}
	fmt.Fprintf(stdout, "demo: %d crawler processes x %d workers, %s semaphore, lease %s\n", *procs, *workers, *semaphore, *lease)

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	crawlName := fmt.Sprintf("demo-%d", rand.Uint32())
	start := time.Now()
	results := make([]error, *procs)
	logs := make([]bytes.Buffer, *procs)
	var wg sync.WaitGroup
	for i := 0; i < *procs; i++ {
		cmd := exec.CommandContext(ctx, exe, append([]string{"run", "--redis", *redisURL, "--crawl", crawlName,
			"--workers", strconv.Itoa(*workers), "--lease", lease.String(), "--semaphore", *semaphore,
			"--timeout", "30s", "--visibility", "1m", "--progress", "1h", "--stop-grace", "5s",
			"--log-level", *logLevel, "--log-format", *logFormat}, append(shared, seeds...)...)...)
		cmd.Stdout, cmd.Stderr = &logs[i], &logs[i]
		// Let workers give URLs back: SIGTERM stops them gracefully even
		// after a Ctrl-C at the terminal reached them too (a second SIGINT
		// would make them quit at once).
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 10 * time.Second
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = cmd.Run() }()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }() // ends when the children do
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-tick.C:
			var reqs, inflight int64
			for _, s := range ts.Stats().Sites {
				reqs, inflight = reqs+s.Requests, inflight+int64(s.InFlight)
			}
			fmt.Fprintf(stdout, "demo: %4.0fs  %d requests so far, %d in flight\n", time.Since(start).Seconds(), reqs, inflight)
		}
	}
	failed := 0
	for i, err := range results {
		if err != nil && signalled(ctx) == 0 { // stopped by a signal: each exits 130 or 143
			failed++
			fmt.Fprintf(stderr, "demo: worker process %d: %v\n%s", i+1, err, tail(logs[i].String(), 20))
		}
	}
	fmt.Fprintf(stdout, "demo: crawl finished in %.1fs\n\n", time.Since(start).Seconds())
	bad, badAddrs := writeVerdict(stdout, ts.Stats())
	writeFragile(stdout, ts.Stats())
	writeWARCNote(stdout, *warcDir)
	switch {
	case signalled(ctx) != 0:
		return nil // exits 130 or 143 (see signalExit)
	case ctx.Err() != nil:
		return fmt.Errorf("gave up after --limit %s", *limit)
	case failed > 0:
		return fmt.Errorf("%d of %d worker processes failed", failed, *procs)
	case bad > 0:
		return fmt.Errorf("%d site(s) saw impolite behaviour", bad)
	case badAddrs > 0:
		return fmt.Errorf("%d IP(s) saw more than their cap at once, or a request for a Host they do not serve (421)", badAddrs)
	}
	fmt.Fprintln(stdout, "\nEvery site saw at most its cap at once, no disallowed request, and its crawl delay kept.")
	return nil
}

// embeddedRedis starts miniredis on loopback, with its key TTLs advanced in
// real time (miniredis only moves time when told).
func embeddedRedis() (*miniredis.Miniredis, func(), error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, nil, fmt.Errorf("embedded Redis: %w", err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // owned by the returned stop func
		defer close(done)
		last := time.Now()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return m, func() { close(stop); <-done; m.Close() }, nil
}

// writeVerdict prints what each site saw and returns how many sites saw a
// violation (testserver.SiteStats.Violation). When sites share an IP, it
// then prints what each IP and port saw at once over all its sites, and
// also returns how many IPs saw a violation (testserver.AddrStats.Violation).
func writeVerdict(w io.Writer, st testserver.Stats) (bad, badAddrs int) {
	bad = writeSiteVerdicts(w, st.Sites)
	if !st.Shared() {
		return bad, 0
	}
	fmt.Fprintln(w)
	return bad, writeAddrVerdicts(w, st)
}

// verdict is a row's last column: VIOLATION when why says one, else ok.
func verdict(why string) string {
	if why != "" {
		return "VIOLATION"
	}
	return "ok"
}

// writeSiteVerdicts prints a row per site and returns how many saw a
// violation.
func writeSiteVerdicts(w io.Writer, sites []testserver.SiteStats) (bad int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "site\trobots.txt asks\tcap\tpages\tmax at once\tover cap\tdisallowed\trobots.txt fetches\tmin gap / delay\t")
	for _, s := range sites {
		gap := "-"
		if s.MinGapMs >= 0 && s.CrawlDelayMs > 0 {
			gap = fmt.Sprintf("%.0f / %d ms", s.MinGapMs, s.CrawlDelayMs)
		}
		why := s.Violation()
		if why != "" {
			bad++
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Host, s.Rules, s.Cap, s.Pages,
			s.MaxInFlight, s.OverCap, s.DisallowedHits, s.RobotsFetches, gap, verdict(why))
	}
	tw.Flush()
	return bad
}

// writeAddrVerdicts prints a row per IP and per port, with the pages of
// their sites, and returns how many IPs saw a violation; a port has none
// of its own ("-").
func writeAddrVerdicts(w io.Writer, st testserver.Stats) (badAddrs int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "address\tsites\tpages\tcap\tmax at once\tover cap\tmisdirected (421)\t")
	pages := map[string]int64{} // per site Host
	for _, s := range st.Sites {
		pages[s.Host] = s.Pages
	}
	row := func(kind, mark string, a testserver.AddrStats) {
		var n int64
		for _, h := range a.Sites {
			n += pages[h]
		}
		limit := "-"
		if a.Cap > 0 {
			limit = strconv.Itoa(a.Cap)
		}
		fmt.Fprintf(tw, "%s %s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\n", kind, a.Addr, len(a.Sites), n, limit, a.MaxInFlight, a.OverCap, a.Misdirected, mark)
	}
	for _, a := range st.Addresses {
		why := a.Violation()
		if why != "" {
			badAddrs++
		}
		row("ip", verdict(why), a)
	}
	for _, a := range st.Listeners {
		row("port", "-", a)
	}
	tw.Flush()
	return badAddrs
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
