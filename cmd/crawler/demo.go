package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/polite-crawler/polite/internal/logging"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/testserver"
)

// demoUsage is crawler demo's help, before its flags.
const demoUsage = `Usage: crawler demo [flags]

Runs a whole polite crawl on this machine: an embedded Redis, a local test server with many
sites (each with its own address and robots.txt), and several 'crawler run' processes sharing
the crawl. Then prints what each site saw, measured at the server, and exits non-zero if any
site saw more requests at once than its cap, a disallowed request, or a gap under its delay.
`

// demoFlags are crawler demo's settings.
type demoFlags struct {
	sites, procs, workers                      int
	profile, redisURL, semaphore, listen, warc string
	logLevel, logFormat                        string
	lease, limit                               time.Duration
	args                                       []string // left after the flags: none allowed
}

// parseDemoFlags parses crawler demo's flags (-h prints demoUsage and them).
func parseDemoFlags(args []string, stderr io.Writer) (*demoFlags, error) {
	fs := flag.NewFlagSet("crawler demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	d := &demoFlags{}
	fs.IntVar(&d.sites, "sites", 10, "number of test sites")
	fs.StringVar(&d.profile, "profile", "mixed", "test site preset: "+strings.Join(testserver.PresetNames(), ", "))
	fs.IntVar(&d.procs, "procs", 3, "crawler worker processes")
	fs.IntVar(&d.workers, "workers", 4, "concurrent fetches per process")
	fs.StringVar(&d.redisURL, "redis", "", "use this Redis instead of an embedded one (redis://host:port)")
	fs.StringVar(&d.semaphore, "semaphore", limiter.ModeLockedName, "semaphore mode: locked or atomic")
	fs.DurationVar(&d.lease, "lease", 2*time.Second, "permit lease (the mixed profile has pages that stream longer)")
	fs.StringVar(&d.listen, "listen", "127.0.0.1:0", "test server dashboard address")
	fs.DurationVar(&d.limit, "limit", 3*time.Minute, "give up after this long")
	fs.StringVar(&d.warc, "warc", "", "write every request and response as WARC files here (default: a new directory under $TMPDIR; \"off\" for none)")
	fs.StringVar(&d.logLevel, "log-level", "info", "the worker processes' --log-level (their logs are shown when one fails)")
	fs.StringVar(&d.logFormat, "log-format", "auto", "the worker processes' --log-format")
	fs.Usage = func() { printUsage(fs, demoUsage) }
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	d.args = fs.Args()
	return d, d.check()
}

// check returns a usage error for the first setting the workers would
// refuse or the demo cannot run with, checked as 'crawler run' checks
// its own (limiter.ParseMode, logging.Check*).
func (d *demoFlags) check() error {
	switch {
	case d.procs < 1 || d.procs > 64:
		return usageErr("--procs %d: want 1..64", d.procs)
	case d.workers < 1 || d.workers > 256:
		return usageErr("--workers %d: want 1..256", d.workers)
	}
	if _, err := limiter.ParseMode(d.semaphore); err != nil {
		return usageErr("--semaphore %q: want %s or %s", d.semaphore, limiter.ModeLockedName, limiter.ModeAtomicName)
	}
	switch {
	case logging.CheckLevel(d.logLevel) != nil:
		return usageErr("--log-level %q: want %s", d.logLevel, logging.Levels)
	case logging.CheckFormat(d.logFormat) != nil:
		return usageErr("--log-format %q: want %s", d.logFormat, logging.Formats)
	case len(d.args) > 0:
		return usageErr("unexpected arguments %q", d.args)
	}
	return nil
}

// runDemo wires crawler demo: flags → Redis (embedded unless --redis) →
// the test sites → the worker processes → what the sites saw, and an
// error when they saw a violation (demoOutcome).
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	d, err := parseDemoFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, d.limit)
	defer cancel()
	stopRedis, err := d.startRedis(stdout)
	if err != nil {
		return err
	}
	defer stopRedis()
	ts, seeds, shared, err := d.startSites(stdout)
	if err != nil {
		return err
	}
	defer ts.Close()
	fmt.Fprintf(stdout, "demo: %d crawler processes x %d workers, %s semaphore, lease %s\n", d.procs, d.workers, d.semaphore, d.lease)
	start := time.Now()
	failed, err := runWorkers(ctx, d.workerArgs(shared, seeds), d.procs, ts, stdout, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "demo: crawl finished in %.1fs\n\n", time.Since(start).Seconds())
	bad, badAddrs := writeVerdict(stdout, ts.Stats())
	writeFragile(stdout, ts.Stats())
	writeWARCNote(stdout, d.warc)
	return demoOutcome(ctx, d, failed, bad, badAddrs, stdout)
}

