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

// Compile returns r's matcher, or Validate's error.
func (r ScopeRules) Compile() (*ScopeMatcher, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	m := &ScopeMatcher{rules: r.Canonical(), domains: make(map[hostPort]struct{}, len(r.AllowDomains))}
	for _, d := range r.AllowDomains {
		h, p := splitSite(d)
		m.domains[hostPort{h, p}] = struct{}{}
	}
	m.include, m.exclude = anyOf(r.Include), anyOf(r.Exclude)
	return m, nil
}

// anyOf is one regular expression matching where any of res does (nil
// for none): one pass over a URL, however many there are.
func anyOf(res []string) *regexp.Regexp {
	if len(res) == 0 {
		return nil
	}
	parts := make([]string, len(res))
	for i, re := range res {
		parts[i] = "(?:" + re + ")"
	}
	return regexp.MustCompile(strings.Join(parts, "|")) // each compiles (Validate), so their union does
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
