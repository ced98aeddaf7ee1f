package testserver

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The dashboard updates itself: by default its script fetches the page
// again every DashboardRefresh seconds and swaps in the page's #dash, and
// that page, as served, has the figures of the moment; ?refresh=N sets the
// period, ?refresh=0 stops it.
func TestDashboardUpdatesItself(t *testing.T) {
	p, _ := Preset("mixed", 1, 1)
	s := start(t, p)
	dash := regexp.MustCompile(`(?s)<main id="dash">.*</main>`)
	_, page, _ := get(t, http.DefaultClient, s.ControlURL()+"/")
	for _, want := range []string{`<main id="dash">`, "fetch(location.href", `getElementById("dash")`, ".replaceWith(next)",
		"var every =  2  * 1000", "setTimeout(tick, every)", `<noscript><meta http-equiv="refresh" content="2"></noscript>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the dashboard lacks %q", want)
		}
	}
	before := dash.FindString(page)
	if before == "" || strings.Contains(before, "<td>7</td>") {
		t.Fatalf("#dash before any request:\n%s", before)
	}
	for range 7 {
		get(t, http.DefaultClient, s.Sites()[0].URL+"/p/0")
	}
	_, again, _ := get(t, http.DefaultClient, s.ControlURL()+"/") // what the script fetches
	if after := dash.FindString(again); !strings.Contains(after, "<td>7</td>") {
		t.Errorf("#dash served after 7 requests does not show them:\n%s", after)
	}
	_, slow, _ := get(t, http.DefaultClient, s.ControlURL()+"/?refresh=30")
	_, off, _ := get(t, http.DefaultClient, s.ControlURL()+"/?refresh=0")
	if !strings.Contains(slow, "var every =  30  * 1000") || strings.Contains(off, "<script") || strings.Contains(off, "http-equiv") ||
		!strings.Contains(off, "Not updating") || dash.FindString(off) == "" {
		t.Errorf("?refresh=30 and ?refresh=0 do not set the period and stop it")
	}
}

// The dashboard counts and marks the sites and IPs whose Violation is not
// empty, and only those.
func TestDashboardMarksViolations(t *testing.T) {
	st := Stats{Profile: "t", Sites: []SiteStats{
		{Host: "ok.test", Cap: 2, MaxInFlight: 2, MinGapMs: -1},
		{Host: "slow.test", Cap: 1, MaxInFlight: 1, CrawlDelayMs: 500, MinGapMs: 120},
	}, Addresses: []AddrStats{
		{Addr: "127.0.0.2", Sites: []string{"ok.test", "slow.test"}, Misdirected: 1},
	}}
	var b strings.Builder
	if err := writeDashboard(&b, st, 0); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"2 site(s) or address(es) saw a violation",
		`title="violation: gap 120 ms under crawl delay 500 ms"`, `title="violation: 1 misdirected request(s) (421)"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the dashboard lacks %q", want)
		}
	}
	if n := strings.Count(page, `title="violation:`); n != 2 {
		t.Errorf("%d rows marked, want 2", n)
	}
	st.Sites, st.Addresses = st.Sites[:1], nil
	b.Reset()
	if err := writeDashboard(&b, st, 0); err != nil {
		t.Fatal(err)
	}
	if page := b.String(); !strings.Contains(page, "No site saw more than its cap") || strings.Contains(page, "violation:") {
		t.Errorf("a polite crawl's dashboard shows a violation")
	}
}
