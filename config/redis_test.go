package config

import (
	"errors"
	"fmt"
	"testing"
)

// redisErr is an error as go-redis returns a server's answer.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestPermHint: a NOPERM answer for a key, wrapped or not, gets the
// --prefix hint; other errors, and a NOPERM that is only text, get none
// (redisacl tells the refusals apart on a real Redis).
func TestPermHint(t *testing.T) {
	c := &Config{Prefix: "other"}
	noperm := redisErr("NOPERM No permissions to access a key")
	want := "the Redis user may not use keys under --prefix other (ACL: ~other:*)"
	for _, err := range []error{noperm, fmt.Errorf("crawl: seeded, but: %w", noperm)} {
		if got := c.PermHint(err); got != want {
			t.Errorf("PermHint(%v) = %q, want %q", err, got, want)
		}
	}
	for _, err := range []error{nil, redisErr("ERR wrong number of arguments"), errors.New("NOPERM as plain text")} {
		if got := c.PermHint(err); got != "" {
			t.Errorf("PermHint(%v) = %q, want none", err, got)
		}
	}
}
