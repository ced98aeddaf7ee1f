// Package testserver serves many web sites on this machine and measures what
// each of them experiences from a crawler: concurrent requests against the
// site's cap, gaps against its crawl delay, hits on paths its robots.txt
// closes, robots.txt fetches, duplicates, statuses and bytes.
//
// It is shaped like net/http/httptest: New, then Start, URL-ish accessors,
// and Close, which waits for requests in flight. By default each site has a
// listener of its own on its own loopback address (127.0.0.2, 127.0.0.3,
// ...), so host names really differ. A profile can also put many sites on
// one address, as shared hosts and CDNs do: virtual hosts told apart by the
// Host header, and several ports on one IP (SiteSpec.Address, VHost); the
// server then also counts per listening IP and per host:port what is in
// flight (Stats.Addresses, Stats.Listeners). A site can be fragile
// (SiteSpec.Fragile): slower with each request in flight, and answering 503
// without Retry-After past a limit; every site reports the latency
// percentiles and 5xx answers it saw. A control address serves the
// figures as JSON (GET /_stats, POST /_reset) and as a dashboard (GET /).
package testserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Option configures a Server.
type Option func(*options)

type options struct {
	control  string
	sameHost bool
	basePort int
}

// WithControl sets the control address (default "127.0.0.1:0", a free port;
// "" for none).
func WithControl(addr string) Option { return func(o *options) { o.control = addr } }

// WithBasePort puts the sites' listeners on fixed ports: base, base+1, ...,
// one per listener in the order the profile first uses them (one per site,
// unless sites with a VHost share an Address), so that a profile's sites
// have the same URLs every run. A port in use is an error of Start that
// names it. 0, the default: ports the system chooses.
func WithBasePort(base int) Option { return func(o *options) { o.basePort = base } }

// WithSameHost puts every site on 127.0.0.1, told apart by port only, for
// systems where other 127.0.0.0/8 addresses do not work.
func WithSameHost() Option { return func(o *options) { o.sameHost = true } }

// Server runs the sites of one profile.
type Server struct {
	profile Profile
	opts    options
	sites   []*site
	// listeners and addrs serve the sites: a listener per host:port, an
	// address per IP, each in order of first use by the profile.
	listeners []*listener
	addrs     []*address
	dialTo    map[string]string // site Host -> its listener's IP:port
	start     time.Time
	closing   chan struct{} // closed by Close: cuts latency waits and streams short

	control    *http.Server
	controlURL string
	wg         sync.WaitGroup // serving goroutines
	closeOnce  sync.Once
}

// Site describes one running site.
type Site struct {
	Index int
	Host  string // host:port as in URL: the VHost, or else the IP
	URL   string // http://host:port
	// Addr is the IP:port the site listens on; with a VHost, a client must
	// dial it for Host (see Resolve, Server.DialContext).
	Addr string
	// Cap is how many concurrent requests the site tolerates (its robots.txt
	// and the profile's default); CrawlDelay the gap it asks for, if any.
	Cap        int
	CrawlDelay time.Duration
	// Disallowed lists the path prefixes closed to the profile's agent;
	// ClosedSite is true when robots.txt answers 429/5xx (all closed).
	Disallowed []string
	ClosedSite bool
	Spec       SiteSpec
}

type site struct {
	srv    *Server
	index  int
	spec   SiteSpec
	rules  rules
	robots string
	host   string
	url    string
	l      *listener
	rec    *recorder

	// busy counts the requests in flight that Fragile governs (all but
	// robots.txt's), from arrival until the recorder counts them ended.
	busy atomic.Int64

	mu      sync.Mutex
	retried map[int]bool // /retry/N already answered 429/503 (bounded by Pages)
}

// New checks the profile and prepares a server; Start opens its listeners.
func New(p Profile, opts ...Option) (*Server, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("testserver: invalid profile: %w", err)
	}
	s := &Server{profile: p, opts: options{control: "127.0.0.1:0"}, closing: make(chan struct{}), dialTo: map[string]string{}}
	for _, o := range opts {
		o(&s.opts)
	}
	return s, nil
}

