package robots

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
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

// A pattern built to make a backtracking matcher exponential: matched
// right here, timed by BenchmarkMatchBacktracking (and by crawler bench's
// robots section, against its goal).
var backtracking = Policy{Rules: []Rule{{Pattern: "/" + strings.Repeat("a*", 50) + "b"}}}

func TestMatchBacktracking(t *testing.T) {
	path := "/" + strings.Repeat("a", 10000)
	if !backtracking.Allowed(path) {
		t.Fatal("a path without 'b' matched /a*a*...b")
	}
	if backtracking.Allowed(path + "b") {
		t.Fatal("a path ending in 'b' did not match /a*a*...b")
	}
}

func BenchmarkMatchBacktracking(b *testing.B) {
	path := "/" + strings.Repeat("a", 10000)
	for b.Loop() {
		backtracking.Allowed(path)
	}
}

// FuzzAllowed compares the compiled matcher with two plain references, the
// backtracking matcher it replaced and a regexp, on up to 16 rules and a
// path, as given and repeated past the length where the window index is
// used, with and without the index. It times nothing.
func FuzzAllowed(f *testing.F) {
	f.Add("a*b\n*b$\na\n", uint16(2), "aab")
	f.Add("*"+strings.Repeat("a", 20)+"b\n/a*$\n", uint16(1), strings.Repeat("a", 30))
	f.Add("x*y*z\nx$\n*.gif$\n", uint16(5), "xaybzc.gif")
	f.Add("%2E/private/\nprivate/", uint16(0), "a/%2e%2E/private/x?q=..")
	f.Add("a/*/b\na//b$\n*", uint16(4), "a/.//b/../b")
	f.Fuzz(func(t *testing.T, patterns string, allow uint16, path string) {
		var rules []Rule
		for i, pat := range strings.Split(patterns, "\n") {
			if i == 16 {
				break
			}
			if !strings.HasPrefix(pat, "*") {
				pat = "/" + pat
			}
			rules = append(rules, Rule{Allow: allow>>i&1 == 1, Pattern: normalize(pat)})
		}
		p := Policy{Rules: rules, m: compile(rules)}
		indexed := p
		indexed.m = compile(rules)
		indexed.m.indexAfter = 0 // the window index from the first search
		long := "/" + strings.Repeat(path+"/", gramMinPath/(len(path)+1)+1)
		for _, s := range []string{"/" + path, long} {
			want := refAllowed(rules, s)
			if got := p.Allowed(s); got != want {
				t.Fatalf("Allowed(%q) = %v, the reference says %v (rules %+v)", s, got, want, rules)
			}
			if got := indexed.Allowed(s); got != want {
				t.Fatalf("with the window index, Allowed(%q) = %v, the reference says %v (rules %+v)", s, got, want, rules)
			}
			if s == "/robots.txt" {
				continue
			}
			if got := regexpAllowed(t, rules, s); got != want {
				t.Fatalf("%q: the regexp reference says %v, the backtracking one %v (rules %+v)", s, got, want, rules)
			}
		}
	})
}

// refAllowed is Allowed as it was before rules were compiled: every rule, in
// precedence order, through the backtracking matcher.
func refAllowed(rules []Rule, path string) bool {
	if path == "/robots.txt" {
		return true
	}
	path = CanonicalPath(path)
	sorted := slices.Clone(rules)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if len(a.Pattern) != len(b.Pattern) {
			return len(a.Pattern) > len(b.Pattern)
		}
		return a.Allow && !b.Allow
	})
	for _, r := range sorted {
		if backtrackMatch(r.Pattern, path) {
			return r.Allow
		}
	}
	return true
}

// backtrackMatch is the matcher Allowed used before: greedy with one
// backtrack point per '*', O(len(pattern) × len(path)).
func backtrackMatch(pattern, path string) bool {
	anchored := strings.HasSuffix(pattern, "$")
	if anchored {
		pattern = pattern[:len(pattern)-1]
	}
	if !strings.Contains(pattern, "*") {
		if anchored {
			return path == pattern
		}
		return strings.HasPrefix(path, pattern)
	}
	p, s := 0, 0
	star, mark := -1, 0
	for s < len(path) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, s
			p++
		case p < len(pattern) && pattern[p] == path[s]:
			p++
			s++
		case p == len(pattern) && !anchored:
			return true
		case star >= 0:
			p = star + 1
			mark++
			s = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// regexpAllowed decides with each pattern translated to a regexp: longest
// pattern first, Allow on a tie.
func regexpAllowed(t *testing.T, rules []Rule, path string) bool {
	path = CanonicalPath(path)
	best, allow := -1, true
	for _, r := range rules {
		pat, anchored := strings.CutSuffix(r.Pattern, "$")
		var expr strings.Builder
		expr.WriteString("^")
		for i, lit := range strings.Split(pat, "*") {
			if i > 0 {
				expr.WriteString("(?s:.*)")
			}
			expr.WriteString(regexp.QuoteMeta(lit))
		}
		if anchored {
			expr.WriteString("$")
		}
		re, err := regexp.Compile(expr.String())
		if err != nil {
			t.Fatalf("pattern %q: %v", r.Pattern, err)
		}
		if !re.MatchString(path) {
			continue
		}
		if n := len(r.Pattern); n > best || (n == best && r.Allow) {
			best, allow = n, r.Allow
		}
	}
	return allow
}
