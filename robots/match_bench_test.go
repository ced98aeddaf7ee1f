package robots

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/hostile"
)

// BenchmarkAllowedHostile times one Allowed call against a hostile
// robots.txt for paths of 'a's of 2, 8 and 64 KiB.
func BenchmarkAllowedHostile(b *testing.B) {
	for _, distinct := range []bool{false, true} {
		p := Parse(200, hostileFile(distinct), "politebot")
		for _, kib := range []int{2, 8, 64} {
			path := "/" + strings.Repeat("a", kib<<10)
			name := fmt.Sprintf("same/%dKiB", kib)
			if distinct {
				name = fmt.Sprintf("distinct/%dKiB", kib)
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					if !p.Allowed(path) {
						b.Fatal("disallowed")
					}
				}
			})
		}
	}
}

// BenchmarkAllowedCrafted is the distinct hostile file with an 8 KiB path
// made of "aaaa<n>/" for n = 0, 1, 2, …: about a thousand pieces have every
// 4-byte window in the path without occurring in it, so a filter on windows
// alone would leave a strings.Index of the whole path for each (13–21 ms
// per check here); the window index finds each by its rarest window.
func BenchmarkAllowedCrafted(b *testing.B) {
	p := Parse(200, hostileFile(true), "politebot")
	path := hostile.CraftedPath(8 << 10)
	for b.Loop() {
		if !p.Allowed(path) {
			b.Fatal("disallowed")
		}
	}
}

// BenchmarkAllowedShortPieces is about 32,000 distinct 3-byte pieces
// ("Disallow: /*xyz") against an 8 KiB path of letter pairs that holds none
// of them, and about 27,000 rules "Disallow: /*Zj*xyz" against a path whose
// pieces all occur before the marker. Before short pieces were indexed,
// each was a strings.Index of the path: 26 and 29 ms per check.
func BenchmarkAllowedShortPieces(b *testing.B) {
	for _, c := range []struct{ name, before, path string }{
		{"xyz", "", hostile.PairsPath(8 << 10)},
		{"Zj-xyz", "Zj*", hostile.MarkerPath(8 << 10)},
	} {
		p := Parse(200, shortPieceFile(c.before), "politebot")
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if !p.Allowed(c.path) {
					b.Fatal("disallowed")
				}
			}
		})
	}
}

// Pieces shorter than a window are found without scanning the path once
// the window index is built: counting the bytes given to strings.Index,
// a check of an 8 KiB path against tens of thousands of 3-byte pieces
// scans a few path lengths (before the index is built), not one per piece.
func TestShortPiecesAreIndexed(t *testing.T) {
	for _, c := range []struct{ name, before, path string }{
		{"xyz", "", hostile.PairsPath(8 << 10)},
		{"Zj-xyz", "Zj*", hostile.MarkerPath(8 << 10)},
	} {
		p := Parse(200, shortPieceFile(c.before), "politebot")
		if !p.Allowed(c.path) {
			t.Fatalf("%s: disallowed", c.name)
		}
		sc := p.m.newScratch(c.path)
		for i := range p.m.rules { // what allowed does, every rule failing
			if r := &p.m.rules[i]; strings.HasPrefix(c.path, r.prefix) && r.wild && p.m.matchPieces(r, c.path, sc) {
				t.Fatalf("%s: rule %d matched", c.name, i)
			}
		}
		if limit := 2 * (indexAfter + 1) * len(c.path); sc.scanned > limit {
			t.Errorf("%s: %d rules scanned %d bytes of a %d-byte path; want at most %d", c.name, len(p.m.rules), sc.scanned, len(c.path), limit)
		}
		sc.path = ""
		scratchPool.Put(sc)
	}
}

// A hostile robots.txt must not make Allowed slow: before rules were
// compiled, one call on an 8 KiB path took 4–14 s here. The bound is loose
// on purpose (a compiled call takes well under a millisecond); the figures
// are BenchmarkAllowedHostile's.
func TestHostileFileIsCheap(t *testing.T) {
	path := "/" + strings.Repeat("a", 8<<10)
	for _, distinct := range []bool{false, true} {
		p := Parse(200, hostileFile(distinct), "politebot")
		start := time.Now()
		for range 10 {
			if !p.Allowed(path) {
				t.Fatal("disallowed")
			}
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("distinct=%v: 10 checks of an 8 KiB path took %v", distinct, d)
		}
	}
}

// BenchmarkAllowedTypical is an ordinary file and URL: what every check
// pays.
func BenchmarkAllowedTypical(b *testing.B) {
	p := Parse(200, []byte("User-agent: *\nDisallow: /private/\nAllow: /private/press/\nDisallow: /*.pdf$\nDisallow: /search?\nDisallow: /*/edit\n"), "politebot")
	for b.Loop() {
		p.Allowed("/blog/2024/05/some-article-title-here?utm_source=feed&page=2")
	}
}

// hostileFile is hostile.WildcardFile at MaxBytes.
func hostileFile(distinct bool) []byte {
	f, _ := hostile.WildcardFile(MaxBytes, distinct)
	return f
}

// shortPieceFile is hostile.ShortPieceFile at MaxBytes.
func shortPieceFile(before string) []byte {
	f, _ := hostile.ShortPieceFile(MaxBytes, before)
	return f
}
