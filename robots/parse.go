package robots

import (
	"bytes"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// group is one group of the file: its product tokens and what it says.
type group struct {
	agents      []string
	rules       []Rule
	crawlDelay  time.Duration // -1 when not said
	concurrency int           // 0 when not said
}

// parseBody fills p from the body: it reads lines, forms groups, picks the
// groups for token (else "*") and merges them.
func parseBody(p *Policy, body []byte, token string, maxDelay time.Duration) {
	if len(body) > MaxBytes {
		// Drop the line the cap cut in two: a shortened Allow would allow
		// more than the file does.
		body = body[:MaxBytes]
		if i := bytes.LastIndexAny(body, "\r\n"); i >= 0 {
			body = body[:i]
		}
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")) // UTF-8 BOM
	var groups []*group
	var cur *group
	inRules := false // a user-agent line after rules starts a new group
	for _, line := range splitLines(body) {
		key, val, ok := splitLine(line)
		if !ok {
			continue
		}
		switch key {
		case "user-agent":
			if cur == nil || inRules {
				cur = &group{crawlDelay: -1}
				groups = append(groups, cur)
				inRules = false
			}
			if t := agentToken(val); t != "" {
				cur.agents = append(cur.agents, t)
			}
		case "allow", "disallow":
			if cur == nil {
				continue // a rule before any group belongs to no one
			}
			inRules = true
			if pat, ok := pathPattern(val); ok {
				cur.rules = append(cur.rules, Rule{Allow: key == "allow", Pattern: pat})
			}
		case "crawl-delay":
			if cur == nil {
				continue
			}
			inRules = true
			if d, ok := parseDelay(val, maxDelay); ok {
				cur.crawlDelay = max(cur.crawlDelay, d)
			}
		case "request-rate":
			if cur == nil {
				continue
			}
			inRules = true
			if d, ok := parseRequestRate(val, maxDelay); ok {
				cur.crawlDelay = max(cur.crawlDelay, d)
			}
		case "concurrency":
			if cur == nil {
				continue
			}
			inRules = true
			if n, err := strconv.Atoi(val); err == nil && n > 0 {
				cur.concurrency = minPositive(cur.concurrency, n)
			}
		case "sitemap":
			if u, err := url.Parse(val); err == nil && u.IsAbs() && len(p.Sitemaps) < 1000 {
				p.Sitemaps = append(p.Sitemaps, val)
			}
		}
	}
	applyGroups(p, groups, token)
}

// applyGroups merges the groups that name token exactly, or else those for
// "*", into p. No group at all means no rules: allow all.
func applyGroups(p *Policy, groups []*group, token string) {
	var chosen []*group
	for _, want := range []string{token, "*"} {
		for _, g := range groups {
			for _, a := range g.agents {
				if a == want {
					chosen = append(chosen, g)
					break
				}
			}
		}
		if len(chosen) > 0 || token == "*" {
			break
		}
	}
	delay := time.Duration(-1)
	for _, g := range chosen {
		p.Rules = append(p.Rules, g.rules...)
		delay = max(delay, g.crawlDelay)
		p.Concurrency = minPositive(p.Concurrency, g.concurrency)
	}
	if delay > 0 {
		p.CrawlDelay = delay
		p.Concurrency = 1
	}
	// In the order RFC 9309 applies them, for whoever reads the policy.
	slices.SortStableFunc(p.Rules, precedence)
}

func minPositive(a, b int) int {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// splitLines splits on CR, LF or CRLF.
func splitLines(b []byte) []string {
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' || r == '\r' })
}

// splitLine reads "key: value # comment" into a lower-case key (with the
// common misspellings folded) and a trimmed value.
func splitLine(line string) (key, val string, ok bool) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	k, v, ok := strings.Cut(line, ":")
	if !ok {
		return "", "", false
	}
	key = strings.ToLower(strings.TrimSpace(k))
	switch key {
	case "useragent", "user agent":
		key = "user-agent"
	case "crawldelay", "crawl delay":
		key = "crawl-delay"
	case "requestrate", "request rate":
		key = "request-rate"
	case "dissallow", "dissalow", "disalow", "diasllow", "disallaw":
		key = "disallow"
	case "site-map":
		key = "sitemap"
	}
	return key, strings.TrimSpace(v), true
}

// ProductToken cuts a User-Agent string to its product token ("PoliteBot/1.0
// (+url)" → "politebot"), lower-case: the name robots.txt groups are
// matched against. An empty or unnamed agent is "*".
func ProductToken(ua string) string {
	ua = strings.TrimSpace(ua)
	if ua == "*" {
		return "*"
	}
	end := strings.IndexFunc(ua, func(r rune) bool { return !isTokenChar(r) })
	if end < 0 {
		end = len(ua)
	}
	if end == 0 {
		return "*"
	}
	return strings.ToLower(ua[:end])
}

// agentToken reads a user-agent line's value the same way; "" if it has no
// usable token.
func agentToken(v string) string {
	if strings.HasPrefix(v, "*") {
		return "*"
	}
	end := strings.IndexFunc(v, func(r rune) bool { return !isTokenChar(r) })
	if end < 0 {
		end = len(v)
	}
	return strings.ToLower(v[:end])
}

func isTokenChar(r rune) bool {
	return r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
}

// pathPattern checks and normalises an Allow/Disallow value, dot segments
// resolved as resolvePattern says. An empty value is no rule ("Disallow:"
// allows all); a value that is not a path is skipped.
func pathPattern(v string) (string, bool) {
	if v == "" || (v[0] != '/' && v[0] != '*') {
		return "", false
	}
	if i := strings.IndexAny(v, " \t"); i >= 0 {
		v = v[:i]
	}
	return resolvePattern(normalize(v)), true
}

// parseDelay reads Crawl-delay seconds ("10", "0.5"); negative, non-finite
// and non-numbers are ignored, huge values clamped.
func parseDelay(v string, maxDelay time.Duration) (time.Duration, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false
	}
	if f >= maxDelay.Seconds() {
		return maxDelay, true
	}
	return time.Duration(f * float64(time.Second)), true
}

// parseRequestRate reads "n/t" as one request per t/n; t is seconds with an
// optional unit s, m or h ("1/5", "1/5s", "10/1m"). A time-of-day window
// after it ("1/10s 0600-0845") is ignored.
func parseRequestRate(v string, maxDelay time.Duration) (time.Duration, bool) {
	if f := strings.Fields(v); len(f) > 0 {
		v = f[0]
	}
	ns, ts, ok := strings.Cut(v, "/")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 || ts == "" {
		return 0, false
	}
	unit := time.Second
	switch ts[len(ts)-1] {
	case 's', 'S':
		ts = ts[:len(ts)-1]
	case 'm', 'M':
		ts, unit = ts[:len(ts)-1], time.Minute
	case 'h', 'H':
		ts, unit = ts[:len(ts)-1], time.Hour
	}
	t, err := strconv.ParseFloat(ts, 64)
	if err != nil || math.IsNaN(t) || math.IsInf(t, 0) || t <= 0 {
		return 0, false
	}
	per := t * float64(unit) / float64(n)
	if per >= float64(maxDelay) {
		return maxDelay, true
	}
	return time.Duration(per), true
}
