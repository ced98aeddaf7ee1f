package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/polite-crawler/polite/testserver"
)

// testserverUsage is crawler testserver's help, before its flags.
const testserverUsage = `Usage: crawler testserver [flags]

Serves many web sites on loopback, each with its own address, robots.txt and pages,
and measures what each site sees: requests in flight against its cap, gaps against its
crawl delay, hits on disallowed paths, robots.txt fetches, duplicates. Runs until interrupted
(Ctrl-C or SIGTERM: it exits 130 or 143, as every command a signal stops, after its summary),
then prints a summary per site, and per address when sites share one (the shared preset, or
"address"/"vhost" in a profile file: virtual hosts by Host header, several ports on one IP;
a site with a vhost is reached by name with curl's --resolve NAME:PORT:IP, printed below).
Fragile sites (the fragile preset, or "fragile" in a profile file) slow down with each request in
flight and answer 503 without Retry-After past a limit; the summary adds their latency and 5xx.
With --port N the URLs stay the same from run to run: the dashboard is on 127.0.0.1:N and the sites
listen on N+1, N+2, ..., one port per listener in profile order (one per site, but the vhosts of
one address share one). A port in use is an error naming it. The dashboard updates itself every 2 s.
`

// runTestserver wires crawler testserver: flags → the profile's sites,
// served until ctx ends → a summary of what each saw.
func runTestserver(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crawler testserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sites := fs.Int("sites", 20, "number of sites")
	profile := fs.String("profile", "mixed", "preset: "+strings.Join(testserver.PresetNames(), ", ")+"; or a JSON profile file")
	seed := fs.Int64("seed", 1, "seed for pages and links (presets only)")
	listen := fs.String("listen", "127.0.0.1:8080", "control address: dashboard at /, figures at /_stats, POST /_reset")
	sameHost := fs.Bool("same-host", false, "put every site on 127.0.0.1 (ports differ) instead of 127.0.0.2, 127.0.0.3, ...")
	port := fs.Int("port", 0, "fixed ports, the same every run: the dashboard on 127.0.0.1:N, the sites' listeners on N+1, N+2, ... in profile order (instead of --listen; 0: ports the system chooses)")
	fs.Usage = func() { printUsage(fs, testserverUsage) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	opts, err := testserverOptions(fs, *listen, *port, *sameHost)
	if err != nil {
		return err
	}
	p, err := loadProfile(*profile, *sites, *seed)
	if err != nil {
		return usageErr("%v", err)
	}
	srv, err := startTestserver(p, opts, stdout)
	if err != nil {
		return err
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "testserver: stopping; waiting for requests in flight")
	err = srv.Close()
	writeSummary(stdout, srv.Stats())
	return err
}

// startTestserver serves p's sites with opts and says where: each site's
// URL, cap, crawl delay and --resolve, and the control URLs.
func startTestserver(p testserver.Profile, opts []testserver.Option, stdout io.Writer) (*testserver.Server, error) {
	srv, err := testserver.New(p, opts...)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "testserver: profile %s, %d sites\n", p.Name, len(p.Sites))
	for _, s := range srv.Sites() {
		resolve := ""
		if r := s.Resolve(); r != "" {
			resolve = " (--resolve " + r + ")"
		}
		fmt.Fprintf(stdout, "site %s cap %d%s%s\n", s.URL, s.Cap, delayNote(s.CrawlDelay), resolve)
	}
	fmt.Fprintf(stdout, "control %s (dashboard), %s/_stats (JSON)\n", srv.ControlURL(), srv.ControlURL())
	return srv, nil
}

// testserverOptions checks --listen and --port and turns them, with
// --same-host, into the server's options: with --port N the control
// address is 127.0.0.1:N and the sites' ports start at N+1.
func testserverOptions(fs *flag.FlagSet, listen string, port int, sameHost bool) ([]testserver.Option, error) {
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return nil, usageErr("--listen %q: want host:port (e.g. 127.0.0.1:8080)", listen)
	}
	opts := []testserver.Option{testserver.WithControl(listen)}
	switch listenSet := flagGiven(fs, "listen"); {
	case port < 0 || port > 65534:
		return nil, usageErr("--port %d: want 1..65534 (0: ports the system chooses)", port)
	case port > 0 && listenSet:
		return nil, usageErr("give --listen or --port, not both (with --port %d the dashboard is on 127.0.0.1:%d)", port, port)
	case port > 0:
		opts = []testserver.Option{testserver.WithControl(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))), testserver.WithBasePort(port + 1)}
	}
	if sameHost {
		opts = append(opts, testserver.WithSameHost())
	}
	return opts, nil
}

// flagGiven says whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// loadProfile takes a preset name or, when name ends in .json, a file.
func loadProfile(name string, sites int, seed int64) (testserver.Profile, error) {
	if strings.HasSuffix(name, ".json") {
		return testserver.LoadProfile(name)
	}
	if sites < 1 || sites > 60000 {
		return testserver.Profile{}, fmt.Errorf("--sites %d: want 1..60000", sites)
	}
	return testserver.Preset(name, sites, seed)
}

func delayNote(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmt.Sprintf(", crawl delay %v", d)
}

// writeSummary prints a row per site and, when an IP serves more than one
// site, a row per IP and per port on it.
func writeSummary(w io.Writer, st testserver.Stats) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "site\tcap\tmax in flight\tover cap\trequests\tdisallowed\trobots.txt\tdups\tmin gap ms\t")
	for _, s := range st.Sites {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t\n", s.Host, s.Cap, s.MaxInFlight, s.OverCap,
			s.Requests, s.DisallowedHits, s.RobotsFetches, s.DuplicateFetches, s.MinGapMs)
	}
	tw.Flush()
	writeAddresses(w, st)
	writeFragile(w, st)
}

// writeFragile prints, when some sites are fragile (they slow down as
// requests pile up, and refuse some), what each of them went through:
// its latency percentiles and its 5xx answers, as the site saw them.
// Nothing for sturdy sites, so their tables stay as they were.
func writeFragile(w io.Writer, st testserver.Stats) {
	var rows []testserver.SiteStats
	for _, s := range st.Sites {
		if s.Fragile != "" {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fragile site\tpages timed\tp50 ms\tp95 ms\tp99 ms\tmax ms\t5xx\toverloaded 503\tmax in flight\tbehaviour")
	for _, s := range rows {
		l := s.Latency
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t%s\n", s.Host, l.Count, l.P50Ms, l.P95Ms, l.P99Ms, l.MaxMs,
			s.Status5xx, s.Overloaded, s.MaxInFlight, s.Fragile)
	}
	tw.Flush()
	fmt.Fprintln(w, "(latency from a page's arrival to the end of its body, as the site saw it; overloaded: 503s without Retry-After)")
}

// writeAddresses prints, when sites share an IP, what each IP and each port
// on it had in flight over all its sites, and how many requests it answered
// 421 (a Host it does not serve).
func writeAddresses(w io.Writer, st testserver.Stats) {
	if !st.Shared() {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "address\tsites\tcap\tmax in flight\tover cap\trequests\tmisdirected\tconnections\t")
	for _, rows := range []struct {
		kind string
		list []testserver.AddrStats
	}{{"ip", st.Addresses}, {"port", st.Listeners}} {
		for _, a := range rows.list {
			fmt.Fprintf(tw, "%s %s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", rows.kind, a.Addr, len(a.Sites), a.Cap, a.MaxInFlight, a.OverCap,
				a.Requests, a.Misdirected, a.Connections)
		}
	}
	tw.Flush()
}
