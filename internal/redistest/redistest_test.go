package redistest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
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
