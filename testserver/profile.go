package testserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"
)

// Profile describes every site the server runs. Build one with Preset, load
// one with LoadProfile, or write it by hand.
type Profile struct {
	Name string `json:"name"`
	// Seed makes pages and links reproducible.
	Seed int64 `json:"seed"`
	// Agent is the product token the site's own robots group names (default
	// "politebot"). Rules for other agents are there to be ignored.
	Agent string `json:"agent,omitempty"`
	// DefaultCap is the concurrency a site tolerates when its robots.txt says
	// nothing (default 3). A Concurrency line can only lower it.
	DefaultCap int `json:"default_cap,omitempty"`
	// AddressCap is the concurrency each listening IP tolerates over all
	// its sites (0 = no limit): what a crawler's per-IP cap must keep. A
	// request that starts with AddressCap already in flight at its IP
	// counts in AddrStats.OverCap.
	AddressCap int        `json:"address_cap,omitempty"`
	Sites      []SiteSpec `json:"sites"`
}

// SiteSpec is one site. Shares (Slow, Retry, ...) are the fraction of a
// page's links that point at pages with that behaviour.
type SiteSpec struct {
	Pages      int      `json:"pages"`                 // normal pages /p/0 .. /p/Pages-1
	Links      int      `json:"links"`                 // links per page within the site
	CrossLinks int      `json:"cross_links,omitempty"` // links per page to other sites
	Latency    Duration `json:"latency,omitempty"`     // time to first byte (mean)
	Jitter     Duration `json:"jitter,omitempty"`      // ± uniformly around Latency
	PageBytes  int      `json:"page_bytes,omitempty"`  // body size of a normal page

	Slow      float64  `json:"slow,omitempty"`       // /slow/N: streams its body over SlowFor
	SlowFor   Duration `json:"slow_for,omitempty"`   //
	Retry     float64  `json:"retry,omitempty"`      // /retry/N: 429 or 503 with Retry-After once, then 200
	Errors    float64  `json:"errors,omitempty"`     // /error/N: 500
	Redirects float64  `json:"redirects,omitempty"`  // /redirect/N (same site), /redirect-private/N, /away/N (other site)
	Huge      float64  `json:"huge,omitempty"`       // /huge/N: HugeBytes of body
	HugeBytes int      `json:"huge_bytes,omitempty"` //
	NonHTML   float64  `json:"non_html,omitempty"`   // /data/N.bin: application/octet-stream
	Hostile   bool     `json:"hostile,omitempty"`    // odd link schemes, invalid UTF-8, redirect loops
	Robots    Robots   `json:"robots"`

	// Address and VHost put several sites on one server address. Sites with
	// the same Address label share one listening IP (the label is only a
	// name; "" means an IP of the site's own, as by default). Among them,
	// the sites with a VHost share one port and are told apart by the Host
	// header; each site without one has a port of its own. A site with a
	// VHost is reached as http://VHost:port/, so a client must map the
	// name to the listener (Site.Resolve gives curl's --resolve form), and
	// a request whose Host names no site of its listener is answered 421
	// Misdirected Request. VHost is a lower-case DNS name (not an IP
	// literal), unique among the sites of one Address.
	//
	//	{"address": "shared", "vhost": "a.vhost.test", ...}  one port, by Host
	//	{"address": "shared", "vhost": "b.vhost.test", ...}
	//	{"address": "shared", ...}                           same IP, own port
	Address string `json:"address,omitempty"`
	VHost   string `json:"vhost,omitempty"`

	// Fragile makes the site suffer under load (zero: a sturdy site). See
	// Fragile for the contract; Latency and Jitter must then be 0.
	//
	//	"fragile": {"base": "50ms", "factor": 3, "fail_above": 2}
	Fragile Fragile `json:"fragile,omitzero"`
}

// Fragile is a site that slows down, then fails, as concurrent requests
// pile up. It governs every request but robots.txt's (which is never
// slowed nor refused, so a crawler can always learn the rules). Let n be
// the number of such requests in flight at the site when one arrives,
// itself included (a request is in flight until its site counts it ended,
// see SiteStats.InFlight). If FailAbove > 0 and n > FailAbove, the request
// is answered 503 at once, without Retry-After, and counted in
// SiteStats.Overloaded. Otherwise its first byte waits
// min(Base × Factor^(n−1), Max). Both are decided at arrival, so the
// outcome does not depend on what arrives later.
type Fragile struct {
	Base      Duration `json:"base"`          // latency of a request alone
	Factor    float64  `json:"factor"`        // latency multiplier per other request in flight (>= 1)
	FailAbove int      `json:"fail_above"`    // 503 when more than this many in flight (0 = never)
	Max       Duration `json:"max,omitempty"` // latency ceiling (default 10 s)
}

