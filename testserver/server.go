// Package testserver serves many web sites on this machine and measures what
// each of them experiences from a crawler: concurrent requests against the
// site's cap, gaps against its crawl delay, hits on paths its robots.txt
// closes, robots.txt fetches, duplicates, statuses and bytes.
//
// It is shaped like net/http/httptest: New, then Start, URL-ish accessors,
// and Close, which waits for requests in flight. Each site has a listener of
// its own on its own loopback address (127.0.0.2, 127.0.0.3, ...), so host
// names really differ. A control address serves the figures as JSON
// (GET /_stats, POST /_reset) and as a dashboard (GET /).
package testserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Option configures a Server.
type Option func(*options)

type options struct {
	control  string
	sameHost bool
}

// WithControl sets the control address (default "127.0.0.1:0", a free port;
// "" for none).
func WithControl(addr string) Option { return func(o *options) { o.control = addr } }

// WithSameHost puts every site on 127.0.0.1, told apart by port only, for
// systems where other 127.0.0.0/8 addresses do not work.
func WithSameHost() Option { return func(o *options) { o.sameHost = true } }

// Server runs the sites of one profile.
type Server struct {
	profile Profile
	opts    options
	sites   []*site
	start   time.Time
	closing chan struct{} // closed by Close: cuts latency waits and streams short

	control    *http.Server
	controlURL string
	wg         sync.WaitGroup // serving goroutines
	closeOnce  sync.Once
}

// Site describes one running site.
type Site struct {
	Index int
	Host  string // host:port
	URL   string // http://host:port
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
	rec    *recorder
	ln     net.Listener
	hs     *http.Server

	mu      sync.Mutex
	retried map[int]bool // /retry/N already answered 429/503 (bounded by Pages)
}

// New checks the profile and prepares a server; Start opens its listeners.
func New(p Profile, opts ...Option) (*Server, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("testserver: invalid profile: %w", err)
	}
	s := &Server{profile: p, opts: options{control: "127.0.0.1:0"}, closing: make(chan struct{})}
	for _, o := range opts {
		o(&s.opts)
	}
	return s, nil
}

// Start opens a listener per site and the control address, and serves them
// until Close. On error nothing is left open.
func (s *Server) Start() error {
	s.start = time.Now()
	for i, spec := range s.profile.Sites {
		ip := "127.0.0.1"
		if !s.opts.sameHost {
			ip = fmt.Sprintf("127.0.%d.%d", i/250, 2+i%250)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			s.Close()
			return fmt.Errorf("testserver: site %d: %w", i, err)
		}
		r := siteRules(&s.profile, spec)
		st := &site{
			srv: s, index: i, spec: spec, rules: r, robots: robotsBody(&s.profile, spec),
			host: ln.Addr().String(), url: "http://" + ln.Addr().String(), ln: ln,
			rec: newRecorder(r.cap, s.start), retried: map[int]bool{},
		}
		st.hs = &http.Server{Handler: st, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
			ConnState: func(_ net.Conn, cs http.ConnState) {
				if cs == http.StateNew {
					st.rec.connected()
				}
			}}
		s.sites = append(s.sites, st)
	}
	if s.opts.control != "" {
		ln, err := net.Listen("tcp", s.opts.control)
		if err != nil {
			s.Close()
			return fmt.Errorf("testserver: control address: %w", err)
		}
		s.controlURL = "http://" + ln.Addr().String()
		s.control = &http.Server{Handler: s.controlHandler(), ReadHeaderTimeout: 10 * time.Second}
		s.serve(s.control, ln)
	}
	for _, st := range s.sites {
		s.serve(st.hs, st.ln)
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
		out[i] = Site{Index: i, Host: st.host, URL: st.url, Cap: st.rules.cap, CrawlDelay: st.rules.gap,
			Disallowed: st.rules.disallow, ClosedSite: st.rules.closedSite, Spec: st.spec}
	}
	return out
}

// ControlURL is the control server's base URL ("" without one).
func (s *Server) ControlURL() string { return s.controlURL }

// Stats is a snapshot of every site's figures.
type Stats struct {
	Profile  string      `json:"profile"`
	UptimeMs int64       `json:"uptime_ms"`
	Sites    []SiteStats `json:"sites"`
}

// Stats returns the figures of every site, in profile order.
func (s *Server) Stats() Stats {
	st := Stats{Profile: s.profile.Name, UptimeMs: time.Since(s.start).Milliseconds()}
	for _, x := range s.sites {
		st.Sites = append(st.Sites, x.rec.snapshot(x.host, x.url, describe(x.spec, x.rules), x.rules.gap))
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
}

// Close stops accepting, cuts latency waits and slow streams short, and waits
// (up to 10 s) for requests in flight to finish.
func (s *Server) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		close(s.closing)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, st := range s.sites {
			if err := st.hs.Shutdown(ctx); err != nil {
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
		refresh, _ := strconv.Atoi(r.URL.Query().Get("refresh"))
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		writeDashboard(w, s.Stats(), refresh)
	})
	return mux
}
