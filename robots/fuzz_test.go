package robots

import (
	"strings"
	"testing"
	"time"
)

// FuzzParse: any status and body give a usable policy. /robots.txt is always
// allowed, the delay stays within bounds, a delay means one at a time, rules
// are in precedence order, and an Allow rule identical to a Disallow rule
// wins.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"User-agent: *\nDisallow: /private/\nAllow: /private/open\nCrawl-delay: 2\n",
		"User-agent: politebot\nConcurrency: 2\nRequest-rate: 1/5s\nSitemap: https://x.example/s.xml\n",
		"\xef\xbb\xbfuser-agent: *\r\ndisallow: /*.gif$\r\n",
		"Disallow: /\nUser-agent: a\nUser-agent: b\nDisallow: /%7e\n",
		"User-agent: *\nDisallow: /a*b*c*d*e*f*g*h*\n",
		"User-agent: *\nCrawl-delay: 1e400\nCrawl-delay: -1\nCrawl-delay: NaN\n",
	} {
		f.Add(200, []byte(seed), "politebot", "/private/x?y=1")
	}
	f.Add(503, []byte(""), "x", "/")
	f.Fuzz(func(t *testing.T, status int, body []byte, agent, path string) {
		p := Parse(status, body, agent)
		if !p.Allowed("/robots.txt") {
			t.Fatal("/robots.txt disallowed")
		}
		p.Allowed(path)
		p.Allowed("/" + path)
		if p.CrawlDelay < 0 || p.CrawlDelay > DefaultMaxCrawlDelay {
			t.Fatalf("crawl delay %v", p.CrawlDelay)
		}
		if p.CrawlDelay > 0 && p.Concurrency != 1 {
			t.Fatalf("delay %v with concurrency %d", p.CrawlDelay, p.Concurrency)
		}
		if p.Concurrency < 0 {
			t.Fatalf("concurrency %d", p.Concurrency)
		}
		for i := 1; i < len(p.Rules); i++ {
			a, b := p.Rules[i-1], p.Rules[i]
			if len(a.Pattern) < len(b.Pattern) || (len(a.Pattern) == len(b.Pattern) && !a.Allow && b.Allow) {
				t.Fatalf("rules out of order: %+v before %+v", a, b)
			}
		}
		// The same pattern allowed and disallowed: Allow wins.
		if status >= 200 && status < 300 && strings.HasPrefix(path, "/") && !strings.ContainsAny(path, "*$#\r\n \t") && len(path) < 100 {
			q := Parse(200, []byte("User-agent: *\nDisallow: "+path+"\nAllow: "+path+"\n"), agent)
			if !q.Allowed(path) {
				t.Fatalf("tie on %q not won by Allow", path)
			}
		}
	})
}

// The matcher must stay fast on patterns built to backtrack.
func TestMatchIsNotExponential(t *testing.T) {
	pattern := "/" + strings.Repeat("a*", 50) + "b"
	path := "/" + strings.Repeat("a", 10000)
	start := time.Now()
	if match(pattern, path) {
		t.Fatal("matched")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
}
