package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freePorts returns a port from which n ports are free on every address
// now (each bound on the wildcard address, then let go).
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base, ok := 20000+rand.IntN(40000), true
		var held []net.Listener
		for p := base; p < base+n && ok; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
			if ok = err == nil; ok {
				held = append(held, ln)
			}
		}
		for _, ln := range held {
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no range of free ports found")
	return 0
}

// testserverURLs runs `crawler testserver` with args until it has printed
// its sites and control address, checks that they answer, stops it with
// SIGINT, and returns them (control last).
func testserverURLs(t *testing.T, ctx context.Context, args ...string) []string {
	t.Helper()
	cmd := exec.CommandContext(ctx, build(t), append([]string{"testserver"}, args...)...)
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var urls []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 1 && (f[0] == "site" || f[0] == "control") {
			urls = append(urls, f[1])
			if f[0] == "control" {
				break
			}
		}
	}
	for _, u := range urls {
		resp, err := http.Get(u + "/")
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		resp.Body.Close()
	}
	cmd.Process.Signal(syscall.SIGINT)
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != exitInterrupted {
		t.Fatalf("testserver %v: %v; want exit %d after Ctrl-C; stderr %s", args, err, exitInterrupted, stderr.String())
	}
	return urls
}

// --port N keeps the test server's URLs from run to run: the dashboard on
// N, the sites on N+1, ...; a port in use stops it (exit 1) naming the
// address; --port with --listen is a usage error.
func TestTestserverFixedPorts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := freePorts(t, 4)
	args := []string{"--sites", "3", "--profile", "mixed", "--port", fmt.Sprint(base)}
	first := testserverURLs(t, ctx, args...)
	second := testserverURLs(t, ctx, args...)
	want := []string{fmt.Sprintf("http://127.0.0.2:%d", base+1), fmt.Sprintf("http://127.0.0.3:%d", base+2),
		fmt.Sprintf("http://127.0.0.4:%d", base+3), fmt.Sprintf("http://127.0.0.1:%d", base)}
	if strings.Join(first, " ") != strings.Join(want, " ") || strings.Join(second, " ") != strings.Join(want, " ") {
		t.Fatalf("URLs: first run %v, second %v; want %v both times", first, second, want)
	}

	taken, err := net.Listen("tcp", fmt.Sprintf(":%d", base+2))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, stderr, code := crawler(t, ctx, append([]string{"testserver"}, args...)...)
	if code != 1 || !strings.Contains(stderr, fmt.Sprintf("127.0.0.3:%d is in use", base+2)) {
		t.Errorf("testserver with port %d taken: exit %d, want 1 naming it; stderr:\n%s", base+2, code, stderr)
	}
	_, stderr, code = crawler(t, ctx, "testserver", "--port", fmt.Sprint(base), "--listen", "127.0.0.1:0")
	if code != 2 || !strings.Contains(stderr, "give --listen or --port, not both") {
		t.Errorf("testserver --port --listen: exit %d, want 2; stderr:\n%s", code, stderr)
	}
}
