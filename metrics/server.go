package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrAddrInUse is returned (wrapped, naming the address) by Listen when
// another process listens on the address already.
var ErrAddrInUse = errors.New("metrics: address in use")

// Server serves a Metrics' /metrics on a listener of its own, from Listen
// until Close.
type Server struct {
	ln    net.Listener
	hs    *http.Server
	done  chan struct{} // closed when the serving goroutine ends
	err   error         // the serving goroutine's error, read after done
	once  sync.Once
	close error
}

// Listen binds addr and serves /metrics there, in a goroutine of its own,
// until Close. Binding is done before Listen returns, so a command that
// listens first fails before it does anything else: a port already taken
// is an error that names addr and matches ErrAddrInUse.
func (m *Metrics) Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%w: %s is taken by another process (%w)", ErrAddrInUse, addr, err)
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	s := &Server{ln: ln, hs: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() { // owned by s: ends at Close
		defer close(s.done)
		if err := s.hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = fmt.Errorf("metrics: serve on %s: %w", addr, err)
		}
	}()
	return s, nil
}

// Addr is the address served (with the port the system chose for ":0").
func (s *Server) Addr() string {
	if s == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Linger keeps s serving for d, or until ctx is done if sooner, so that a
// last scrape can read the final figures. A nil s returns at once.
func (s *Server) Linger(ctx context.Context, d time.Duration) {
	if s == nil || d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Close stops serving: scrapes under way get up to 2 s to finish. It
// returns the serving goroutine's error, if it failed, and is safe to call
// again and on a nil Server.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.hs.Shutdown(ctx); err != nil {
			s.hs.Close()
		}
		<-s.done
		s.close = s.err
	})
	return s.close
}
