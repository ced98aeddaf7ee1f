package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// interrupted fails t unless err is the exit of a process a SIGINT stopped
// (exit code 130).
func interrupted(t *testing.T, err error, what string, log fmt.Stringer) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("%s: %v, want exit %d\n%s", what, err, exitInterrupted, log)
	}
}

// lines is a process's stderr as it comes, one line at a time.
type lines struct {
	mu  sync.Mutex
	b   strings.Builder
	new chan struct{} // a line came
	eof chan struct{} // closed when the process's stderr ended and every line is in b
}

// wait waits for cmd, a process startRun started, once its stderr is read
// to the end: Wait closes the pipe, and a line still in it would be lost
// (a process that logs and exits at once, as on a second Ctrl-C).
func (l *lines) wait(cmd *exec.Cmd) error {
	<-l.eof // the process's exit ends its stderr (the test's ctx kills it at the latest)
	return cmd.Wait()
}

func (l *lines) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// await blocks until the output holds s, or fails t after a minute.
func (l *lines) await(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !strings.Contains(l.String(), s) {
		select {
		case <-l.new:
		case <-deadline:
			t.Fatalf("no %q in a minute:\n%s", s, l)
		}
	}
}

// startRun starts `crawler run` on site's "/" and reads its stderr.
func startRun(t *testing.T, ctx context.Context, redisAddr, site string, extra ...string) (*exec.Cmd, *lines) {
	t.Helper()
	args := append([]string{"run", "--redis", "redis://" + redisAddr, "--crawl", t.Name(), "--progress", "1h", "--lease", "1s"}, extra...)
	cmd := exec.CommandContext(ctx, build(t), append(args, site+"/")...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &lines{new: make(chan struct{}, 1), eof: make(chan struct{})}
	sc := bufio.NewScanner(pipe)
	for sc.Scan() && !strings.Contains(sc.Text(), "crawl started") {
		l.b.WriteString(sc.Text() + "\n")
	}
	go func() { // ends with the process's stderr
		defer close(l.eof)
		for sc.Scan() {
			l.mu.Lock()
			l.b.WriteString(sc.Text() + "\n")
			l.mu.Unlock()
			select {
			case l.new <- struct{}{}:
			default:
			}
		}
	}()
	return cmd, l
}

// slowSite serves pages that take hold to answer (or until the request is
// cut), each linking to the next; started and finished count the pages.
func slowSite(t *testing.T, hold time.Duration) (url string, started, finished *atomic.Int64, requested chan struct{}) {
	started, finished, requested = new(atomic.Int64), new(atomic.Int64), make(chan struct{}, 100)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" || r.URL.Path == "/sitemap.xml" {
			http.NotFound(w, r)
			return
		}
		n := started.Add(1)
		requested <- struct{}{}
		select {
		case <-time.After(hold):
			finished.Add(1)
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<a href="/p/%d">next</a> <a href="/q/%d">other</a>`, n, n)
	}))
	t.Cleanup(site.Close)
	return site.URL, started, finished, requested
}

// The first SIGINT stops a crawl gracefully: no new requests, the one under
// way finishes within --stop-grace, a line tells how to quit at once, and
// the exit code is 130, not 0.
func TestInterruptStopsGracefully(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, started, finished, requested := slowSite(t, 2*time.Second)
	cmd, log := startRun(t, ctx, rs.Addr, url, "--workers", "1", "--stop-grace", "1m")
	<-requested
	cmd.Process.Signal(syscall.SIGINT)
	log.await(t, stopHint)
	interrupted(t, log.wait(cmd), "crawl after one SIGINT", log)
	if s, f := started.Load(), finished.Load(); s != 1 || f != 1 {
		t.Fatalf("%d pages started, %d finished; want the one under way finished and no other\n%s", s, f, log)
	}
}

// A second SIGINT quits at once, with the download under way still
// waiting out a long --stop-grace.
func TestSecondInterruptQuitsAtOnce(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, _, finished, requested := slowSite(t, 10*time.Minute)
	cmd, log := startRun(t, ctx, rs.Addr, url, "--workers", "1", "--stop-grace", "10m", "--timeout", "15m", "--visibility", "20m")
	<-requested
	cmd.Process.Signal(syscall.SIGINT)
	log.await(t, stopHint)
	cmd.Process.Signal(syscall.SIGINT)
	interrupted(t, log.wait(cmd), "crawl after two SIGINTs", log) // before the test's 2 min limit kills it
	if finished.Load() != 0 || !strings.Contains(log.String(), "quitting at once") {
		t.Fatalf("the download finished, or no word of quitting:\n%s", log)
	}
}

// SIGTERM stops a command as gracefully as a first Ctrl-C, and it exits
// 143: testserver prints its summary first.
func TestTerminateExits143(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, build(t), "testserver", "--sites", "2", "--listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "control ") {
	}
	cmd.Process.Signal(syscall.SIGTERM)
	var rest strings.Builder
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitTerminated || !strings.Contains(rest.String(), "max in flight") {
		t.Fatalf("testserver after SIGTERM: %v, want exit %d after its summary; stdout:\n%s\nstderr:\n%s", err, exitTerminated, rest.String(), stderr.String())
	}
}
