package testserver

import (
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// writeDashboard renders stats as one HTML page: a row per site with its cap,
// the most it saw at once, its p95 latency, its 5xx answers and its other
// figures, and a chart of requests in
// flight over time with the cap drawn as a dashed line. When an IP serves
// more than one site (Stats.Shared), a row and a chart per IP and per
// listening host:port follow. No external assets. With refresh > 0 the
// page updates itself every refresh seconds: a script fetches the page
// again and puts its <main id="dash"> in place of the shown one, so the
// figures are drawn in one place (here), the scroll position stays, and a
// testserver that stopped answering is said so at the top; without
// JavaScript, a meta refresh reloads the page.
func writeDashboard(w io.Writer, st Stats, refresh int) error {
	type row struct {
		SiteStats
		Over      bool
		Gap       string
		Violation string // SiteStats.Violation: the row is marked, and counted in Bad
		Chart     template.HTML
	}
	var rows []row
	worst := 0
	for _, s := range st.Sites {
		over := s.MaxInFlight > s.Cap || s.OverCap > 0
		r := row{SiteStats: s, Over: over, Violation: s.Violation(), Chart: chart(s.Series, s.Cap, over)}
		switch {
		case s.MinGapMs < 0:
			r.Gap = "–"
		default:
			r.Gap = fmt.Sprintf("%.0f ms", s.MinGapMs)
		}
		if r.Violation != "" {
			worst++
		}
		rows = append(rows, r)
	}
	type addrRow struct {
		AddrStats
		Kind      string
		Over      bool
		Violation string // AddrStats.Violation, for IPs only
		Chart     template.HTML
	}
	var addrs []addrRow
	if st.Shared() {
		for _, a := range st.Addresses {
			why := a.Violation()
			if why != "" {
				worst++
			}
			addrs = append(addrs, addrRow{a, "IP", a.OverCap > 0, why, chart(a.Series, a.Cap, a.OverCap > 0)})
		}
		for _, a := range st.Listeners {
			addrs = append(addrs, addrRow{a, "port", false, "", chart(a.Series, 0, false)})
		}
	}
	return dashboardTmpl.Execute(w, map[string]any{
		"Stats": st, "Rows": rows, "Addrs": addrs, "Bad": worst, "Refresh": refresh,
		"Uptime": (time.Duration(st.UptimeMs) * time.Millisecond).Round(time.Second),
	})
}

// DashboardRefresh is how often, in seconds, the dashboard updates itself
// unless its URL says otherwise (?refresh=N; 0 stops it).
const DashboardRefresh = 2

// refreshOf is the update period a dashboard request asks for: ?refresh=N
// seconds (0: none; at most an hour), DashboardRefresh by default.
func refreshOf(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("refresh"))
	if err != nil {
		return DashboardRefresh
	}
	return min(max(n, 0), 3600)
}