// defaultFragileMax caps a fragile site's latency when Fragile.Max is 0, so
// a pile-up can not hang a test.
const defaultFragileMax = 10 * time.Second

// On reports whether f makes the site fragile.
func (f Fragile) On() bool { return f != Fragile{} }

// latency is the wait of a request that arrives with n in flight (itself
// included), and whether it is refused instead.
func (f Fragile) latency(n int) (d time.Duration, refuse bool) {
	if f.FailAbove > 0 && n > f.FailAbove {
		return 0, true
	}
	ceil := time.Duration(f.Max)
	if ceil <= 0 {
		ceil = defaultFragileMax
	}
	v := float64(f.Base) * math.Pow(f.Factor, float64(max(n-1, 0)))
	if v >= float64(ceil) {
		return ceil, false
	}
	return time.Duration(v), false
}

// String says what f does, in words ("" for a sturdy site).
func (f Fragile) String() string {
	if !f.On() {
		return ""
	}
	s := fmt.Sprintf("%v ×%g per request in flight", time.Duration(f.Base), f.Factor)
	if f.FailAbove > 0 {
		s += fmt.Sprintf(", 503 above %d", f.FailAbove)
	}
	return s
}

// Robots is what a site's robots.txt says and how it is served.
type Robots struct {
	// Status of /robots.txt: 200 (default), 404 (allow all), 429 or 5xx
	// (a crawler must then treat the whole site as disallowed).
	Status int `json:"status,omitempty"`
	// Disallow lists path prefixes closed to Profile.Agent. Pages link into
	// them, so a crawler that ignores them is caught.
	Disallow []string `json:"disallow,omitempty"`
	// Concurrency is our extension line "Concurrency: N" (0 = not said).
	Concurrency int `json:"concurrency,omitempty"`
	// CrawlDelay adds "Crawl-delay: seconds"; RequestRate adds
	// "Request-rate: n/t" (e.g. "1/2s"). Either means one request at a time.
	CrawlDelay  Duration `json:"crawl_delay,omitempty"`
	RequestRate string   `json:"request_rate,omitempty"`
	// Wildcard puts the rules in the "*" group instead of Agent's.
	Wildcard bool `json:"wildcard,omitempty"`
	// OtherAgents adds groups for other crawlers, stricter than ours.
	OtherAgents bool `json:"other_agents,omitempty"`
	// RedirectHops makes /robots.txt redirect this many times first.
	RedirectHops int `json:"redirect_hops,omitempty"`
	// Delay holds the robots.txt response back this long.
	Delay Duration `json:"delay,omitempty"`
	// Oversize pads the file with comments past 500 KiB after the rules.
	Oversize bool `json:"oversize,omitempty"`
}

// Duration is a time.Duration written as "150ms" in JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"150ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// LoadProfile reads a JSON profile file and validates it.
func LoadProfile(path string) (Profile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, fmt.Errorf("testserver: %w", err)
	}
	var p Profile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Profile{}, fmt.Errorf("testserver: profile %s: %w", path, err)
	}
	return p, p.Validate()
}

func (p *Profile) agent() string {
	if p.Agent == "" {
		return "politebot"
	}
	return p.Agent
}

func (p *Profile) defaultCap() int {
	if p.DefaultCap <= 0 {
		return 3
	}
	return p.DefaultCap
}

