package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStartAndClose(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	c := s.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(s.Addr); host != "127.0.0.1" {
		t.Fatalf("server listens on %s, want loopback", s.Addr)
	}
	s.Close()
	s.Close() // idempotent
	if _, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		t.Fatal("server still accepts connections after Close")
	}
}

// ClientAs logs in as a user with all commands but those its rules take
// away.
func TestClientAs(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := s.ClientAs(ctx, "noping", "-ping")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if who, err := c.Do(ctx, "ACL", "WHOAMI").Text(); err != nil || who != "noping" {
		t.Fatalf("ACL WHOAMI: %q, %v", who, err)
	}
	if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("PING as a user without it: %v, want NOPERM", err)
	}
}

func TestTwoServersAreSeparate(t *testing.T) {
	a, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Addr == b.Addr {
		t.Fatalf("both servers on %s", a.Addr)
	}
}

func TestMissingBinarySaysHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start()
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Start without redis-server: %v", err)
	}
}

// A TLS server answers only over TLS, to a client that trusts its CA.
func TestStartTLS(t *testing.T) {
	s, err := StartTLS()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c := s.Client()
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	if _, err := os.Stat(s.CAFile); err != nil {
		t.Fatal(err)
	}
	plain := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("a plain client was answered by a TLS-only server")
	}
	untrusting := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, TLSConfig: &tls.Config{}})
	defer untrusting.Close()
	if err := untrusting.Ping(ctx).Err(); err == nil {
		t.Fatal("a client that does not trust the CA got through")
	}
}

// Restart is a crash and a restart: same address, no data.
func TestRestart(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c := s.Client()
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("after a restart: exists %d, %v; want an empty server answering", n, err)
	}
}

// A StartAOF server restarted after a crash has what it had written (with
// appendfsync always, every write), and counts its uptime from the restart.
func TestRestartAOF(t *testing.T) {
	s, err := StartAOF("always")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c := s.Client()
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after a restart from the AOF: %q, %v; want the key back", v, err)
	}
	if aof, err := c.ConfigGet(ctx, "appendonly").Result(); err != nil || aof["appendonly"] != "yes" {
		t.Fatalf("appendonly %v, %v", aof, err)
	}
}

// WaitUptime returns once the server has been up that long, and not before.
func TestWaitUptime(t *testing.T) {
	began := time.Now() // the server is younger than this: it starts below
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitUptime(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	// INFO counts whole seconds of the wall clock, up to 1 s ahead.
	if waited := time.Since(began); waited < time.Second {
		t.Fatalf("returned after %s; want the server at least 1 s old", waited)
	}
}

// proxied starts a server and a proxy in front of it, both closed when the
// test ends.
func proxied(t *testing.T) *Proxy {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	p, err := NewProxy(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// A cut proxy passes nothing, in either direction, until it heals; then the
// same client works again.
func TestProxyCutAndHeal(t *testing.T) {
	p := proxied(t)
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, ReadTimeout: 200 * time.Millisecond, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	err := c.Get(ctx, "k").Err()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("through a cut proxy: %v, want a timeout", err)
	}
	p.Heal()
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after healing: %q, %v", v, err)
	}
	p.Close()
	if err := c.Get(ctx, "k").Err(); err == nil {
		t.Fatal("a closed proxy still passes traffic")
	}
}

// A stranded connection passes nothing, ever, and stays open; a new one
// works.
func TestProxyStrand(t *testing.T) {
	p := proxied(t)
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	defer c.Close()
	ctx := context.Background()
	stuck := c.Conn()
	defer stuck.Close()
	if err := stuck.Ping(ctx).Err(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Strand()
	err := stuck.Ping(ctx).Err()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("on a stranded connection: %v, want a timeout", err)
	}
	fresh := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	defer fresh.Close()
	if err := fresh.Ping(ctx).Err(); err != nil {
		t.Fatalf("a new connection after Strand: %v", err)
	}
}

// A 3-master cluster forms, and keys in different slots land on different
// nodes, reachable through a cluster client.
func TestStartCluster(t *testing.T) {
	c, err := StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	cc := c.Client()
	defer cc.Close()
	owners := map[string]bool{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if err := cc.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		node, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		owners[node.Options().Addr] = true
	}
	if len(owners) != 3 {
		t.Fatalf("8 keys landed on %d nodes, want all 3: %v", len(owners), owners)
	}
}
