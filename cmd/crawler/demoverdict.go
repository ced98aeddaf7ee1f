package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/polite-crawler/polite/testserver"
)

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