// demoOutcome is the demo's exit: nil after a signal (it exits 130 or 143,
// see signalExit); an error when it gave up after --limit, when a worker
// process failed, or when a site or an IP saw a violation, in that order;
// else nil, after saying every site was crawled politely.
func demoOutcome(ctx context.Context, d *demoFlags, failed, bad, badAddrs int, stdout io.Writer) error {
	switch {
	case signalled(ctx) != 0:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("gave up after --limit %s", d.limit)
	case failed > 0:
		return fmt.Errorf("%d of %d worker processes failed", failed, d.procs)
	case bad > 0:
		return fmt.Errorf("%d site(s) saw impolite behaviour", bad)
	case badAddrs > 0:
		return fmt.Errorf("%d IP(s) saw more than their cap at once, or a request for a Host they do not serve (421)", badAddrs)
	}
	fmt.Fprintln(stdout, "\nEvery site saw at most its cap at once, no disallowed request, and its crawl delay kept.")
	return nil
}

// startRedis sets --redis to an embedded Redis when it is not given, and
// says so; stop ends it.
func (d *demoFlags) startRedis(stdout io.Writer) (stop func(), err error) {
	if d.redisURL != "" {
		return func() {}, nil
	}
	m, stop, err := embeddedRedis()
	if err != nil {
		return nil, err
	}
	d.redisURL = "redis://" + m.Addr()
	fmt.Fprintf(stdout, "demo: embedded Redis (miniredis) at %s\n", m.Addr())
	return stop, nil
}

// startSites starts the test sites of --profile and says what they are.
// It returns their seeds and the flags every worker needs for them: the
// names to --resolve, the profile's cap per IP, hold-offs scaled down to
// the demo's seconds when some sites are fragile, and --warc.
func (d *demoFlags) startSites(stdout io.Writer) (ts *testserver.Server, seeds, shared []string, err error) {
	p, err := testserver.Preset(d.profile, d.sites, 1)
	if err != nil {
		return nil, nil, nil, usageErr("%v", err)
	}
	if ts, err = testserver.New(p, testserver.WithControl(d.listen)); err == nil {
		err = ts.Start()
	}
	if err != nil {
		return nil, nil, nil, err
	}
	for _, s := range ts.Sites() {
		seeds = append(seeds, s.URL+"/")
	}
	fmt.Fprintf(stdout, "demo: %d %s sites on 127.0.0.2 and up; dashboard %s\n", len(seeds), d.profile, ts.ControlURL())
	shared = siteArgs(ts, p, stdout)
	if d.warc, err = demoWARCDir(d.warc); err != nil {
		ts.Close()
		return nil, nil, nil, err
	}
	if d.warc != "" {
		shared = append(shared, "--warc", d.warc)
	}
	return ts, seeds, shared, nil
}

// siteArgs are the flags the workers need for ts's sites, and says why:
// --resolve for the sites reached by name, --max-per-ip for a profile's
// cap per IP, and, when some sites are fragile, adaptive politeness's
// hold-offs after a 503 scaled down to the demo's seconds.
func siteArgs(ts *testserver.Server, p testserver.Profile, stdout io.Writer) []string {
	var shared []string
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
	if slices.ContainsFunc(ts.Sites(), func(s testserver.Site) bool { return s.Spec.Fragile.On() }) {
		// A 503 without Retry-After holds the fleet off a minute by
		// default, doubling: scaled down to the demo's seconds.
		shared = append(shared, "--adaptive-backoff", "2s", "--adaptive-backoff-max", "10s", "--adaptive-forgive", "30s")
		fmt.Fprintln(stdout, "demo: fragile sites: adaptive politeness lowers their cap; hold-offs after a 503 scaled to 2s..10s (60s..24h by default)")
	}
	return shared
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
