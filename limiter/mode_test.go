package limiter

import (
	"errors"
	"testing"
)

// TestParseMode: ParseMode reads every name String writes, and rejects the
// rest with ErrMode.
func TestParseMode(t *testing.T) {
	for _, m := range []Mode{ModeLocked, ModeAtomic} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for _, name := range []string{"", "unknown", "Locked", "atomic "} {
		if _, err := ParseMode(name); !errors.Is(err, ErrMode) {
			t.Errorf("ParseMode(%q) = %v; want ErrMode", name, err)
		}
	}
}