// Start opens the sites' listeners (one per site unless the profile shares
// them) and the control address, and serves them until Close. On error
// nothing is left open.
func (s *Server) Start() error {
	s.start = time.Now()
	if err := s.layout(); err != nil {
		for _, l := range s.listeners {
			l.ln.Close()
		}
		s.listeners = nil
		return err
	}
	if s.opts.control != "" {
		ln, err := net.Listen("tcp", s.opts.control)
		if err != nil {
			for _, l := range s.listeners {
				l.ln.Close()
			}
			s.listeners = nil
			return fmt.Errorf("testserver: control address %s: %w", s.opts.control, err)
		}
		s.controlURL = "http://" + ln.Addr().String()
		s.control = &http.Server{Handler: s.controlHandler(), ReadHeaderTimeout: 10 * time.Second}
		s.serve(s.control, ln)
	}
	for _, l := range s.listeners {
		s.serve(l.hs, l.ln)
	}
	return nil
}

func (s *Server) serve(hs *http.Server, ln net.Listener) {
	s.wg.Add(1)
	go func() { // ends when Close shuts hs down
		defer s.wg.Done()
		hs.Serve(ln)
	}()
}

// Sites describes the running sites, in profile order.
func (s *Server) Sites() []Site {
	out := make([]Site, len(s.sites))
	for i, st := range s.sites {
		out[i] = Site{Index: i, Host: st.host, URL: st.url, Addr: st.l.addr, Cap: st.rules.cap, CrawlDelay: st.rules.gap,
			Disallowed: st.rules.disallow, ClosedSite: st.rules.closedSite, Spec: st.spec}
	}
	return out
}

// ControlURL is the control server's base URL ("" without one).
func (s *Server) ControlURL() string { return s.controlURL }

// Stats is a snapshot of every site's figures, and of every listening
// address's (per IP, and per host:port on it).
type Stats struct {
	Profile   string      `json:"profile"`
	UptimeMs  int64       `json:"uptime_ms"`
	Sites     []SiteStats `json:"sites"`
	Addresses []AddrStats `json:"addresses"`
	Listeners []AddrStats `json:"listeners"`
}

// Shared reports whether some IP serves more than one site: only then do
// the rows per address say more than the rows per site.
func (st Stats) Shared() bool {
	for _, a := range st.Addresses {
		if len(a.Sites) > 1 {
			return true
		}
	}
	return false
}

// Stats returns the figures of every site, in profile order, then of every
// IP and host:port, in order of first use.
func (s *Server) Stats() Stats {
	st := Stats{Profile: s.profile.Name, UptimeMs: time.Since(s.start).Milliseconds()}
	for _, x := range s.sites {
		ss := x.rec.snapshot(x.host, x.l.addr, x.url, describe(x.spec, x.rules), x.rules.gap)
		ss.Fragile = x.spec.Fragile.String()
		st.Sites = append(st.Sites, ss)
	}
	hosts := func(sites []*site) []string {
		out := make([]string, len(sites))
		for i, x := range sites {
			out[i] = x.host
		}
		return out
	}
	for _, a := range s.addrs {
		st.Addresses = append(st.Addresses, a.g.snapshot(a.ip, hosts(a.sites)))
	}
	for _, l := range s.listeners {
		st.Listeners = append(st.Listeners, l.own.snapshot(l.addr, hosts(l.sites)))
	}
	return st
}

// Reset zeroes every figure (requests in flight stay counted as in flight)
// and forgets which /retry/ pages have answered.
func (s *Server) Reset() {
	for _, x := range s.sites {
		x.rec.reset()
		x.mu.Lock()
		x.retried = map[int]bool{}
		x.mu.Unlock()
	}
	for _, a := range s.addrs {
		a.g.reset()
	}
	for _, l := range s.listeners {
		l.own.reset()
	}
}

// Close stops accepting, cuts latency waits and slow streams short, and waits
// (up to 10 s) for requests in flight to finish.
func (s *Server) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		close(s.closing)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, l := range s.listeners {
			if err := l.hs.Shutdown(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if s.control != nil {
			errs = append(errs, s.control.Shutdown(ctx))
		}
		s.wg.Wait()
	})
	return errors.Join(errs...)
}

func (s *Server) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(s.Stats())
	})
	mux.HandleFunc("POST /_reset", func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		writeDashboard(w, s.Stats(), refreshOf(r))
	})
	return mux
}