// chart draws an in-flight series as an inline SVG, with cap (if > 0) as
// a dashed line; red when over.
func chart(series []int, cap int, over bool) template.HTML {
	const w, h = 360.0, 48.0
	top := cap + 1
	for _, v := range series {
		top = max(top, v)
	}
	y := func(v int) float64 { return h - 2 - float64(v)*(h-4)/float64(top) }
	// A step chart: each 100 ms step is a flat segment at its maximum, so a
	// single step still shows.
	var pts strings.Builder
	dx := w / float64(max(len(series), 1))
	for i, v := range series {
		fmt.Fprintf(&pts, "%.1f,%.1f %.1f,%.1f ", float64(i)*dx, y(v), float64(i+1)*dx, y(v))
	}
	color := "#2563eb"
	if over {
		color = "#dc2626"
	}
	capLine := ""
	if cap > 0 {
		capLine = fmt.Sprintf(`<line x1="0" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#dc2626" stroke-dasharray="4 3"/>`, w, y(cap), y(cap))
	}
	return template.HTML(fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="in flight over time">`+
		`<rect width="100%%" height="100%%" fill="#f8fafc"/>%s`+
		`<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/></svg>`,
		w, h, w, h, capLine, color, strings.TrimSpace(pts.String())))
}

var dashboardTmpl = template.Must(template.New("dash").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
{{if gt .Refresh 0}}<noscript><meta http-equiv="refresh" content="{{.Refresh}}"></noscript>{{end}}
<title>polite testserver — {{.Stats.Profile}}</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#0f172a}
table{border-collapse:collapse}th,td{padding:4px 8px;border-bottom:1px solid #e2e8f0;text-align:right}
th{background:#f1f5f9}td.l,th.l{text-align:left}.bad{color:#dc2626;font-weight:bold}.ok{color:#16a34a}#live{color:#64748b}
</style></head><body>
<p id="live">{{if gt .Refresh 0}}Updates every {{.Refresh}} s (?refresh=N for another period, ?refresh=0 to stop).{{else}}Not updating (?refresh=2: every 2 s).{{end}}</p>
<main id="dash">
<h1>polite testserver <small>profile {{.Stats.Profile}}, up {{.Uptime}}</small></h1>
<p>{{len .Rows}} sites. {{if .Bad}}<span class="bad">{{.Bad}} site(s) or address(es) saw a violation.</span>{{else}}<span class="ok">No site saw more than its cap, a disallowed hit, or a gap under its crawl delay.</span>{{end}}
Chart: requests in flight per 100 ms, dashed line = cap.</p>
<table><tr><th class="l">site</th><th class="l">robots.txt asks</th><th>cap</th><th>max in flight</th><th>over cap</th><th>requests</th><th title="time to the end of the body, of the pages answered 200">p95 ms</th><th title="answers 500-599; overloaded: 503s of a fragile site">5xx</th><th>disallowed hits</th><th>robots.txt</th><th>dups</th><th>min gap / delay</th><th class="l">in flight over time</th></tr>
{{range .Rows}}<tr><td class="l{{if .Violation}} bad{{end}}"{{if .Violation}} title="violation: {{.Violation}}"{{end}}><a href="{{.URL}}">{{.Host}}</a></td><td class="l">{{.Rules}}</td><td>{{.Cap}}</td>
<td{{if .Over}} class="bad"{{end}}>{{.MaxInFlight}}</td><td{{if .OverCap}} class="bad"{{end}}>{{.OverCap}}</td>
<td>{{.Requests}}</td><td title="p50 {{.Latency.P50Ms}}, p99 {{.Latency.P99Ms}}, max {{.Latency.MaxMs}} ms of {{.Latency.Count}}">{{if .Latency.Count}}{{printf "%.0f" .Latency.P95Ms}}{{else}}–{{end}}</td>
<td{{if .Status5xx}} class="bad"{{end}}>{{.Status5xx}}{{if .Overloaded}} ({{.Overloaded}} overloaded){{end}}</td><td{{if .DisallowedHits}} class="bad"{{end}}>{{.DisallowedHits}}</td><td>{{.RobotsFetches}}</td><td>{{.DuplicateFetches}}</td>
<td>{{.Gap}}{{if .CrawlDelayMs}} / {{.CrawlDelayMs}} ms{{end}}</td><td class="l">{{.Chart}}</td></tr>
{{end}}</table>
{{if .Addrs}}<h2>Addresses</h2>
<p>Several sites share an IP: what each listening IP, and each port on it, has in flight, over all its sites; dashed line = the cap per IP, if the profile sets one. A 421 answers a Host that names no site of its port.</p>
<table><tr><th class="l">address</th><th class="l">sites</th><th>cap</th><th>max in flight</th><th>over cap</th><th>in flight</th><th>requests</th><th>misdirected (421)</th><th>connections</th><th class="l">in flight over time</th></tr>
{{range .Addrs}}<tr class="addr"><td class="l{{if .Violation}} bad{{end}}"{{if .Violation}} title="violation: {{.Violation}}"{{end}}>{{.Kind}} {{.Addr}}</td><td class="l" title="{{range .Sites}}{{.}} {{end}}">{{len .Sites}}</td><td>{{if .Cap}}{{.Cap}}{{else}}–{{end}}</td>
<td{{if .Over}} class="bad"{{end}}>{{.MaxInFlight}}</td><td{{if .OverCap}} class="bad"{{end}}>{{.OverCap}}</td><td>{{.InFlight}}</td>
<td>{{.Requests}}</td><td{{if .Misdirected}} class="bad"{{end}}>{{.Misdirected}}</td><td>{{.Connections}}</td><td class="l">{{.Chart}}</td></tr>
{{end}}</table>{{end}}
<p><a href="/_stats">/_stats</a> (JSON) · POST /_reset</p>
</main>
{{if gt .Refresh 0}}<script>
(function () {
  var every = {{.Refresh}} * 1000, live = document.getElementById("live");
  function tick() {
    fetch(location.href, {cache: "no-store"}).then(function (r) {
      if (!r.ok) { throw new Error("HTTP " + r.status); }
      return r.text();
    }).then(function (html) {
      var next = new DOMParser().parseFromString(html, "text/html").getElementById("dash");
      if (next) { document.getElementById("dash").replaceWith(next); }
      live.className = "";
      live.textContent = "Updated " + new Date().toLocaleTimeString() + ", every " + every / 1000 + " s.";
    }).catch(function (e) {
      live.className = "bad";
      live.textContent = "The testserver does not answer (" + e.message + "); trying again every " + every / 1000 + " s.";
    }).finally(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
</script>{{end}}
</body></html>
`))
