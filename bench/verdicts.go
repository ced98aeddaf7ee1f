package bench

import "fmt"

// verdict is one goal and what this run measured against it.
type verdict struct {
	what, goal, got string
	met             bool
}

// verdicts are the goals that the sections which ran can judge, each
// judged and written by its entry in goals.
func (r *Report) verdicts() []verdict {
	var v []verdict
	for _, x := range r.Uncontended {
		if g, ok := goals.uncontended[x.Alg]; ok {
			v = append(v, verdict{"uncontended p50, " + x.Alg, g.String(), fmt.Sprintf("%.2f× (%.2f× back-to-back, %.2f× interleaved)", x.Judged, x.RatioB2B, x.Ratio), g.met(x.Judged)})
		}
	}
	for _, x := range r.Throughput {
		if g, ok := goals.throughput[x.Alg]; ok {
			v = append(v, verdict{"throughput, " + x.Alg, g.String(), fmt.Sprintf("%.2f×", x.VsBook), g.met(x.VsBook)})
		}
	}
	if f := r.Footprint; f != nil {
		g := goals.keysLeft
		v = append(v, verdict{"keys left after sites go idle", g.String(), fmt.Sprint(f.KeysLeftAfterIdle), g.met(float64(f.KeysLeftAfterIdle))})
	}
	v = append(v, r.burstVerdicts()...)
	v = append(v, r.hotSiteVerdicts()...)
	v = append(v, r.crawlVerdicts()...)
	v = append(v, r.adaptiveVerdicts()...)
	if s := r.Seen; s != nil {
		g := goals.seenBytes
		v = append(v, verdict{"seen URLs in Redis", g.String(), fmt.Sprintf("%.1f bytes (%d URLs)", s.PerURL, s.URLs), g.met(s.PerURL)})
	}
	return append(v, r.robotsVerdicts()...)
}

// hotSiteVerdicts judge our algorithms' hand-off, and the cap of ours and
// of the token list, our anchor.
func (r *Report) hotSiteVerdicts() []verdict {
	var v []verdict
	limit := r.HotSpec.Limit
	tokens := stealUnknown
	if i := tokensRef(r.HotSite); i >= 0 {
		tokens = r.HotSite[i].HostSteal
	}
	for _, x := range r.HotSite {
		ours := x.Alg == AlgLocked || x.Alg == AlgAtomic
		if !ours && x.Alg != AlgTokenList {
			continue
		}
		if ours {
			t, j := goals.vsTokens, goals.jain
			v = append(v, verdict{"hot-site hand-off, " + x.Alg, t.String() + ", fairness " + j.bound(),
				fmt.Sprintf("%.3f×, %.3f%s", x.VsTokens, x.Jain, hostNote(x.HostSteal, "its turns", tokens, "the token list's")), t.met(x.VsTokens) && j.met(x.Jain)})
		}
		v = append(v, verdict{"hot-site cap, " + x.Alg, fmt.Sprintf("never over %d at the server", limit),
			fmt.Sprintf("most %d, %d starts over", x.MaxAtOnce, x.OverCapStart), x.keptCap(limit)})
	}
	return v
}

