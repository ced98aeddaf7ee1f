package robots

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStatusCodes(t *testing.T) {
	body := []byte("User-agent: *\nDisallow: /private/\n")
	for _, c := range []struct {
		code                  int
		allowAll, disallowAll bool
		private               bool // /private/x allowed
		unreachable           bool
	}{
		{200, false, false, false, false},
		{204, false, false, false, false},
		{301, true, false, true, false}, // redirects ran out: unavailable
		{400, true, false, true, false},
		{401, true, false, true, false},
		{403, true, false, true, false},
		{404, true, false, true, false},
		{410, true, false, true, false},
		{429, false, true, false, true},
		{500, false, true, false, true},
		{502, false, true, false, true},
		{503, false, true, false, true},
		{0, false, true, false, true}, // network error
	} {
		t.Run(strconv.Itoa(c.code), func(t *testing.T) {
			p := Parse(c.code, body, "politebot")
			if p.AllowAll != c.allowAll || p.DisallowAll != c.disallowAll || p.Unreachable() != c.unreachable {
				t.Fatalf("allowAll %v disallowAll %v unreachable %v", p.AllowAll, p.DisallowAll, p.Unreachable())
			}
			if got := p.Allowed("/private/x"); got != c.private {
				t.Errorf("/private/x allowed: %v, want %v", got, c.private)
			}
			if !p.Allowed("/robots.txt") {
				t.Error("/robots.txt must always be allowed")
			}
			if got := p.Allowed("/public"); got != !c.disallowAll {
				t.Errorf("/public allowed: %v", got)
			}
		})
	}
}

func TestGroupMatching(t *testing.T) {
	file := `
User-agent: politebot-images
Disallow: /images-bot/

User-agent: PoliteBot
Disallow: /a/

user-agent: otherbot
User-agent: politebot
Disallow: /b/

User-agent: *
Disallow: /star/
`
	for _, c := range []struct {
		agent   string
		blocked []string
		open    []string
	}{
		// Exact token, case-insensitive, same-token groups merged; not the
		// longer "politebot-images" group, not "*".
		{"politebot", []string{"/a/1", "/b/1"}, []string{"/images-bot/1", "/star/1"}},
		{"PoliteBot/2.1 (+https://example.com/bot)", []string{"/a/1", "/b/1"}, []string{"/star/1"}},
		{"politebot-images", []string{"/images-bot/1"}, []string{"/a/1", "/star/1"}},
		{"otherbot", []string{"/b/1"}, []string{"/a/1", "/star/1"}},
		// A token that only starts like a group's falls back to "*".
		{"polite", []string{"/star/1"}, []string{"/a/1", "/b/1"}},
		{"politebotx", []string{"/star/1"}, []string{"/a/1"}},
		{"unknown", []string{"/star/1"}, []string{"/a/1"}},
	} {
		t.Run(c.agent, func(t *testing.T) {
			p := Parse(200, []byte(file), c.agent)
			for _, path := range c.blocked {
				if p.Allowed(path) {
					t.Errorf("%s allowed", path)
				}
			}
			for _, path := range c.open {
				if !p.Allowed(path) {
					t.Errorf("%s disallowed", path)
				}
			}
		})
	}
	if p := Parse(200, []byte("User-agent: otherbot\nDisallow: /\n"), "politebot"); !p.Allowed("/x") {
		t.Error("no group for us and no *: everything is allowed")
	}
}

func TestLongestMatchAndTies(t *testing.T) {
	for _, c := range []struct {
		rules string
		path  string
		want  bool
	}{
		{"Disallow: /a\nAllow: /a/b", "/a/b/c", true},
		{"Allow: /a/b\nDisallow: /a", "/a/b/c", true},
		{"Allow: /a\nDisallow: /a/b", "/a/b/c", false},
		{"Disallow: /a/\nAllow: /a/", "/a/x", true}, // tie: Allow wins
		{"Allow: /a/\nDisallow: /a/", "/a/x", true},
		{"Disallow: /*.gif$\nAllow: /", "/x.gif", false},
		{"Disallow: /*.gif$", "/x.gif?size=2", true},
		{"Disallow: /*.gif", "/x.gif?size=2", false},
		{"Disallow: /fish*", "/fishheads/x", false},
		{"Disallow: /*/private/*/x", "/a/private/b/x", false},
		{"Disallow: /*/private/*/x", "/a/private/b/y", true},
		{"Disallow: /$", "/", false},
		{"Disallow: /$", "/a", true},
		{"Disallow: *", "/anything", false},
		{"Disallow: /page?q=1", "/page?q=1&r=2", false},
		{"Disallow: /page?q=1", "/page", true},
		{"Disallow: /foo/bar%2Fbaz", "/foo/bar%2fbaz", false},                    // hex case
		{"Disallow: /%7Euser/", "/~user/index", false},                           // unreserved decoded
		{"Disallow: /ä/", "/%C3%A4/x", false},                                    // non-ASCII escaped
		{"Disallow: /a\nAllow: /a*", "/a/b", true},                               // "/a*" is longer
		{"Disallow: /x*y*z*\nAllow: /xaybzc", "/xaybzc", true},                   // 7 chars vs 7: tie, Allow
		{"Disallow:", "/anything", true},                                         // empty Disallow: no rule
		{"Disallow: /private/\nDisallow: relative/path", "/relative/path", true}, // not a path: skipped
	} {
		t.Run(strings.ReplaceAll(c.rules, "\n", " | ")+" "+c.path, func(t *testing.T) {
			p := Parse(200, []byte("User-agent: *\n"+c.rules+"\n"), "politebot")
			if got := p.Allowed(c.path); got != c.want {
				t.Errorf("Allowed(%q) = %v, want %v (rules %+v)", c.path, got, c.want, p.Rules)
			}
		})
	}
}

