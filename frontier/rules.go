package frontier

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/polite-crawler/polite/robots"
)

// ScopeRules widen and narrow a crawl's scope beyond its seeds' sites
// (Seed): which links its processes follow. Like the seeds' sites, they
// live with the crawl in Redis: the process that creates the crawl stores
// them in its meta (Options.Scope), and every process of the crawl applies
// the stored rules, not its own (see ErrScopeConflict). The zero value is
// the seeds' sites only.
//
// A link passes when it matches an Include (if there are any) and no
// Exclude, and its site is in scope: a seed's site, or AllowDomains' (see
// DomainMatches). A link to another site passes while the external hops
// that reach it number at most FollowExternal; a link from such a page
// back to a site in scope is in scope again (hop count 0). Seeds
// themselves are always admitted, whatever the rules.
type ScopeRules struct {
	// AllowDomains are sites in scope besides the seeds' (ParseDomain
	// form): each with its subdomains, and on any port unless it names one.
	AllowDomains []string `json:"allow,omitempty"`
	// FollowExternal is how many hops off the in-scope sites links are
	// followed (0: none).
	FollowExternal int `json:"hops,omitempty"`
	// Include and Exclude are RE2 regular expressions matched against the
	// normalised absolute URL (Normalize).
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// ErrScopeConflict means a process gave scope rules (Options.Scope) that
// differ from those the crawl was created with: it would follow different
// links than the rest of the crawl. It joins nothing.
var ErrScopeConflict = errors.New("frontier: scope differs from the crawl's")

// ErrDomain rejects an --allow-domain that is not a domain name or IP
// address (optionally with a port).
var ErrDomain = errors.New("frontier: not a domain")

// IsZero reports whether r adds no rule to the seeds' sites.
func (r ScopeRules) IsZero() bool {
	return len(r.AllowDomains) == 0 && r.FollowExternal == 0 && len(r.Include) == 0 && len(r.Exclude) == 0
}

// Canonical is r with each list sorted and without repeats (their order
// means nothing), so that equal scopes compare and encode equal.
func (r ScopeRules) Canonical() ScopeRules {
	tidy := func(s []string) []string {
		if len(s) == 0 {
			return nil
		}
		s = slices.Clone(s)
		slices.Sort(s)
		return slices.Compact(s)
	}
	return ScopeRules{AllowDomains: tidy(r.AllowDomains), FollowExternal: r.FollowExternal, Include: tidy(r.Include), Exclude: tidy(r.Exclude)}
}

// Equal reports whether r and o are the same scope (Canonical).
func (r ScopeRules) Equal(o ScopeRules) bool {
	return r.encode() == o.encode()
}

// Validate reports every rule that cannot be applied: a domain not in
// ParseDomain form, a negative FollowExternal, a regular expression RE2
// rejects.
func (r ScopeRules) Validate() error {
	_, _, err := r.check()
	return err
}

// check is Validate, keeping the include and exclude expressions it
// compiled (anyOf) for Compile.
func (r ScopeRules) check() (include, exclude *regexp.Regexp, err error) {
	var errs []error
	for _, d := range r.AllowDomains {
		if n, err := ParseDomain(d, ""); err != nil || n != d {
			errs = append(errs, fmt.Errorf("%w: allowed domain %q", ErrDomain, d))
		}
	}
	if r.FollowExternal < 0 {
		errs = append(errs, fmt.Errorf("frontier: scope: follow external %d: want >= 0", r.FollowExternal))
	}
	include, ierr := anyOf(r.Include)
	exclude, eerr := anyOf(r.Exclude)
	if err := errors.Join(append(errs, ierr, eerr)...); err != nil {
		return nil, nil, err
	}
	return include, exclude, nil
}

// String says what the rules are, for people.
func (r ScopeRules) String() string {
	if r.IsZero() {
		return "the seeds' sites"
	}
	parts := []string{"the seeds' sites"}
	if len(r.AllowDomains) > 0 {
		parts = append(parts, "allowed domains "+strings.Join(r.AllowDomains, " "))
	}
	if r.FollowExternal > 0 {
		parts = append(parts, "up to "+strconv.Itoa(r.FollowExternal)+" external hops")
	}
	if len(r.Include) > 0 {
		parts = append(parts, "only URLs matching "+strings.Join(quoteAll(r.Include), " or "))
	}
	if len(r.Exclude) > 0 {
		parts = append(parts, "not URLs matching "+strings.Join(quoteAll(r.Exclude), " or "))
	}
	return strings.Join(parts, ", ")
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return q
}

// encode is r's stored form (Canonical, as JSON).
func (r ScopeRules) encode() string {
	b, _ := json.Marshal(r.Canonical()) // plain strings and ints: cannot fail
	return string(b)
}

// decodeRules reads a stored scope; "" (a crawl created before scopes were
// stored) is the zero scope.
func decodeRules(s string) (ScopeRules, error) {
	var r ScopeRules
	if s == "" {
		return r, nil
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return r, fmt.Errorf("frontier: stored scope %q: %w", s, err)
	}
	return r, nil
}

// label is one label of a host name, as ParseDomain admits it (after
// IDNA): letters, digits, '_' and inner '-'.
var label = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?$`)

// ParseDomain puts an allowed domain in the form the scope matches it in,
// the way robots.Site puts a host: lower-case, IDNA ASCII, no trailing dot,
// canonical IP literal, and a port only if it is given and not 80 (a
// URL's site names no default port). siteKey is the crawl's --site-key
// name: with "domain" a site is a registered domain, so d must be one (a
// subdomain, or a port, is an error that names the domain to give). A
// URL, a path, an empty or malformed name is an error wrapping ErrDomain.
func ParseDomain(d, siteKey string) (string, error) {
	d = strings.TrimSpace(d)
	switch {
	case d == "":
		return "", fmt.Errorf("%w: empty", ErrDomain)
	case strings.Contains(d, "://"):
		return "", fmt.Errorf("%w: %q is a URL; give its host, such as example.com", ErrDomain, d)
	case strings.ContainsAny(d, "/?#@ \t\\"):
		return "", fmt.Errorf("%w: %q; want a host name such as example.com, or an IP address, with an optional :port", ErrDomain, d)
	}
	u, err := url.Parse("http://" + d)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("%w: %q; want a host name such as example.com, or an IP address, with an optional :port", ErrDomain, d)
	}
	if u.Port() == "443" {
		u.Scheme = "https" // a default port, as :80 is: the host on any port
	}
	site := robots.Site(u)
	host, port := splitSite(site)
	if !validHost(host) {
		return "", fmt.Errorf("%w: %q is not a host name or IP address", ErrDomain, d)
	}
	if siteKey == robots.SiteKeyDomain {
		reg := robots.Domain(u)
		if port != "" || reg != host {
			return "", fmt.Errorf("%w: %q: with --site-key domain a site is a registered domain, with every host and port under it: give %s", ErrDomain, d, reg)
		}
	}
	return site, nil
}

// validHost reports whether a canonical host (robots.Site's, no port) is
// an IP literal or a name of valid labels whose last is not all digits.
func validHost(host string) bool {
	if strings.HasPrefix(host, "[") {
		return true // canonHost bracketed it: an IPv6 literal (or a zone)
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if !label.MatchString(l) {
			return false
		}
	}
	if _, err := strconv.Atoi(labels[len(labels)-1]); err == nil {
		// No TLD is all digits: this is an IPv4 address or nothing.
		_, err := netip.ParseAddr(host)
		return err == nil
	}
	return true
}

// splitSite is a site's host and port ("" when it has none).
func splitSite(site string) (host, port string) {
	i := strings.LastIndexByte(site, ':')
	if i < 0 || i < strings.LastIndexByte(site, ']') {
		return site, ""
	}
	return site[:i], site[i+1:]
}