// Validate reports every problem in the profile at once.
func (p *Profile) Validate() error {
	var errs []error
	if len(p.Sites) == 0 {
		errs = append(errs, errors.New("sites: none (want at least 1)"))
	}
	if p.AddressCap < 0 {
		errs = append(errs, fmt.Errorf("address_cap: %d (want >= 0; 0 = no limit)", p.AddressCap))
	}
	if len(p.Sites) > 60000 {
		errs = append(errs, fmt.Errorf("sites: %d (at most 60000)", len(p.Sites)))
	}
	vhosts := map[[2]string]int{} // address label, name -> first site
	for i, s := range p.Sites {
		bad := func(field, format string, a ...any) {
			errs = append(errs, fmt.Errorf("sites[%d].%s: %s", i, field, fmt.Sprintf(format, a...)))
		}
		if s.Pages < 1 || s.Pages > 1_000_000 {
			bad("pages", "%d (want 1..1000000)", s.Pages)
		}
		if s.Links < 0 || s.Links > 10_000 || s.CrossLinks < 0 || s.CrossLinks > 10_000 {
			bad("links", "%d/%d (want 0..10000)", s.Links, s.CrossLinks)
		}
		if s.Latency < 0 || s.Jitter < 0 || s.Jitter > s.Latency {
			bad("latency", "%v ± %v (want >= 0, jitter <= latency)", time.Duration(s.Latency), time.Duration(s.Jitter))
		}
		if f := s.Fragile; f.On() {
			switch {
			case f.Base < 0 || f.Max < 0 || (f.Max > 0 && f.Base > f.Max) || f.Base > Duration(time.Minute):
				bad("fragile.base", "%v, max %v (want 0..1m, base <= max)", time.Duration(f.Base), time.Duration(f.Max))
			case !(f.Factor >= 1 && f.Factor <= 1000):
				bad("fragile.factor", "%v (want 1..1000)", f.Factor)
			case f.FailAbove < 0:
				bad("fragile.fail_above", "%d (want >= 0; 0 = never)", f.FailAbove)
			case s.Latency != 0 || s.Jitter != 0:
				bad("fragile", "with latency %v: a fragile site's latency is its own (want latency 0)", time.Duration(s.Latency))
			}
		}
		if s.PageBytes < 0 || s.HugeBytes < 0 || s.HugeBytes > 1<<30 {
			bad("page_bytes", "%d / huge %d (want 0..1 GiB)", s.PageBytes, s.HugeBytes)
		}
		sum := 0.0
		for _, f := range []float64{s.Slow, s.Retry, s.Errors, s.Redirects, s.Huge, s.NonHTML} {
			if f < 0 {
				bad("shares", "%v is negative", f)
			}
			sum += f
		}
		if sum > 1 {
			bad("shares", "add up to %.2f (want <= 1)", sum)
		}
		r := s.Robots
		if r.Status != 0 && (r.Status < 200 || r.Status > 599 || (r.Status >= 300 && r.Status < 400)) {
			bad("robots.status", "%d (want 2xx, 4xx or 5xx; use redirect_hops for 3xx)", r.Status)
		}
		if r.Concurrency < 0 || r.CrawlDelay < 0 || r.RedirectHops < 0 || r.RedirectHops > 20 {
			bad("robots", "negative concurrency or delay, or more than 20 redirect hops")
		}
		if r.RequestRate != "" {
			if _, err := parseRate(r.RequestRate); err != nil {
				bad("robots.request_rate", "%v", err)
			}
		}
		for _, d := range r.Disallow {
			if !strings.HasPrefix(d, "/") {
				bad("robots.disallow", "%q does not start with /", d)
			}
		}
		if len(s.Address) > 64 {
			bad("address", "label of %d bytes (at most 64)", len(s.Address))
		}
		if s.VHost != "" {
			if err := checkHostName(s.VHost); err != nil {
				bad("vhost", "%v", err)
			}
			key := [2]string{s.Address, s.VHost}
			if j, ok := vhosts[key]; ok && s.Address != "" {
				bad("vhost", "%q already names sites[%d] on address %q", s.VHost, j, s.Address)
			} else if !ok {
				vhosts[key] = i
			}
		}
	}
	return errors.Join(errs...)
}

// checkHostName accepts a lower-case DNS name of letters, digits and
// hyphens, with at least one dot, that is not an IP literal.
func checkHostName(name string) error {
	if len(name) > 253 || !strings.Contains(name, ".") || net.ParseIP(name) != nil {
		return fmt.Errorf("%q: want a dotted DNS name such as a.vhost.test, not an IP", name)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q: empty, long, or hyphen-edged label %q", name, label)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("%q: %q is not a lower-case letter, digit or hyphen", name, c)
			}
		}
	}
	return nil
}

// parseRate reads "n/t" (t a Go duration, or a number of seconds) and returns
// the gap one request per t/n means.
func parseRate(s string) (time.Duration, error) {
	n, t, ok := strings.Cut(s, "/")
	var count int
	if _, err := fmt.Sscanf(n, "%d", &count); !ok || err != nil || count < 1 {
		return 0, fmt.Errorf("request rate %q: want n/t such as 1/5s", s)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		var secs int
		if _, err2 := fmt.Sscanf(t, "%d", &secs); err2 != nil || secs < 1 {
			return 0, fmt.Errorf("request rate %q: want n/t such as 1/5s", s)
		}
		d = time.Duration(secs) * time.Second
	}
	if d <= 0 {
		return 0, fmt.Errorf("request rate %q: period must be positive", s)
	}
	return d / time.Duration(count), nil
}
