// Package robots reads robots.txt as RFC 9309 says and shares the result
// across a crawl fleet.
//
// Parse turns a status code and body into a Policy: which paths the crawler's
// product token may fetch, how many requests at a time the site allows (our
// "Concurrency: N" extension; 1 when Crawl-delay or Request-rate is set), and
// the gap between requests. It never fails: a line that does not parse is
// skipped, not the file. Cache fetches each site's robots.txt once for the
// whole fleet and keeps the policy in Redis.
//
// Where this differs from github.com/temoto/robotstxt (and so from colly,
// which uses it), RFC 9309 is followed: groups are matched by the exact
// product token, case-insensitively, with "*" as fallback and same-token
// groups merged; the longest matching rule wins and Allow wins a tie; a bad
// line is ignored rather than failing the file; 429 and 5xx mean "disallow
// all". The differential test in this package pins each of these.
//
// A Policy is a value, safe to share once parsed; a Cache is safe for
// concurrent use, one per process. A robots.txt that cannot be fetched is
// a policy (see Cache), not an error: Cache.Policy fails only when it has
// no answer, on a fetch the transport could not make (ErrNotFetched), on
// Redis's or ctx's error, or on a bad URL or prefix; try again later.
package robots

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// DefaultMaxCrawlDelay is the largest crawl delay honoured; longer ones are
// clamped to it (as Nutch does), so one site cannot stall a worker forever.
const DefaultMaxCrawlDelay = 30 * time.Second

// MaxBytes is how much of a robots.txt is parsed (RFC 9309: at least 500 KiB).
const MaxBytes = 500 << 10

// Policy is what a site's robots.txt asks of one crawler. It is a value,
// stored as JSON. Parse and json.Unmarshal compile its Rules once for
// Allowed; replace Rules rather than edit it in place (a replaced slice is
// noticed and compiled on each call, an edited one is not).
type Policy struct {
	// Status is the HTTP status the policy was made from (0 for a network
	// error).
	Status int `json:"status"`
	// Concurrency is the most requests at a time the site allows: from
	// "Concurrency: N", 1 when a crawl delay or request rate is set, and 0
	// when the file says nothing about it.
	Concurrency int `json:"concurrency,omitempty"`
	// CrawlDelay is the gap to keep between requests: Crawl-delay, or t/n for
	// "Request-rate: n/t", the larger if both; clamped to the maximum.
	CrawlDelay time.Duration `json:"crawl_delay,omitempty"`
	// Sitemaps lists the Sitemap URLs the file names.
	Sitemaps []string `json:"sitemaps,omitempty"`
	// AllowAll and DisallowAll short-cut Rules: a missing robots.txt (4xx)
	// allows all; an unreachable one (429, 5xx, network error) disallows all.
	AllowAll    bool   `json:"allow_all,omitempty"`
	DisallowAll bool   `json:"disallow_all,omitempty"`
	Rules       []Rule `json:"rules,omitempty"`
	// Cause says why robots.txt could not be read when that was no status
	// of the site's (Status 0): the network's cause in package netcause's
	// words ("connection refused", "no such host", "tls: ...", "timeout",
	// "connection reset"), or the fetch's own (a refused redirect).
	Cause string `json:"cause,omitempty"`

	m *matcher // Rules compiled; not stored
}

// UnmarshalJSON decodes a policy as encoding/json would and compiles its
// rules, so a policy read back from Redis matches as fast as a parsed one.
func (p *Policy) UnmarshalJSON(b []byte) error {
	type plain Policy // the same fields, without this method
	var q plain
	if err := json.Unmarshal(b, &q); err != nil {
		return err
	}
	*p = Policy(q)
	p.m = compile(p.Rules)
	return nil
}

// Rule is one Allow or Disallow line of the group that applies, with its path
// pattern normalised (percent-encoding, see normalize).
type Rule struct {
	Allow   bool   `json:"allow,omitempty"`
	Pattern string `json:"pattern"`
}

// Unreachable reports whether the policy stands for a robots.txt that could
// not be read (429, 5xx or a network error): the site is closed until a
// retry succeeds.
func (p Policy) Unreachable() bool {
	return p.Status == 0 || p.Status == http.StatusTooManyRequests || p.Status >= 500
}

// Why says, for an unreachable policy, why robots.txt could not be read:
// Cause, or the status ("status 503"); "" for any other policy.
func (p Policy) Why() string {
	switch {
	case !p.Unreachable():
		return ""
	case p.Status != 0:
		return "status " + strconv.Itoa(p.Status)
	case p.Cause != "":
		return p.Cause
	}
	return "network error"
}

// Allowed reports whether the crawler may fetch path (a URL's path and query,
// as in "/a/b?q=1"). /robots.txt is always allowed. The path is first put in
// canonical form (see CanonicalPath: "/%2E/private/x" is checked as
// "/private/x"). Among the rules that match, the one with the longest
// pattern wins; on a tie, Allow wins. Patterns have their escapes
// normalised, and a pattern without '*' its complete dot segments resolved
// ("/a/./b" and "/a/x/../b" are "/a/b"), since the canonical paths it is
// matched against never contain one. A pattern with a '*' keeps them: it is
// not a path, and resolving "/a/*/../b" would change what it means, so such
// a pattern's dot segments match nothing.
//
// One call costs O(len(path)) plus, per distinct rule, one prefix compare
// and a linear search for each of its wildcard pieces that the path may
// contain (see matcher); no input makes it backtrack.
func (p Policy) Allowed(path string) bool {
	if path == "" {
		path = "/"
	}
	if path == "/robots.txt" {
		return true
	}
	switch {
	case p.DisallowAll:
		return false
	case p.AllowAll:
		return true
	}
	m := p.m
	if !m.compiledFrom(p.Rules) {
		m = compile(p.Rules) // a Policy built by hand, or with Rules replaced
	}
	return m.allowed(CanonicalPath(path))
}

// Cap is the concurrency to use for the site: the configured cap, lowered to
// the site's Concurrency when it states one.
func (p Policy) Cap(configured int) int {
	if p.Concurrency > 0 && p.Concurrency < configured {
		return p.Concurrency
	}
	return configured
}

// Options tune parsing. The zero value is the default.
type Options struct {
	// MaxCrawlDelay clamps Crawl-delay and Request-rate (default 30s).
	MaxCrawlDelay time.Duration
}

func (o Options) maxDelay() time.Duration {
	if o.MaxCrawlDelay <= 0 {
		return DefaultMaxCrawlDelay
	}
	return o.MaxCrawlDelay
}

// Parse makes the policy for agent (a product token such as "politebot"; a
// whole User-Agent string is cut to its product token) from a robots.txt
// response, with the default options. It never fails:
//
//   - 2xx: the body is parsed (its first MaxBytes);
//   - 3xx: the redirects ran out (the fetcher follows up to 5): unavailable,
//     allow all;
//   - 4xx but 429: no robots.txt, allow all;
//   - 429, 5xx, and 0 for a network error: unreachable, disallow all.
func Parse(status int, body []byte, agent string) Policy {
	return Options{}.Parse(status, body, agent)
}

// Parse is the package Parse with these options.
func (o Options) Parse(status int, body []byte, agent string) Policy {
	p := Policy{Status: status}
	switch {
	case status >= 200 && status < 300:
		parseBody(&p, body, ProductToken(agent), o.maxDelay())
		p.m = compile(p.Rules)
	case status == http.StatusTooManyRequests || status >= 500 || status < 100:
		p.DisallowAll = true
	default:
		p.AllowAll = true
	}
	return p
}
