package hostile

import (
	"strings"
	"testing"
)

// The files and paths are what their docs say: the sizes, and no piece of
// a file where the path must not hold it.
func TestShapes(t *testing.T) {
	const size = 500 << 10
	for _, distinct := range []bool{false, true} {
		f, lines := WildcardFile(size, distinct)
		if len(f) > size || len(f) < size-400 || lines < 4000 {
			t.Errorf("WildcardFile(%v): %d bytes, %d lines", distinct, len(f), lines)
		}
	}
	f, lines := ShortPieceFile(size, "")
	if len(f) > size || lines < 30000 {
		t.Errorf("ShortPieceFile: %d bytes, %d lines", len(f), lines)
	}
	pairs := PairsPath(8 << 10)
	for i := 0; i < 1000; i++ {
		if strings.Contains(pairs, letter3(i)) {
			t.Fatalf("PairsPath holds the piece %q", letter3(i))
		}
	}
	marker := MarkerPath(8 << 10)
	at := strings.Index(marker, "Zj")
	if at < 0 || strings.Contains(marker[at:], "aab") || !strings.Contains(marker[:at], "aab") {
		t.Fatalf("MarkerPath: marker at %d; the pieces must come before it only", at)
	}
	if p := CraftedPath(8 << 10); len(p) < 8<<10 || !strings.HasPrefix(p, "/aaaa0/aaaa1/") {
		t.Fatalf("CraftedPath: %d bytes, %q…", len(p), p[:min(len(p), 20)])
	}
}
