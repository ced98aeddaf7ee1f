package testserver

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRobotsFilesMatchProfiles(t *testing.T) {
	for _, c := range []struct {
		name     string
		robots   Robots
		status   int
		has      []string
		lacks    []string
		cap      int
		gap      time.Duration
		closed   bool
		disallow bool // /private/1 closed to the agent
	}{
		{name: "plain", robots: Robots{Disallow: []string{"/private/"}}, status: 200,
			has: []string{"User-agent: politebot\n", "Disallow: /private/\n", "User-agent: *\nDisallow: /\n"}, cap: 3, disallow: true},
		{name: "concurrency", robots: Robots{Concurrency: 2}, status: 200, has: []string{"Concurrency: 2\n", "Allow: /\n"}, cap: 2},
		{name: "concurrency above default", robots: Robots{Concurrency: 9}, status: 200, has: []string{"Concurrency: 9\n"}, cap: 3},
		{name: "crawl-delay", robots: Robots{CrawlDelay: Duration(1500 * time.Millisecond)}, status: 200, has: []string{"Crawl-delay: 1.5\n"}, cap: 1, gap: 1500 * time.Millisecond},
		{name: "request-rate", robots: Robots{RequestRate: "10/1m"}, status: 200, has: []string{"Request-rate: 10/1m\n"}, cap: 1, gap: 6 * time.Second},
		{name: "wildcard", robots: Robots{Wildcard: true, Disallow: []string{"/private/"}}, status: 200,
			has: []string{"User-agent: *\nDisallow: /private/\n"}, lacks: []string{"politebot"}, cap: 3, disallow: true},
		{name: "other agents", robots: Robots{OtherAgents: true}, status: 200,
			has: []string{"User-agent: otherbot\nUser-agent: politebot-images\nDisallow: /\n"}, cap: 3},
		{name: "404", robots: Robots{Status: 404}, status: 404, cap: 3},
		{name: "500", robots: Robots{Status: 500, Disallow: []string{"/private/"}}, status: 500, cap: 3, closed: true, disallow: true},
		{name: "503", robots: Robots{Status: 503}, status: 503, cap: 3, closed: true, disallow: true},
		{name: "429", robots: Robots{Status: 429}, status: 429, cap: 3, closed: true, disallow: true},
		{name: "2 redirects", robots: Robots{RedirectHops: 2, Concurrency: 1}, status: 200, has: []string{"Concurrency: 1\n"}, cap: 1},
		{name: "7 redirects", robots: Robots{RedirectHops: 7, Concurrency: 1}, status: 200, cap: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := start(t, oneSite(SiteSpec{Pages: 3, Links: 1, Robots: c.robots}))
			site := s.Sites()[0]
			// Follow redirects by hand, counting hops.
			url, hops := site.URL+"/robots.txt", 0
			code, body, h := get(t, noRedirects, url)
			for code == http.StatusMovedPermanently {
				hops++
				code, body, h = get(t, noRedirects, site.URL+h.Get("Location"))
			}
			if code != c.status || hops != c.robots.RedirectHops {
				t.Fatalf("status %d after %d redirects, want %d after %d", code, hops, c.status, c.robots.RedirectHops)
			}
			if (code == 429 || code == 503) && h.Get("Retry-After") == "" {
				t.Errorf("%d without Retry-After", code)
			}
			for _, want := range c.has {
				if !strings.Contains(body, want) {
					t.Errorf("robots.txt lacks %q:\n%s", want, body)
				}
			}
			for _, bad := range c.lacks {
				if strings.Contains(body, bad) {
					t.Errorf("robots.txt has %q:\n%s", bad, body)
				}
			}
			if site.Cap != c.cap || site.CrawlDelay != c.gap || site.ClosedSite != c.closed {
				t.Errorf("site truth: cap %d gap %v closed %v; want %d %v %v", site.Cap, site.CrawlDelay, site.ClosedSite, c.cap, c.gap, c.closed)
			}
			get(t, http.DefaultClient, site.URL+"/private/1")
			st := s.Stats().Sites[0]
			if got := st.DisallowedHits == 1; got != c.disallow {
				t.Errorf("disallowed hit on /private/1 counted: %v, want %v", got, c.disallow)
			}
			if st.RobotsFetches != 1 {
				t.Errorf("robots_fetches %d, want 1 (redirect hops are not new fetches)", st.RobotsFetches)
			}
		})
	}
}

