// Package keyname checks the names that go into Redis keys: key prefixes,
// crawl names and site names. Every package that builds keys from a caller's
// name checks it here, so one rule holds everywhere.
//
// A name must be non-empty, at most MaxLen bytes, and free of '{', '}',
// whitespace and control characters. Braces would change a key's Redis
// Cluster hash tag (an empty tag "{}" spreads one site's keys over many
// slots: CROSSSLOT); whitespace and control characters break line-based
// output such as `crawler status`.
package keyname

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxLen is the longest name accepted, in bytes.
const MaxLen = 1024

// ErrInvalid is wrapped by every error Check returns.
var ErrInvalid = errors.New("keyname: invalid name")

// Check returns nil when name may be used in a Redis key, or an error
// wrapping ErrInvalid that says why, naming what (e.g. "prefix").
func Check(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	}
	if len(name) > MaxLen {
		return fmt.Errorf("%w: %s is %d bytes long (at most %d)", ErrInvalid, what, len(name), MaxLen)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalid, what, name)
	}
	for _, r := range name {
		switch {
		case r == '{' || r == '}':
			return fmt.Errorf("%w: %s %q contains a brace (it would change the Redis Cluster hash tag)", ErrInvalid, what, name)
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Errorf("%w: %s %q contains whitespace or a control character", ErrInvalid, what, name)
		}
	}
	return nil
}
