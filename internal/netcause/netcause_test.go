package netcause

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Real requests to loopback servers fail for real reasons, and Of names
// each the way a crawl's records do.
func TestOfNamesRealFailures(t *testing.T) {
	closed := func() string { // a port nothing listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr + "/"
	}()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer slow.Close()
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.(*net.TCPConn).SetLinger(0) // close with RST
		conn.Close()
	}))
	defer reset.Close()
	tlsSite := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSite.Close()

	for _, c := range []struct {
		name, url, want string
		timeout         time.Duration
	}{
		{"refused", closed, "connection refused", 0},
		{"timeout", slow.URL, "timeout", 100 * time.Millisecond},
		{"reset", reset.URL, "connection reset", 0},
		{"tls", tlsSite.URL, "tls: failed to verify certificate", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := &http.Client{Timeout: c.timeout, Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := cl.Get(c.url)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("GET %s succeeded", c.url)
			}
			if got := Of(fmt.Errorf("robots: fetch: %w", err)); !strings.HasPrefix(got, c.want) {
				t.Errorf("Of(%v) = %q, want %q", err, got, c.want)
			}
		})
	}
}

func TestOfOthers(t *testing.T) {
	nx := &net.DNSError{Err: "no such host", Name: "nonexistent.invalid", IsNotFound: true}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("fetch: %w", &net.OpError{Op: "dial", Net: "tcp", Err: nx}), "no such host"},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", errors.New("the innermost"))), "the innermost"},
		{errors.New(strings.Repeat("x", 500)), strings.Repeat("x", maxLen)},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
