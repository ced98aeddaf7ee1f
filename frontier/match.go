package frontier

import (
	"fmt"
	"regexp"
	"strings"
)

// ScopeMatcher is ScopeRules compiled, for testing links at the cost of a
// few map lookups and one match per regular expression list. It is safe
// for concurrent use.
type ScopeMatcher struct {
	rules ScopeRules
	// domains holds each allowed domain as host and port ("": any port).
	domains          map[hostPort]struct{}
	include, exclude *regexp.Regexp // nil: none
}

type hostPort struct{ host, port string }

// Compile returns r's matcher, or Validate's error. Its patterns are
// compiled once, by the same pass that validates them.
func (r ScopeRules) Compile() (*ScopeMatcher, error) {
	include, exclude, err := r.check()
	if err != nil {
		return nil, err
	}
	m := &ScopeMatcher{rules: r.Canonical(), domains: make(map[hostPort]struct{}, len(r.AllowDomains)),
		include: include, exclude: exclude}
	for _, d := range r.AllowDomains {
		h, p := splitSite(d)
		m.domains[hostPort{h, p}] = struct{}{}
	}
	return m, nil
}

// Bounds on a list of patterns (ScopeRules.Include, Exclude): each is
// compiled by every process of the crawl, and run on every link. RE2 bounds
// a program's size, so patterns that compile each may not together: 64 of
// 1 KiB do not (`[a-z]{1000}` repeated), and 32 take seconds to compile;
// 8 KiB in all compiles in well under a second.
const (
	MaxPatterns    = 64
	MaxPatternLen  = 1024
	MaxPatternsLen = 8192
)

// anyOf is one regular expression matching where any of res does (nil
// for none): one pass over a URL, however many there are. Patterns that
// compile each may not together (RE2 bounds a program's size), so the
// union is what is checked.
func anyOf(res []string) (*regexp.Regexp, error) {
	if len(res) == 0 {
		return nil, nil
	}
	if len(res) > MaxPatterns {
		return nil, fmt.Errorf("frontier: scope: %d patterns: at most %d", len(res), MaxPatterns)
	}
	parts, total := make([]string, len(res)), 0
	for i, re := range res {
		if total += len(re); total > MaxPatternsLen {
			return nil, fmt.Errorf("frontier: scope: patterns of more than %d bytes in all", MaxPatternsLen)
		}
		if len(re) > MaxPatternLen {
			return nil, fmt.Errorf("frontier: scope: pattern of %d bytes: at most %d", len(re), MaxPatternLen)
		}
		if _, err := regexp.Compile(re); err != nil {
			return nil, fmt.Errorf("frontier: scope: %w", err)
		}
		parts[i] = "(?:" + re + ")"
	}
	u, err := regexp.Compile(strings.Join(parts, "|"))
	if err != nil {
		return nil, fmt.Errorf("frontier: scope: the patterns together: %w", err)
	}
	return u, nil
}

// Rules are the rules m was compiled from (Canonical).
func (m *ScopeMatcher) Rules() ScopeRules { return m.rules }

// FollowExternal is the rules' FollowExternal.
func (m *ScopeMatcher) FollowExternal() int { return m.rules.FollowExternal }

// URL reports whether norm, a normalised absolute URL (Normalize), passes
// Include and Exclude: it matches an Include, if there are any, and no
// Exclude.
func (m *ScopeMatcher) URL(norm string) bool {
	if m.include != nil && !m.include.MatchString(norm) {
		return false
	}
	return m.exclude == nil || !m.exclude.MatchString(norm)
}

// Allowed reports whether site (Normalize's: host, and port unless
// default) is under an allowed domain: its host is the domain's or a
// subdomain of it (Scrapy's allowed_domains rule: allowing example.com
// allows www.example.com), and, when the domain names a port, its port
// is that one. An IP address matches only itself. It allocates nothing.
func (m *ScopeMatcher) Allowed(site string) bool {
	if len(m.domains) == 0 {
		return false
	}
	host, port := splitSite(site)
	for h := host; ; {
		if _, ok := m.domains[hostPort{h, ""}]; ok {
			return true
		}
		if _, ok := m.domains[hostPort{h, port}]; ok && port != "" {
			return true
		}
		i := strings.IndexByte(h, '.')
		if i < 0 || strings.HasPrefix(host, "[") {
			return false
		}
		h = h[i+1:]
	}
}

func (m *ScopeMatcher) String() string { return fmt.Sprint(m.rules) }
