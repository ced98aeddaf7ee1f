package robots

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// HostileFile is a robots.txt of about MaxBytes built to make wildcard
// matching slow: lines "Disallow: /*" + 100 'a' + a tail. With distinct,
// every tail differs (its line number), so deduplication cannot fold them.
func hostileFile(distinct bool) []byte {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	a := strings.Repeat("a", 100)
	for i := 0; b.Len() < MaxBytes-200; i++ {
		tail := "b"
		if distinct {
			tail = strconv.Itoa(i)
		}
		b.WriteString("Disallow: /*" + a + tail + "\n")
	}
	return []byte(b.String())
}

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
	var path strings.Builder
	path.WriteString("/")
	for i := 0; path.Len() < 8<<10; i++ {
		path.WriteString("aaaa" + strconv.Itoa(i) + "/")
	}
	for b.Loop() {
		if !p.Allowed(path.String()) {
			b.Fatal("disallowed")
		}
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
