package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Summary writes the run's figures to w, one line each, for a terminal:
// "  <section>  <row>  <figures>". Every line of a row that a site's cap
// bounds ends "most at once N (cap C)".
func (r *Report) Summary(w io.Writer) {
	r.limiterSummary(w)
	r.crawlSummary(w)
	r.adaptiveSummary(w)
}

func (r *Report) limiterSummary(w io.Writer) {
	for _, x := range r.Uncontended {
		fmt.Fprintf(w, "  uncontended %-28s p50 %6s = %.2f× two PINGs, the stricter ratio (%.2f× back-to-back, %.2f× interleaved)\n", x.Alg, x.P50.Round(time.Microsecond), x.Judged, x.RatioB2B, x.Ratio)
	}
	for _, x := range r.Burst {
		fmt.Fprintf(w, "  burst       %-28s %d callers, %d process(es): %s = %.2f× atomic, %.1f commands/caller = %.2f× atomic\n", x.Alg, x.Callers, x.Procs, x.Took.Round(100*time.Microsecond), x.VsAtomicTook, x.Commands, x.VsAtomicCmds)
	}
	for _, x := range r.HotSite {
		label := "hot site" // the token list is the anchor the others are measured by, not a contender
		if x.Alg == AlgTokenList {
			label = "anchor"
		}
		fmt.Fprintf(w, "  %-11s %-28s %6.0f grants/s = %.3f× token list, %5.1f%% of slot time, gap %s, release p50 %s, fairness %.3f, most at once %d (cap %d)\n",
			label, x.Alg, x.PerSec, x.VsTokens, x.PctOfHolds, usOrDash(x.Gap), usOrDash(x.ReleaseP50), x.Jain, x.MaxAtOnce, r.HotSpec.Limit)
	}
	for _, x := range r.Throughput {
		fmt.Fprintf(w, "  throughput  %-28s %6.0f/s = %.2f× the book's lock-guarded\n", x.Alg, x.PerSec, x.VsBook)
	}
}

func (r *Report) crawlSummary(w io.Writer) {
	for _, x := range r.Crawl {
		cost := ""
		if x.Mode != "" {
			cost = fmt.Sprintf(", %.2f round trips and %s Redis CPU per page", x.RoundTrips, x.RedisCPU.Round(time.Microsecond))
		}
		fmt.Fprintf(w, "  crawl       %-32s %4.0f%% of ideal, %.3f× colly alone%s, most at once %d (cap %d)\n", x.Name, 100*x.Util, x.VsColly, cost, x.MaxAtOnce, x.Cap)
	}
	for _, x := range perCoreByMode(r.Crawl) {
		fmt.Fprintf(w, "  redis core  %-28s %s Redis CPU per page at the crawls' rate: one Redis core serves %.0f pages/s (×M masters, as long as sites spread over them)\n",
			"polite "+x.Mode, x.CPU.Round(time.Microsecond), x.PagesSec)
	}
	for _, x := range r.OwnCore {
		fmt.Fprintf(w, "  redis own   %-28s %s Redis CPU per page (%s–%s) with Redis on a CPU of its own: one Redis core serves %.0f pages/s\n",
			"polite "+x.Mode, x.RedisCPU.Round(time.Microsecond), x.CPUMin.Round(time.Microsecond), x.CPUMax.Round(time.Microsecond), coreRate(x.RedisCPU))
	}
	if r.OwnCoreNot != "" {
		fmt.Fprintf(w, "  redis own   not measured: %s\n", r.OwnCoreNot)
	}
	for _, x := range r.Busy {
		if x.NotMeasured != "" {
			fmt.Fprintf(w, "  redis busy  %-28s not measured: %s\n", "polite "+x.Mode, x.NotMeasured)
		}
		if x.CPU > 0 {
			fmt.Fprintf(w, "  redis busy  %-28s %s Redis CPU per page replayed back to back (%d to a round trip): a busy Redis core serves at most %.0f pages/s\n",
				"polite "+x.Mode, x.CPU.Round(time.Microsecond), x.Depth, x.PagesSec())
		}
	}
	if x := r.Wake; x != nil && x.One > 0 {
		fmt.Fprintf(w, "  redis wake  a PING costs Redis %s of CPU from 1 client at a time, %s from %d at once\n", x.One.Round(time.Microsecond), x.Many.Round(time.Microsecond), x.Clients)
	}
	for _, x := range r.Scale {
		fmt.Fprintf(w, "  scale       %-28s %4.0f%% of ideal, %.1f Redis round trips/page, most at once %d (cap %d)\n", x.Name, 100*x.Util, x.RoundTrips, x.MaxAtOnce, x.Cap)
	}
	for _, x := range r.Cluster {
		var spread []string
		for _, m := range x.Masters {
			spread = append(spread, fmt.Sprintf("%.0f%%", 100*m.ShareCPU))
		}
		fmt.Fprintf(w, "  cluster     %-32s %4.0f%% of ideal, %.2f round trips and %s Redis CPU per page (by master %s), most at once %d (cap %d)\n",
			x.Name, 100*x.Util, x.RoundTrips, x.RedisCPU.Round(time.Microsecond), strings.Join(spread, " "), x.MaxAtOnce, x.Cap)
	}
}

func (r *Report) adaptiveSummary(w io.Writer) {
	for _, x := range r.Fragile {
		fmt.Fprintf(w, "  fragile     adaptive %-5v %d processes   %.1f pages/s, %d 503s, p95 %.0f ms, effective cap %d, most at once %d (cap %d)\n",
			x.Adaptive, x.Procs, x.PagesPerSec, x.Overloaded, x.P95, x.Cap, x.MaxAtOnce, siteCap)
	}
	for _, x := range r.Healthy {
		fmt.Fprintf(w, "  healthy     %-32s %4.0f%% of ideal, %.0f pages/s steady, most at once %d (cap %d)\n", x.Name, 100*x.Util, x.Steady, x.MaxAtOnce, x.Cap)
	}
	if s := r.Seen; s != nil {
		fmt.Fprintf(w, "  seen        %d URLs: %.1f bytes of Redis each as fingerprints, %.1f kept whole\n", s.URLs, s.PerURL, s.URLSetPer)
	}
	for _, x := range r.Robots {
		g := goals.robotsPerPath
		fmt.Fprintf(w, "  robots      %s: %s per check (goal %s %v)\n", x.Name, x.PerCheck.Round(time.Microsecond), g.cmp, time.Duration(g.at))
	}
}
