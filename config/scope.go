package config

import (
	"regexp"

	"github.com/polite-crawler/polite/frontier"
)

// MaxFollowExternal bounds --follow-external: every hop off the crawl's
// sites multiplies the sites it reaches.
const MaxFollowExternal = 10

// validateScope reports, through bad, each scope option that cannot be
// applied, naming its flag.
func (c *Config) validateScope(bad func(flag, format string, a ...any)) {
	for _, d := range c.AllowDomain {
		if _, err := frontier.ParseDomain(d, c.SiteKey); err != nil {
			bad("allow-domain", "%v", err)
		}
	}
	if c.FollowExternal < 0 || c.FollowExternal > MaxFollowExternal {
		bad("follow-external", "%d: want 0..%d", c.FollowExternal, MaxFollowExternal)
	}
	for _, f := range []struct {
		flag string
		res  Repeated
	}{{"include", c.Include}, {"exclude", c.Exclude}} {
		ok := true
		for _, re := range f.res { // each one named, where the frontier stops at the first
			if _, err := regexp.Compile(re); err != nil {
				bad(f.flag, "%q is not an RE2 regular expression: %v", re, err)
				ok = false
			}
		}
		if err := (frontier.ScopeRules{Include: f.res}).Validate(); ok && err != nil {
			bad(f.flag, "%v", err) // the frontier's bounds: how many, how long, and all of them together
		}
	}
}

// ScopeRules are the scope options as the frontier stores them with the
// crawl (frontier.Options.Scope): the domains in frontier.ParseDomain
// form. Validate first: a domain it rejects is left out.
func (c *Config) ScopeRules() frontier.ScopeRules {
	r := frontier.ScopeRules{FollowExternal: c.FollowExternal, Include: c.Include, Exclude: c.Exclude}
	for _, d := range c.AllowDomain {
		if n, err := frontier.ParseDomain(d, c.SiteKey); err == nil {
			r.AllowDomains = append(r.AllowDomains, n)
		}
	}
	return r.Canonical()
}
