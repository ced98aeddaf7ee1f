package bench

import (
	"fmt"
	"strings"
)

// charts are the report's SVGs by file name, for the sections that ran;
// their goal lines are goals' own.
func (r *Report) charts() map[string]string {
	c := map[string]string{}
	if len(r.Uncontended) > 0 {
		var bars []bar
		for _, x := range r.Uncontended {
			bars = append(bars, bar{x.Alg, x.Judged, algColor(x.Alg, false)})
		}
		c["latency.svg"] = barChart("Uncontended acquire+release p50 as a multiple of two PINGs, the stricter of the two ratios (lower is better)", bars,
			"×", []goalLine{goals.uncontended[AlgAtomic].line("atomic goal ", ""), goals.uncontended[AlgLocked].line("locked goal ", "")})
	}
	if len(r.Throughput) > 1 {
		var bars []bar
		for _, x := range r.Throughput[1:] {
			bars = append(bars, bar{x.Alg, x.VsBook, algColor(x.Alg, false)})
		}
		c["throughput.svg"] = barChart("Pairs/s, 64 goroutines over 1000 sites, as a multiple of the book's lock-guarded semaphore", bars,
			"×", []goalLine{goals.throughput[AlgLocked].line("locked goal ", ""), goals.throughput[AlgAtomic].line("atomic goal ", "")})
	}
	if len(r.HotSite) > 0 {
		var bars []bar
		for _, x := range r.HotSite {
			bars = append(bars, bar{x.Alg, x.VsTokens, algColor(x.Alg, x.MaxAtOnce > int64(r.HotSpec.Limit))})
		}
		c["handoff.svg"] = barChart("Hot site: grants/s as a multiple of the token list's (BLPOP/RPUSH); red: exceeded the cap", bars,
			"×", []goalLine{goals.vsTokens.line("goal ", "")})
	}
	if len(r.Crawl) > 0 {
		var bars []bar
		for _, x := range r.Crawl {
			if x.Peer && x.Procs > 1 {
				continue // fetches every page once per process: not like for like
			}
			bars = append(bars, bar{x.Name, x.VsColly, crawlColor(x)})
		}
		c["crawl.svg"] = barChart("Crawl: steady pages/s as a multiple of colly alone's (1 process); red: exceeded the cap", bars,
			"×", []goalLine{goals.vsCollyN.line("goal ", " (2+ processes)"), goals.vsColly1.line("goal ", " (1 process)")})
	}
	if len(r.Scale) > 0 {
		var bars []bar
		for _, x := range r.Scale {
			bars = append(bars, bar{x.Name, x.RoundTrips, crawlColor(x)})
		}
		c["scale.svg"] = barChart("How cost grows: Redis round trips per page", bars, "", nil)
	}
	return c
}

func algColor(alg string, unsafe bool) string {
	switch {
	case unsafe:
		return colUnsafe
	case alg == AlgLocked || alg == AlgAtomic:
		return colOurs
	case alg == AlgTokenList:
		return colAnchor
	}
	return colPeer
}

func crawlColor(x CrawlRow) string {
	switch {
	case !x.keptCap():
		return colUnsafe
	case x.Peer:
		return colPeer
	}
	return colOurs
}

// goalLine is a dashed line across a chart at a goal.
type goalLine struct {
	at    float64
	label string
}

// Bar colours: ours, a peer for comparison, and a run that let a site see
// more than its cap.
const (
	colOurs   = "#2563eb"
	colPeer   = "#9ca3af"
	colAnchor = "#111827" // a physical limit, measured
	colUnsafe = "#dc2626"
)

type bar struct {
	name  string
	value float64
	color string
}

// barChart draws horizontal bars with dashed goal lines, as a standalone SVG.
func barChart(title string, bars []bar, unit string, goals []goalLine) string {
	const w, left, right, height, gap, top = 760.0, 230.0, 80.0, 22.0, 10.0, 40.0
	h := top + float64(len(bars))*(height+gap) + 10 + 16*float64(len(goals))
	top1 := 0.0
	for _, b := range bars {
		top1 = max(top1, b.value)
	}
	for _, g := range goals {
		top1 = max(top1, g.at)
	}
	top1 *= 1.1
	x := func(v float64) float64 { return left + v/top1*(w-left-right) }
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`, w, h, w, h)
	fmt.Fprintf(&sb, `<rect width="100%%" height="100%%" fill="#fff"/><text x="10" y="22" font-size="14" font-weight="bold">%s</text>`, esc(title))
	bottom := top + float64(len(bars))*(height+gap)
	for i, g := range goals { // lines first, so bars and labels stay readable
		fmt.Fprintf(&sb, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#dc2626" stroke-dasharray="4 3"/>`, x(g.at), x(g.at), top-6, bottom+float64(i)*16+4)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.0f" fill="#dc2626">%s</text>`, x(g.at)+4, bottom+float64(i)*16+14, esc(g.label))
	}
	for i, b := range bars {
		y := top + float64(i)*(height+gap)
		fmt.Fprintf(&sb, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`, left-8, y+height*0.7, esc(b.name))
		fmt.Fprintf(&sb, `<rect x="%.0f" y="%.1f" width="%.1f" height="%.0f" fill="%s"/>`, left, y, max(x(b.value)-left, 1), height, b.color)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" font-weight="bold">%.2f%s</text>`, x(b.value)+4, y+height*0.7, b.value, esc(unit))
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