func TestRobotsSlowAndOversized(t *testing.T) {
	s := start(t, oneSite(SiteSpec{Pages: 3, Links: 1, Robots: Robots{Delay: Duration(300 * time.Millisecond), Oversize: true, Concurrency: 1}}))
	t0 := time.Now()
	code, body, _ := get(t, http.DefaultClient, s.Sites()[0].URL+"/robots.txt")
	if took := time.Since(t0); took < 300*time.Millisecond {
		t.Errorf("slow robots.txt answered in %v", took)
	}
	if code != 200 || len(body) < 500<<10 {
		t.Fatalf("oversized robots.txt: %d, %d bytes", code, len(body))
	}
	if i := strings.Index(body, "Concurrency: 1"); i < 0 || i > 1000 {
		t.Fatalf("rules must come before the padding (at %d)", i)
	}
}

func TestPageBehaviours(t *testing.T) {
	p := Profile{Name: "b", Seed: 3, Sites: []SiteSpec{
		{Pages: 20, Links: 5, PageBytes: 3000, HugeBytes: 5 << 20, SlowFor: Duration(200 * time.Millisecond),
			Robots: Robots{Disallow: []string{"/private/"}}},
		{Pages: 20, Links: 5},
	}}
	s := start(t, p)
	u := s.Sites()[0].URL
	for _, c := range []struct {
		path     string
		status   int
		location string
		ctype    string
		minBytes int
	}{
		{"/p/3", 200, "", "text/html", 3000},
		{"/redirect/3", 301, "/p/4", "", 0},
		{"/redirect-private/3", 302, "/private/3", "", 0},
		{"/away/0", 302, s.Sites()[1].URL + "/p/0", "", 0},
		{"/loop/2", 302, "/loop/0", "", 0},
		{"/error/1", 500, "", "", 0},
		{"/huge/1", 200, "", "text/html", 5 << 20},
		{"/data/4.bin", 200, "", "application/octet-stream", 3000},
		{"/slow/2", 200, "", "text/html", 3000},
		{"/p/20", 404, "", "", 0},
		{"/retry/2", 503, "", "", 0},
		{"/retry/2", 200, "", "text/html", 3000},
		{"/retry/3", 429, "", "", 0},
	} {
		t0 := time.Now()
		code, body, h := get(t, noRedirects, u+c.path)
		if code != c.status || h.Get("Location") != c.location || !strings.HasPrefix(h.Get("Content-Type"), c.ctype) || len(body) < c.minBytes {
			t.Errorf("%s: %d %q %q %d bytes", c.path, code, h.Get("Location"), h.Get("Content-Type"), len(body))
		}
		if code == 429 && h.Get("Retry-After") != "1" {
			t.Errorf("%s: Retry-After %q, want 1", c.path, h.Get("Retry-After"))
		}
		if code == 503 {
			date, err1 := http.ParseTime(h.Get("Date"))
			at, err2 := http.ParseTime(h.Get("Retry-After"))
			if err1 != nil || err2 != nil || at.Sub(date) != 2*time.Second {
				t.Errorf("%s: Date %q, Retry-After %q; want a date 2 s after Date", c.path, h.Get("Date"), h.Get("Retry-After"))
			}
		}
		if c.path == "/slow/2" && time.Since(t0) < 150*time.Millisecond {
			t.Errorf("slow page took only %v", time.Since(t0))
		}
	}
}

var hrefRE = regexp.MustCompile(`href="([^"]*)"`)

func TestLinksAreDeterministicAndBaitDisallowed(t *testing.T) {
	p := Profile{Name: "l", Seed: 42, Sites: []SiteSpec{
		{Pages: 50, Links: 20, CrossLinks: 2, Hostile: true, Robots: Robots{Disallow: []string{"/private/"}}},
		{Pages: 50, Links: 20},
	}}
	a, b := start(t, p), start(t, p)
	pages := func(s *Server) []string {
		var all []string
		for i := 0; i < 10; i++ {
			_, body, _ := get(t, http.DefaultClient, s.Sites()[0].URL+"/p/"+strconv.Itoa(i))
			for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
				all = append(all, strings.ReplaceAll(m[1], s.Sites()[1].URL, "OTHER"))
			}
		}
		return all
	}
	la, lb := pages(a), pages(b)
	if strings.Join(la, " ") != strings.Join(lb, " ") {
		t.Fatal("the same seed gave different links")
	}
	joined := strings.Join(la, " ")
	for _, want := range []string{"/private/", "OTHER/p/", "javascript:", "mailto:", "file:"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %q link in 10 pages", want)
		}
	}
	_, body, _ := get(t, http.DefaultClient, a.Sites()[0].URL+"/p/1")
	if !strings.Contains(body, "\xff\xfe") {
		t.Error("hostile page without invalid UTF-8")
	}
}

