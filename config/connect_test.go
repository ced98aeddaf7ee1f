package config

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// Each wrong Redis setting is named, in a few seconds rather than after
// retrying what cannot go away: TLS to a plain Redis, plain to a TLS one,
// a database the server lacks, an HTTP server, a silent or a closing
// listener, wrong credentials. Only a refused connection is retried (and
// logged) before Connect says it cannot reach Redis.
func TestConnectNamesTheCause(t *testing.T) {
	plain, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	secure, err := redistest.StartTLS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(secure.Close)
	locked, err := redistest.Start("--requirepass", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(locked.Close)
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	silent := listen(t, func(c net.Conn) { time.Sleep(time.Minute); c.Close() })
	closing := listen(t, func(c net.Conn) { c.Close() })
	refused := listen(t, nil) // closed at once: its port refuses

	for _, c := range []struct {
		name, url string
		kind      error
		want      string
		warnings  int
	}{
		{"tls to plain", "rediss://" + plain.Addr, ErrNotTLS, "does not speak TLS (use redis://", 0},
		{"plain to tls", "redis://" + secure.Addr, ErrOnlyTLS, "speaks only TLS (use rediss://", 0},
		{"no database 99", "redis://" + plain.Addr + "/99", ErrNoDatabase, "has no database 99 (it has 16, numbered from 0", 0},
		{"http", "redis://" + strings.TrimPrefix(web.URL, "http://"), ErrNotRedis, "is not a Redis server (it answered like HTTP", 0},
		{"silent", "redis://" + silent, ErrNotRedis, "accepts connections but did not answer PING", 0},
		{"closing", "redis://" + closing, ErrNotRedis, "closed the connection without answering", 0},
		{"wrong password", "redis://:nope@" + locked.Addr, ErrCredentials, "refused the credentials", 0},
		{"refused", "redis://" + refused, ErrUnreachable, "cannot reach Redis at " + refused, connectTries - 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := Default()
			cfg.Redis = c.url
			var log bytes.Buffer
			start := time.Now()
			rdb, err := cfg.Connect(context.Background(), slog.New(slog.NewTextHandler(&log, nil)))
			took := time.Since(start)
			if err == nil {
				rdb.Close()
				t.Fatalf("%s: connected", c.url)
			}
			var cerr *ConnectError
			if !errors.Is(err, c.kind) || !errors.As(err, &cerr) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v; want %v saying %q", c.url, err, c.kind, c.want)
			}
			t.Logf("%s: %v (%s)", c.url, err, took)
			if took > 10*time.Second { // the old connect took 18 s and said "context deadline exceeded"
				t.Errorf("%s: took %s to fail", c.url, took)
			}
			if n := strings.Count(log.String(), "retrying"); n != c.warnings {
				t.Errorf("%s: %d retries logged, want %d:\n%s", c.url, n, c.warnings, log.String())
			}
		})
	}
}

// A Redis that answers is connected to, with what the URL selects.
func TestConnect(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	cfg := Default()
	cfg.Redis = "redis://" + rs.Addr + "/3"
	ctx := context.Background()
	rdb, err := cfg.Connect(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	direct := rs.Client()
	defer direct.Close()
	if err := direct.Do(ctx, "SELECT", 3).Err(); err != nil {
		t.Fatal(err)
	}
	if n := direct.Exists(ctx, "k").Val(); n != 1 {
		t.Errorf("key in database 3: %d", n)
	}
}

// listen serves each connection on a loopback port with serve, until the
// test ends; a nil serve closes the listener at once, so the port refuses.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if serve == nil {
		ln.Close()
		return addr
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return addr
}

// A Redis that is not listening yet when Connect starts (refused) is
// retried, each retry logged, and connected to once it listens.
func TestConnectWaitsForRedisToListen(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	addr := listen(t, nil) // refuses until the forwarder below takes its port
	go func() {
		time.Sleep(700 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return // the port was taken meanwhile: Connect fails, and says so
		}
		t.Cleanup(func() { ln.Close() })
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go forward(c, rs.Addr)
		}
	}()
	cfg := Default()
	cfg.Redis = "redis://" + addr
	var log bytes.Buffer
	rdb, err := cfg.Connect(context.Background(), slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	defer rdb.Close()
	if n := strings.Count(log.String(), "Redis not reachable yet; retrying"); n == 0 {
		t.Errorf("no retry logged:\n%s", log.String())
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// forward copies between c and a new connection to target until either
// side closes.
func forward(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go io.Copy(up, c)
	io.Copy(c, up)
}
