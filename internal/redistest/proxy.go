package redistest

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy on loopback in front of a server, which a test can
// cut off like a network partition: while cut, connections stay open but
// nothing crosses (bytes already read wait for Heal, as TCP would retransmit
// them), and new connections are accepted but reach the server only after
// Heal. The client sees timeouts, not resets. Strand makes the connections
// open at the time go dead for good, while new ones work.
type Proxy struct {
	// Addr is the proxy's host:port on 127.0.0.1.
	Addr string

	target string
	ln     net.Listener
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	mu      sync.Mutex
	open    chan struct{} // closed while traffic flows
	conns   map[net.Conn]struct{}
	strands int // Strand calls: connections made before the last are dead
}

var errProxyClosed = errors.New("redistest: proxy closed")

// NewProxy starts a proxy to target (host:port). The caller must Close it.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redistest: proxy: %w", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, done: make(chan struct{}),
		open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Cut stops all traffic through the proxy until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // already cut
	}
}

// Heal lets traffic through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// Strand makes every connection open now dead for good, as to a host that
// vanished without a word: they stay open, but nothing crosses them again
// (what is sent is read and dropped). Connections made after it work.
func (p *Proxy) Strand() {
	p.mu.Lock()
	p.strands++
	p.mu.Unlock()
}

// stranded reports whether a connection made at strand count at is dead.
func (p *Proxy) stranded(at int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return at < p.strands
}

// Close stops the proxy, drops every connection and waits for its
// goroutines to end. It is safe to call more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		return
	default:
	}
	close(p.done)
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// pass blocks while the proxy is cut; it fails once the proxy is closed.
func (p *Proxy) pass() error {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return nil
	case <-p.done:
		return errProxyClosed
	}
}

// track records c so that Close can drop it; false if the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		c.Close()
		return false
	default:
		p.conns[c] = struct{}{}
		return true
	}
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c to the target once traffic may flow, and copies both
// ways until either side closes.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	if p.pass() != nil {
		return
	}
	p.mu.Lock()
	at := p.strands
	p.mu.Unlock()
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(s) {
		return
	}
	defer p.untrack(s)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.copy(s, c, at); s.Close() }()
	go func() { defer wg.Done(); p.copy(c, s, at); c.Close() }()
	wg.Wait()
}

// copy moves bytes from src to dst, holding each read while the proxy is
// cut, and dropping it once the connection (made at strand count at) is
// stranded.
func (p *Proxy) copy(dst, src net.Conn, at int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.stranded(at) {
			if p.pass() != nil {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