func TestMalformedLinesAreSkipped(t *testing.T) {
	file := "\xef\xbb\xbfDisallow: /before-any-group/\r\n" +
		"this line has no colon\r\n" +
		"User-agent: politebot\r\n" +
		"Crawl-delay: fast\r\n" + // temoto rejects the whole file on this
		"Crawl-delay: -5\r" +
		"Concurrency: lots\n" +
		"Concurrency: 0\n" +
		"Request-rate: 1/0s\n" +
		"Unknown-directive: whatever\n" +
		"Disallow: /private/   # comment\n" +
		"Dissallow: /typo/\n" +
		"Sitemap: https://example.com/sitemap.xml\n" +
		"Sitemap: not a url\n"
	p := Parse(200, []byte(file), "politebot")
	if p.Allowed("/private/x") || p.Allowed("/typo/x") {
		t.Errorf("rules after bad lines lost: %+v", p.Rules)
	}
	if !p.Allowed("/before-any-group/") {
		t.Error("a rule before any group must be ignored")
	}
	if p.CrawlDelay != 0 || p.Concurrency != 0 {
		t.Errorf("bad values were used: delay %v concurrency %d", p.CrawlDelay, p.Concurrency)
	}
	if len(p.Sitemaps) != 1 || p.Sitemaps[0] != "https://example.com/sitemap.xml" {
		t.Errorf("sitemaps %v", p.Sitemaps)
	}
}

func TestDelayForms(t *testing.T) {
	for _, c := range []struct {
		lines string
		delay time.Duration
		conc  int
	}{
		{"Crawl-delay: 10", 10 * time.Second, 1},
		{"Crawl-delay: 0.5", 500 * time.Millisecond, 1},
		{"Crawl-delay: 1e400", 0, 0}, // overflows: ignored
		{"Crawl-delay: 999999999999999999999", DefaultMaxCrawlDelay, 1},
		{"Crawl-delay: NaN", 0, 0},
		{"Crawl-delay: Inf", 0, 0},
		{"Crawl-delay: 0", 0, 0},
		{"Request-rate: 1/5s", 5 * time.Second, 1},
		{"Request-rate: 1/5", 5 * time.Second, 1},
		{"Request-rate: 10/1m", 6 * time.Second, 1},
		{"Request-rate: 1/1h", DefaultMaxCrawlDelay, 1},
		{"Request-rate: 4/1s 0600-0845", 250 * time.Millisecond, 1},
		{"Request-rate: 0/5s", 0, 0},
		{"Request-rate: five", 0, 0},
		{"Crawl-delay: 2\nRequest-rate: 1/5s", 5 * time.Second, 1},
		{"Concurrency: 2", 0, 2},
		{"Concurrency: 2\nConcurrency: 5", 0, 2},
		{"Concurrency: 4\nCrawl-delay: 1", time.Second, 1},
		{"Concurrency: -1", 0, 0},
	} {
		t.Run(strings.ReplaceAll(c.lines, "\n", " | "), func(t *testing.T) {
			p := Parse(200, []byte("User-agent: politebot\n"+c.lines+"\n"), "politebot")
			if p.CrawlDelay != c.delay || p.Concurrency != c.conc {
				t.Errorf("delay %v concurrency %d, want %v %d", p.CrawlDelay, p.Concurrency, c.delay, c.conc)
			}
		})
	}
	if p := (Options{MaxCrawlDelay: 3 * time.Second}).Parse(200, []byte("User-agent: *\nCrawl-delay: 10\n"), "x"); p.CrawlDelay != 3*time.Second {
		t.Errorf("configured maximum: %v", p.CrawlDelay)
	}
	p := Parse(200, []byte("User-agent: *\nConcurrency: 2\n"), "x")
	if p.Cap(3) != 2 || p.Cap(1) != 1 || Parse(404, nil, "x").Cap(3) != 3 {
		t.Errorf("Cap: %d %d", p.Cap(3), p.Cap(1))
	}
}

func TestSizeCap(t *testing.T) {
	head := "User-agent: *\nDisallow: /early/\n"
	pad := strings.Repeat("# padding line to push the rest past the limit\n", (MaxBytes-len(head))/48)
	tail := "Disallow: /late/\n"
	p := Parse(200, []byte(head+pad+"Disallow: /cut-in-two-by-the-limit/\n"+strings.Repeat("#", MaxBytes)+tail), "x")
	if p.Allowed("/early/1") {
		t.Error("rule before the limit ignored")
	}
	if !p.Allowed("/late/1") {
		t.Error("rule past 500 KiB was parsed")
	}
	// A line the limit cuts is dropped, not shortened.
	line := "Allow: /open/this/only\n"
	cut := head + strings.Repeat("#\n", (MaxBytes-len(head)-10)/2)
	body := cut + line
	if len(cut) >= MaxBytes || len(body) <= MaxBytes {
		t.Fatalf("bad setup: %d %d", len(cut), len(body))
	}
	p = Parse(200, []byte("User-agent: *\nDisallow: /open/\n"+body[len(head):]), "x")
	if p.Allowed("/open/this") {
		t.Errorf("a line cut by the size limit was used: %+v", p.Rules)
	}
}