// crawlVerdicts judge each of our crawls by its steady rate (the goal for
// its process count), its cost (the goal for its mode) and its cap.
func (r *Report) crawlVerdicts() []verdict {
	var v []verdict
	colly := stealUnknown
	if i := collyRef(r.Crawl); i >= 0 {
		colly = r.Crawl[i].HostSteal
	}
	for _, x := range r.Crawl {
		if x.Peer {
			continue
		}
		rate := vsColly(x.Procs)
		got, crawl := fmt.Sprintf("%.3f×", x.VsColly), "its crawl"
		if x.Runs > 1 {
			got += fmt.Sprintf(" (median of %d)", x.Runs)
			crawl = "its median crawl"
		}
		got += hostNote(x.HostSteal, crawl, colly, "colly alone's")
		trips, ok := goals.crawlTrips[x.Mode]
		cpu := goals.crawlCPU
		v = append(v, verdict{"crawl steady rate, " + x.Name, rate.String(), got, rate.met(x.VsColly)},
			verdict{"crawl cost, " + x.Name, trips.bound() + " round trips and " + cpu.bound() + " Redis CPU per page",
				fmt.Sprintf("%.2f, %s%s", x.RoundTrips, us(x.RedisCPU), hostNote(x.HostSteal, crawl, stealUnknown, "")), ok && trips.met(x.RoundTrips) && cpu.met(float64(x.RedisCPU))},
			verdict{"crawl cap, " + x.Name, goals.overCap.String(), fmt.Sprintf("most %d (cap %d), %d over", x.MaxAtOnce, x.Cap, x.OverCap), x.keptCap()},
			verdict{"crawl politeness, " + x.Name, goals.impolite.String(), fmt.Sprintf("%d (%d disallowed requests)", x.Impolite, x.Disallowed),
				goals.impolite.met(float64(x.Impolite))})
	}
	for _, x := range r.OwnCore {
		cpu := goals.crawlCPU
		got := fmt.Sprintf("%s (median of %d, %s–%s)%s", us(x.RedisCPU), x.Runs, us(x.CPUMin), us(x.CPUMax), hostNote(x.HostSteal, "its median crawl", stealUnknown, ""))
		// (OwnCore's rows are their crawls of median Redis CPU: ownCore.)
		v = append(v, verdict{"crawl cost, " + x.Name, cpu.bound() + " Redis CPU per page", got, cpu.met(float64(x.RedisCPU))},
			verdict{"crawl cap, " + x.Name, goals.overCap.String(), fmt.Sprintf("most %d (cap %d), %d over", x.MaxAtOnce, x.Cap, x.OverCap), x.keptCap()})
	}
	return v
}

// adaptiveVerdicts judge the fragile site's crawls (off, then on) and the
// healthy crawl's (off, then on).
func (r *Report) adaptiveVerdicts() []verdict {
	var v []verdict
	if len(r.Fragile) == 2 {
		off, on := r.Fragile[0], r.Fragile[1]
		g503, gP95 := goals.fragile503, goals.fragileP95
		drop503, dropP95 := drop(off.Overloaded, on.Overloaded), dropF(off.P95, on.P95)
		v = append(v, verdict{"adaptive, fragile site", "503s −" + g503.amount() + ", p95 −" + gP95.amount() + ", pages/s no lower than off",
			fmt.Sprintf("503s −%.0f %% (%d → %d), p95 −%.0f %% (%.0f → %.0f ms), %.1f → %.1f pages/s", 100*drop503, off.Overloaded, on.Overloaded,
				100*dropP95, off.P95, on.P95, off.PagesPerSec, on.PagesPerSec),
			g503.met(drop503) && gP95.met(dropP95) && on.PagesPerSec >= off.PagesPerSec})
	}
	if len(r.Healthy) == 2 {
		off, on := r.Healthy[0], r.Healthy[1]
		ratio := 0.0
		if off.Steady > 0 {
			ratio = on.Steady / off.Steady
		}
		g := goals.healthyRate
		v = append(v, verdict{"adaptive, healthy crawl", "steady rate on ÷ off " + g.bound(), fmt.Sprintf("%.3f (%.0f ÷ %.0f pages/s)", ratio, on.Steady, off.Steady), g.met(ratio)})
	}
	return v
}

// drop is the share by which n fell from was (0 when was is 0).
func drop(was, now int64) float64 { return dropF(float64(was), float64(now)) }

func dropF(was, now float64) float64 {
	if was <= 0 {
		return 0
	}
	return (was - now) / was
}

func (r *Report) goalsSection(p func(string, ...any)) {
	v := r.verdicts()
	if len(v) == 0 {
		return
	}
	p("## Goals at a glance")
	p("")
	p("| figure | goal | this run | |")
	p("|---|---|---:|---|")
	for _, x := range v {
		mark := "met"
		if !x.met {
			mark = "**not met**"
		}
		p("| %s | %s | %s | %s |", x.what, x.goal, x.got, mark)
	}
	p("")
}
