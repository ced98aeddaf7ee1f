package robots

import (
	"net"
	"net/http/httptest"
	"testing"
)

// A robots.txt that cannot be reached closes its site (RFC 9309), and the
// policy says why: the network's cause, read back from Redis by another
// process too; a 5xx says its status.
func TestUnreachableKeepsItsCause(t *testing.T) {
	ctx := ctxT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/"
	l.Close() // nothing listens: connection refused
	c, _ := newCache(t, CacheOptions{})
	p, err := c.Policy(ctx, mustURL(t, refused))
	if err != nil || !p.DisallowAll || !p.Unreachable() {
		t.Fatalf("refused robots.txt: %+v %v", p, err)
	}
	if p.Cause != "connection refused" || p.Why() != "connection refused" {
		t.Fatalf("cause %q, why %q: want connection refused", p.Cause, p.Why())
	}
	other, _ := newCache(t, CacheOptions{}) // another process: from Redis
	if p, err := other.Policy(ctx, mustURL(t, refused)); err != nil || p.Why() != "connection refused" {
		t.Fatalf("read back from Redis: %+v %v", p, err)
	}

	hs := httptest.NewServer(&robotsServer{status: 503})
	defer hs.Close()
	if p, err := c.Policy(ctx, mustURL(t, hs.URL)); err != nil || p.Cause != "" || p.Why() != "status 503" {
		t.Fatalf("503 robots.txt: %+v %v", p, err)
	}
	hs2 := httptest.NewServer(&robotsServer{status: 404})
	defer hs2.Close()
	if p, err := c.Policy(ctx, mustURL(t, hs2.URL)); err != nil || p.Why() != "" {
		t.Fatalf("404 robots.txt: why %q %v", p.Why(), err)
	}
}
