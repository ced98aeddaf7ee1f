// Package redistest starts a private redis-server for tests.
//
// Each call to Start runs a fresh redis-server bound to 127.0.0.1 on a free
// port, with persistence off, and waits until it answers PING. Close stops that
// process (by its own PID) and removes its directory. If redis-server is not
// installed, Start returns an error that says how to install it: tests must fail
// loudly, never skip.
package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/redisinfo"
)

// ErrNotInstalled reports that no redis-server binary is on PATH.
var ErrNotInstalled = errors.New("redistest: redis-server not found in PATH; install it (Debian/Ubuntu: apt-get update && apt-get install -y redis-server)")

// Server is a running private redis-server.
type Server struct {
	// Addr is host:port of the server, always on 127.0.0.1.
	Addr string
	// Dir is the server's working directory (removed by Close).
	Dir string
	// CAFile is the PEM of the CA that signed a TLS server's certificate
	// (StartTLS); empty for a plain server.
	CAFile string

	tls  *tls.Config // for clients of a TLS server
	bin  string      // redis-server, and the arguments it runs with
	args []string

	cmd       *exec.Cmd
	exited    chan struct{}
	closeOnce sync.Once
}

// Start launches redis-server on a free loopback port with the given extra
// arguments (e.g. "--cluster-enabled", "yes") and waits up to 10 s for it to
// answer PING. The caller must Close it.
func Start(extra ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	return startN(bin, extra, false)
}

// StartAOF is Start with persistence on: an append-only file in Dir,
// fsynced as fsync says ("always", "everysec" or "no"). Restart then brings
// back what the file holds, as a Redis restarted after a crash would.
func StartAOF(fsync string, extra ...string) (*Server, error) {
	return Start(append([]string{"--appendonly", "yes", "--appendfsync", fsync}, extra...)...)
}

// StartTLS is Start for a server that speaks only TLS, with a certificate
// for 127.0.0.1 signed by a CA made for it (Server.CAFile). Client, and the
// wait for PING, trust that CA.
func StartTLS(extra ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	return startN(bin, extra, true)
}

func startN(bin string, extra []string, useTLS bool) (*Server, error) {
	var lastErr error
	// A free port can be taken by someone else between our probe and
	// redis-server's bind; a few attempts make that race harmless.
	for attempt := 0; attempt < 5; attempt++ {
		s, err := start(bin, extra, useTLS)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(bin string, extra []string, useTLS bool) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	listen := []string{"--port", strconv.Itoa(port)}
	var clientTLS *tls.Config
	if useTLS {
		if clientTLS, err = writeCerts(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		listen = []string{"--port", "0", "--tls-port", strconv.Itoa(port), "--tls-cert-file", dir + "/server.pem",
			"--tls-key-file", dir + "/server.key", "--tls-ca-cert-file", dir + "/ca.pem", "--tls-auth-clients", "no"}
	}
	args := append(listen, []string{
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--protected-mode", "no",
		"--loglevel", "warning",
	}...)
	args = append(args, extra...)
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, tls: clientTLS, bin: bin, args: args}
	if useTLS {
		s.CAFile = dir + "/ca.pem"
	}
	if err := s.launch(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.waitReady(10 * time.Second); err != nil {
		log := LogTail(dir + "/redis.log")
		s.Close()
		return nil, fmt.Errorf("redistest: redis-server on port %d did not come up: %w; log: %s", port, err, log)
	}
	return s, nil
}

// launch starts the redis-server process, logging to Dir/redis.log.
func (s *Server) launch() error {
	cmd := exec.Command(s.bin, s.args...)
	stderr, err := os.OpenFile(s.Dir+"/redis.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		stderr.Close()
		return fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited = cmd, exited
	go func() { // owned by s; ends when the process exits (Close or Restart makes it exit)
		cmd.Wait()
		stderr.Close()
		close(exited)
	}()
	return nil
}

// Restart kills the server (SIGKILL: a crash) and starts it again on the
// same address and directory, waiting until it answers: empty, or for a
// StartAOF server with what its append-only file holds. It must not run
// concurrently with Close.
func (s *Server) Restart() error {
	s.cmd.Process.Kill()
	<-s.exited
	if err := s.launch(); err != nil {
		return err
	}
	return s.waitReady(10 * time.Second)
}

func (s *Server) waitReady(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, TLSConfig: s.tls})
	defer c.Close()
	for {
		err := c.Ping(ctx).Err()
		var reply redis.Error
		if err == nil || errors.As(err, &reply) { // a reply, even NOAUTH (--requirepass, ACLs): it is up
			return nil
		}
		select {
		case <-s.exited:
			return errors.New("process exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitUptime waits until the server reports an uptime of at least d (whole
// seconds, as INFO counts them), for at most d plus 10 s. A limiter grants
// nothing on a server younger than its lease + 1 s (its restart guard), so a
// test that wants no such wait waits here once.
func (s *Server) WaitUptime(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d+10*time.Second)
	defer cancel()
	c := s.Client()
	defer c.Close()
	known, err := AwaitUptime(ctx, c, d, nil)
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("redistest: uptime never reached %s: %w", d, err)
	case err != nil:
		return fmt.Errorf("redistest: %w", err)
	case !known:
		return fmt.Errorf("redistest: uptime never reached %s: INFO has no uptime_in_seconds", d)
	}
	return nil
}

// AwaitUptime waits until the Redis of c has been up d (INFO's
// uptime_in_seconds), looking every 100 ms, and calls waiting (if not nil)
// with the uptime it found the first time it has to wait. known is false
// when INFO has no uptime (it returns at once); err is ctx's or Redis's.
func AwaitUptime(ctx context.Context, c *redis.Client, d time.Duration, waiting func(up time.Duration)) (known bool, err error) {
	for {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return false, fmt.Errorf("uptime: %w", err)
		}
		up, ok, err := redisinfo.Uptime(info)
		if err != nil || !ok || up >= d {
			return ok, err
		}
		if waiting != nil {
			waiting(up)
			waiting = nil
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return true, fmt.Errorf("uptime: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// Client returns a new client for the server; the caller closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr, TLSConfig: s.tls})
}

// ClientAs makes user on the server (ACL SETUSER: on, password "pw", all
// keys and channels, all commands, then rules, which may take some away,
// such as "-function") and returns a new client logged in as it; the
// caller closes it.
func (s *Server) ClientAs(ctx context.Context, user string, rules ...any) (*redis.Client, error) {
	admin := s.Client()
	defer admin.Close()
	setuser := append([]any{"ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all"}, rules...)
	if err := admin.Do(ctx, setuser...).Err(); err != nil {
		return nil, fmt.Errorf("redistest: ACL SETUSER %s: %w", user, err)
	}
	return redis.NewClient(&redis.Options{Addr: s.Addr, TLSConfig: s.tls, Username: user, Password: "pw"}), nil
}

// Close stops the server (SIGTERM, then SIGKILL after 5 s) and removes its
// directory. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
		os.RemoveAll(s.Dir)
	})
}

// PID is the redis-server's process ID (it changes with Restart).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Pause stops the server process (SIGSTOP) until Resume: it keeps its
// connections and data but answers nothing, like a host that froze.
func (s *Server) Pause() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: find free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// LogTail is the last 10 lines of a redis-server's log at path, joined by
// " | ", for an error message ("" if it cannot be read).
func LogTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 10 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, " | ")
}
