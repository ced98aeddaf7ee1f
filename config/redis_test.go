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

// TestKeyPermHint: a NOPERM answer, wrapped or not, gets the --prefix hint;
// other errors, and a NOPERM that is only text, get none.
func TestKeyPermHint(t *testing.T) {
	c := &Config{Prefix: "other"}
	noperm := redisErr("NOPERM No permissions to access a key")
	want := "the Redis user may not use keys under --prefix other"
	for _, err := range []error{noperm, fmt.Errorf("crawl: seeded, but: %w", noperm)} {
		if got := c.KeyPermHint(err); got != want {
			t.Errorf("KeyPermHint(%v) = %q, want %q", err, got, want)
		}
	}
	for _, err := range []error{nil, redisErr("ERR wrong number of arguments"), errors.New("NOPERM as plain text")} {
		if got := c.KeyPermHint(err); got != "" {
			t.Errorf("KeyPermHint(%v) = %q, want none", err, got)
		}
	}
}
