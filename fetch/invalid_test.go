package fetch

import (
	"context"
	"errors"
	"net"
	"testing"
)

// Names under "invalid" get "no such host" without a DNS query (RFC 6761
// §6.4); no other name is touched.
func TestInvalidNamesAreNotLookedUp(t *testing.T) {
	for host, want := range map[string]bool{
		"nonexistent.invalid": true, "a.b.INVALID.": true, "invalid": true,
		"notinvalid": false, "invalid.example": false, "example.com": false, "127.0.0.1": false,
	} {
		err := Invalid(host)
		var dns *net.DNSError
		if got := errors.As(err, &dns) && dns.IsNotFound; got != want {
			t.Errorf("Invalid(%q) = %v, want not found %v", host, err, want)
		}
	}
	r, err := NewResolver(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(context.Background(), "nonexistent.invalid", "80")
	var dns *net.DNSError
	if !errors.As(err, &dns) || !dns.IsNotFound {
		t.Fatalf("Resolve(nonexistent.invalid): %v, want no such host", err)
	}
}
