package testserver

import (
	"fmt"
	"sort"
	"time"
)

// PresetNames lists the presets Preset knows.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset builds a profile of n sites from a named preset:
//
//   - uniform: every site alike: 50 pages, 50 ms latency, cap 3, /private/
//     disallowed. The profile for utilisation figures.
//   - mixed: a cycle of ten kinds: plain; Concurrency: 1; Concurrency: 2 in
//     the * group; Crawl-delay; robots.txt 404; robots.txt 503 (disallow all);
//     robots.txt behind redirects; pages that stream for 3.2 s; Request-rate;
//     a slow, oversized robots.txt. Pages link across sites.
//   - slow: 300 ms ± 100 ms pages, a third of the links to 3 s streams.
//   - hostile: huge bodies, redirect loops, odd link schemes, invalid UTF-8,
//     300 links a page, robots.txt answering 500, 429, or 7 redirects.
//   - shared: uniform sites, eight to an IP as on a shared host: of each
//     eight, six are virtual hosts on one port, named site<i>.test (i the
//     site's index; each its own registered domain), and two have a port
//     of their own, reached by IP. Pages link across sites. Each IP
//     tolerates 4 at once (AddressCap). A client needs Server.Resolve
//     (curl's --resolve) to reach the named ones.
//   - fragile: sites that suffer under load (SiteSpec.Fragile): 200 pages,
//     4 links each, /private/ disallowed, robots.txt silent on concurrency
//     (so cap 3); a page takes 50 ms alone, 150 ms with another in flight,
//     and a third request in flight is answered 503 at once, without
//     Retry-After. A crawler that keeps 3 at once is refused; one that
//     keeps at most 2 never is.
func Preset(name string, n int, seed int64) (Profile, error) {
	kinds, ok := presets[name]
	if !ok {
		return Profile{}, fmt.Errorf("testserver: unknown profile %q (known: %v)", name, PresetNames())
	}
	if n < 1 {
		return Profile{}, fmt.Errorf("testserver: %d sites (want at least 1)", n)
	}
	p := Profile{Name: name, Seed: seed, AddressCap: addressCaps[name]}
	for i := 0; i < n; i++ {
		s := kinds[i%len(kinds)]()
		if place := layouts[name]; place != nil {
			place(i, &s)
		}
		p.Sites = append(p.Sites, s)
	}
	return p, p.Validate()
}

func ms(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }

func plain() SiteSpec {
	return SiteSpec{
		Pages: 40, Links: 4, CrossLinks: 1, Latency: ms(30), Jitter: ms(20), PageBytes: 4 << 10,
		Redirects: 0.05, NonHTML: 0.03, Errors: 0.02, Retry: 0.02,
		Robots: Robots{Disallow: []string{"/private/"}},
	}
}

// sharedPerIP and sharedVHosts shape the shared preset: sites per IP, and
// how many of them are virtual hosts on one port.
const sharedPerIP, sharedVHosts = 8, 6

// layouts places a preset's site i on its address, where the preset shares
// addresses.
var layouts = map[string]func(i int, s *SiteSpec){
	"shared": func(i int, s *SiteSpec) {
		s.Address = fmt.Sprintf("ip%d", i/sharedPerIP)
		if i%sharedPerIP < sharedVHosts {
			s.VHost = fmt.Sprintf("site%d.test", i)
		}
	},
}

// addressCaps is the AddressCap of the presets that share addresses.
var addressCaps = map[string]int{"shared": 4}

var presets = map[string][]func() SiteSpec{
	"uniform": {func() SiteSpec {
		return SiteSpec{Pages: 50, Links: 4, Latency: ms(50), PageBytes: 2 << 10,
			Robots: Robots{Disallow: []string{"/private/"}}}
	}},
	"mixed": {
		plain,
		func() SiteSpec { s := plain(); s.Robots.Concurrency = 1; return s },
		func() SiteSpec { s := plain(); s.Robots.Concurrency = 2; s.Robots.Wildcard = true; return s },
		func() SiteSpec {
			s := plain()
			s.Pages = 12
			s.Robots.CrawlDelay = ms(300)
			s.Robots.OtherAgents = true
			return s
		},
		func() SiteSpec { s := plain(); s.Robots = Robots{Status: 404}; return s },
		func() SiteSpec { s := plain(); s.Robots.Status = 503; return s },
		func() SiteSpec {
			s := plain()
			s.Robots.RedirectHops = 2
			s.Robots.Concurrency = 2
			return s
		},
		func() SiteSpec {
			s := plain()
			s.Pages = 20
			s.Slow, s.SlowFor = 0.25, ms(3200)
			return s
		},
		func() SiteSpec { s := plain(); s.Pages = 12; s.Robots.RequestRate = "4/1s"; return s },
		func() SiteSpec {
			s := plain()
			s.Robots.Delay = ms(1000)
			s.Robots.Oversize = true
			s.Robots.Disallow = append(s.Robots.Disallow, "/archive/")
			return s
		},
	},
	"shared": {func() SiteSpec {
		return SiteSpec{Pages: 30, Links: 4, CrossLinks: 1, Latency: ms(50), Jitter: ms(20), PageBytes: 2 << 10,
			Robots: Robots{Disallow: []string{"/private/"}}}
	}},
	"fragile": {func() SiteSpec {
		return SiteSpec{Pages: 200, Links: 4, PageBytes: 2 << 10, Robots: Robots{Disallow: []string{"/private/"}},
			Fragile: Fragile{Base: ms(50), Factor: 3, FailAbove: 2}}
	}},
	"slow": {func() SiteSpec {
		return SiteSpec{Pages: 30, Links: 3, CrossLinks: 1, Latency: ms(300), Jitter: ms(100), PageBytes: 8 << 10,
			Slow: 0.3, SlowFor: ms(3000), Robots: Robots{Disallow: []string{"/private/"}}}
	}},
	"hostile": {
		func() SiteSpec {
			return SiteSpec{Pages: 30, Links: 300, CrossLinks: 2, Latency: ms(10), PageBytes: 16 << 10,
				Huge: 0.02, HugeBytes: 64 << 20, Redirects: 0.1, Retry: 0.05, Errors: 0.05, NonHTML: 0.05,
				Slow: 0.02, SlowFor: ms(5000), Hostile: true,
				Robots: Robots{Disallow: []string{"/private/"}}}
		},
		func() SiteSpec { s := plain(); s.Hostile = true; s.Robots.Status = 500; return s },
		func() SiteSpec { s := plain(); s.Hostile = true; s.Robots.Status = 429; return s },
		func() SiteSpec { s := plain(); s.Hostile = true; s.Robots.RedirectHops = 7; return s },
		func() SiteSpec { s := plain(); s.Hostile = true; s.Robots.Oversize = true; return s },
	},
}
