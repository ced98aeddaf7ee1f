package keyname

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{"polite", "news-2026", "a:b", "127.0.0.1:8080", "[::1]:80", "xn--bcher-kva.example", "bücher"} {
		if err := Check("prefix", ok); err != nil {
			t.Errorf("Check(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "{}", "a{}", "a}", "{a", "a b", "a\nb", "a\tb", "a\x00b", "a\x7fb", "\xff", "a\u2028b", strings.Repeat("a", MaxLen+1)} {
		err := Check("prefix", bad)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrInvalid", bad, err)
		}
		if err != nil && !strings.Contains(err.Error(), "prefix") {
			t.Errorf("Check(%q) = %v: does not name what was checked", bad, err)
		}
	}
}
