package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// listener is one listening host:port and the sites it serves: one site
// without a VHost (which answers whatever the Host), or sites told apart
// by their VHost.
type listener struct {
	srv    *Server
	addr   string // IP:port
	port   string
	ln     net.Listener
	hs     *http.Server
	sites  []*site          // profile order
	byName map[string]*site // VHost -> site; nil for a site without one
	own    *gauge           // this host:port
	ip     *address         // its IP
}

// address is one listening IP and the sites on all its ports.
type address struct {
	ip    string
	g     *gauge
	sites []*site
}

// connKey marks a connection's context on a VHost listener, whose
// connections are counted for the site of their first request.
type connKey struct{}

// layout opens the listeners of every site: one per site by default, one
// per Address label for its sites with a VHost. On error, the listeners
// opened so far are in s.listeners, for Start to close.
func (s *Server) layout() error {
	ips := map[string]*address{}     // Address label (or "#i" for a site alone) -> IP
	shared := map[string]*listener{} // Address label -> its VHost listener
	for i, spec := range s.profile.Sites {
		label := spec.Address
		if label == "" {
			label = fmt.Sprintf("#%d", i)
		}
		a := ips[label]
		if a == nil {
			switch n := len(s.addrs); {
			case s.opts.sameHost && n > 0:
				a = s.addrs[0] // one IP for all
			case s.opts.sameHost:
				a = &address{ip: "127.0.0.1", g: newGauge(s.profile.AddressCap, s.start)}
			default:
				a = &address{ip: fmt.Sprintf("127.0.%d.%d", n/250, 2+n%250), g: newGauge(s.profile.AddressCap, s.start)}
			}
			if len(s.addrs) == 0 || a != s.addrs[0] {
				s.addrs = append(s.addrs, a)
			}
			ips[label] = a
		}
		var l *listener
		if spec.VHost != "" && spec.Address != "" {
			l = shared[label]
		}
		if l == nil {
			ln, err := s.listen(i, a.ip)
			if err != nil {
				return err
			}
			l = &listener{srv: s, addr: ln.Addr().String(), ln: ln, own: newGauge(0, s.start), ip: a}
			_, l.port, _ = net.SplitHostPort(l.addr)
			s.listeners = append(s.listeners, l)
			if spec.VHost != "" {
				l.byName = map[string]*site{}
				if spec.Address != "" {
					shared[label] = l
				}
			}
		}
		host := l.addr
		if spec.VHost != "" {
			host = net.JoinHostPort(spec.VHost, l.port)
		}
		r := siteRules(&s.profile, spec)
		st := &site{srv: s, index: i, spec: spec, rules: r, robots: robotsBody(&s.profile, spec),
			host: host, url: "http://" + host, l: l, rec: newRecorder(r.cap, s.start), retried: map[int]bool{}}
		l.sites = append(l.sites, st)
		if l.byName != nil {
			l.byName[spec.VHost] = st
		}
		a.sites = append(a.sites, st)
		s.sites = append(s.sites, st)
		s.dialTo[host] = l.addr
	}
	for _, l := range s.listeners {
		l.hs = &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
			ConnState: l.connState}
		if l.byName != nil {
			l.hs.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
				return context.WithValue(ctx, connKey{}, new(atomic.Bool))
			}
		}
	}
	return nil
}

// listen opens the next listener, for site i, on ip: on the port the
// system chooses, or with WithBasePort on base + the listeners opened so
// far, so that a profile's sites get the same ports every run.
func (s *Server) listen(i int, ip string) (net.Listener, error) {
	port := 0
	if s.opts.basePort > 0 {
		if port = s.opts.basePort + len(s.listeners); port > 65535 {
			return nil, fmt.Errorf("testserver: site %d needs port %d, past 65535 (%d listeners from base port %d)",
				i, port, len(s.listeners)+1, s.opts.basePort)
		}
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("testserver: site %d: %s is in use by another process: %w", i, addr, err)
	case err != nil:
		return nil, fmt.Errorf("testserver: site %d: %w", i, err)
	}
	return ln, nil
}

func (l *listener) connState(_ net.Conn, cs http.ConnState) {
	if cs != http.StateNew {
		return
	}
	l.own.connected()
	l.ip.g.connected()
	if l.byName == nil {
		l.sites[0].rec.connected()
	}
}

// route finds the site a request's Host names: the listener's only site
// when it has no VHost; else the site whose VHost matches (any case, a
// trailing dot allowed) with the listener's port or none. nil: misdirected.
func (l *listener) route(hostport string) *site {
	if l.byName == nil {
		return l.sites[0]
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	if port != "" && port != l.port {
		return nil
	}
	return l.byName[strings.TrimSuffix(strings.ToLower(host), ".")]
}

// ServeHTTP counts the request at the listener and its IP, then hands it
// to its site, or answers 421 when its Host names none here.
func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.own.begin()
	l.ip.g.begin()
	st := l.route(r.Host)
	if st == nil {
		http.Error(w, fmt.Sprintf("421 misdirected request: %s serves no site named %q", l.addr, r.Host), http.StatusMisdirectedRequest)
		l.own.end(true)
		l.ip.g.end(true)
		return
	}
	if seen, ok := r.Context().Value(connKey{}).(*atomic.Bool); ok && !seen.Swap(true) {
		st.rec.connected()
	}
	st.serve(w, r, func() {
		l.own.end(false)
		l.ip.g.end(false)
	})
}

// Resolve says how a client reaches the site by name, as curl's --resolve
// has it: "vhost:port:ip"; "" when the site's URL names its IP.
func (s Site) Resolve() string {
	if s.Spec.VHost == "" {
		return ""
	}
	ip, port, _ := net.SplitHostPort(s.Addr)
	if strings.Contains(ip, ":") {
		ip = "[" + ip + "]"
	}
	return s.Spec.VHost + ":" + port + ":" + ip
}

// Resolve lists Site.Resolve of every site that has a VHost, in profile
// order: what a crawler needs (--resolve each) to reach them all.
func (s *Server) Resolve() []string {
	var out []string
	for _, st := range s.Sites() {
		if r := st.Resolve(); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// DialContext dials the listener of the site whose Host (host:port) addr
// is, and addr itself otherwise: as an http.Transport's DialContext it lets
// a client reach sites by their VHost names. Use it after Start.
func (s *Server) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if to, ok := s.dialTo[addr]; ok {
		addr = to
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