func TestPresetsAndProfileFiles(t *testing.T) {
	for _, name := range PresetNames() {
		p, err := Preset(name, 12, 1)
		if err != nil || len(p.Sites) != 12 {
			t.Fatalf("preset %s: %v", name, err)
		}
		// Round trip through a JSON file.
		path := filepath.Join(t.TempDir(), name+".json")
		b, _ := json.MarshalIndent(p, "", "  ")
		os.WriteFile(path, b, 0o644)
		q, err := LoadProfile(path)
		if err != nil || fmt.Sprint(q) != fmt.Sprint(p) {
			t.Fatalf("preset %s through a file: %v", name, err)
		}
	}
	m, _ := Preset("mixed", 10, 1)
	caps := map[int]bool{}
	for _, site := range siteTruths(m) {
		caps[site] = true
	}
	if !caps[1] || !caps[2] || !caps[3] {
		t.Errorf("mixed preset caps %v: want sites with cap 1, 2 and 3", caps)
	}
	if _, err := Preset("nope", 1, 1); err == nil || !strings.Contains(err.Error(), "mixed") {
		t.Errorf("unknown preset: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"sites":[{"pages":0,"links":-1,"slow":0.8,"retry":0.5,"robots":{"status":301,"disallow":["x"]}}],"extra":1}`), 0o644)
	if _, err := LoadProfile(bad); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Errorf("unknown field: %v", err)
	}
	os.WriteFile(bad, []byte(`{"sites":[{"pages":0,"links":-1,"slow":0.8,"retry":0.5,"robots":{"status":301,"disallow":["x"],"request_rate":"fast"}}]}`), 0o644)
	_, err := LoadProfile(bad)
	for _, field := range []string{"pages", "links", "shares", "robots.status", "robots.disallow", "robots.request_rate"} {
		if err == nil || !strings.Contains(err.Error(), "sites[0]."+field) {
			t.Errorf("validation does not name %s: %v", field, err)
		}
	}
}

func siteTruths(p Profile) []int {
	var caps []int
	for _, s := range p.Sites {
		caps = append(caps, siteRules(&p, s).cap)
	}
	return caps
}

func TestDashboardRenders(t *testing.T) {
	p, _ := Preset("mixed", 4, 1)
	s := start(t, p)
	holdOpenN := func() {
		for _, site := range s.Sites() {
			get(t, http.DefaultClient, site.URL+"/p/0")
		}
	}
	holdOpenN()
	code, body, h := get(t, http.DefaultClient, s.ControlURL()+"/")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("dashboard: %d %s", code, h.Get("Content-Type"))
	}
	if n := strings.Count(body, "<tr><td"); n != 4 {
		t.Errorf("%d site rows, want 4", n)
	}
	svgs := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(body, -1)
	if len(svgs) != 4 {
		t.Fatalf("%d charts, want 4", len(svgs))
	}
	for _, svg := range svgs {
		var doc struct {
			XMLName  xml.Name
			Polyline struct {
				Points string `xml:"points,attr"`
			} `xml:"polyline"`
			Line struct {
				Dash string `xml:"stroke-dasharray,attr"`
			} `xml:"line"`
		}
		if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
			t.Fatalf("chart is not well-formed SVG: %v\n%s", err, svg)
		}
		if doc.XMLName.Local != "svg" || doc.Polyline.Points == "" || doc.Line.Dash == "" {
			t.Errorf("chart lacks its series or its cap line: %s", svg)
		}
	}
	for _, ext := range []string{"<script src", "<link ", "https://"} {
		if strings.Contains(body, ext) {
			t.Errorf("dashboard loads an external asset (%q)", ext)
		}
	}
	if os.Getenv("DASHBOARD_OUT") != "" { // make dashboard-screenshot
		os.WriteFile(os.Getenv("DASHBOARD_OUT"), []byte(body), 0o644)
	}
}
