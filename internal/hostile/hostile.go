// Package hostile builds robots.txt files and URL paths made to slow a
// robots.txt matcher down, for the robots package's tests and benchmarks
// and for `crawler bench`. No rule of a file matches its paths, so a
// matcher must try every rule.
package hostile

import (
	"strconv"
	"strings"
)

// letters are the bytes of the short-piece files' pieces.
const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// WildcardFile is a robots.txt of about size bytes of lines "Disallow: /*"
// + 100 'a' + a tail, never matched by a path of 'a's. With distinct, each
// tail is the line's number, so no two rules are the same and merging
// duplicates cannot fold them.
func WildcardFile(size int, distinct bool) (file []byte, lines int) {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	a := strings.Repeat("a", 100)
	for ; b.Len() < size-200; lines++ {
		tail := "b"
		if distinct {
			tail = strconv.Itoa(lines)
		}
		b.WriteString("Disallow: /*" + a + tail + "\n")
	}
	return []byte(b.String()), lines
}

// CraftedPath is a path of n bytes or a little more made of "aaaa<i>/" for
// i = 0, 1, 2, …: it holds every 4-byte window of about a thousand of
// WildcardFile(_, true)'s pieces without holding the pieces.
func CraftedPath(n int) string {
	var b strings.Builder
	b.WriteString("/")
	for i := 0; b.Len() < n; i++ {
		b.WriteString("aaaa" + strconv.Itoa(i) + "/")
	}
	return b.String()
}

// ShortPieceFile is a robots.txt of at most size bytes of "Disallow: /*" +
// before + xyz for every three letters xyz, in order, as many as fit: with
// before "" and 500 KiB, about 32,000 distinct 3-byte pieces.
func ShortPieceFile(size int, before string) (file []byte, lines int) {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	for ; ; lines++ {
		line := "Disallow: /*" + before + letter3(lines) + "\n"
		if b.Len()+len(line) > size {
			return []byte(b.String()), lines
		}
		b.WriteString(line)
	}
}

// letter3 is the i-th three letters, "aaa", "aab", ….
func letter3(i int) string {
	n := len(letters)
	return string([]byte{letters[i/n/n%n], letters[i/n%n], letters[i%n]})
}

// PairsPath is a path of n bytes or a little more, "ab-ac-…": every pair of
// letters and never three letters in a row, so no piece of
// ShortPieceFile(_, "") is in it.
func PairsPath(n int) string {
	var b strings.Builder
	b.WriteString("/")
	for i := 0; b.Len() < n; i++ {
		b.WriteByte(letters[i%len(letters)])
		b.WriteByte(letters[(i/len(letters)+i)%len(letters)])
		b.WriteByte('-')
	}
	return b.String()
}

// MarkerPath is half an n-byte path of ShortPieceFile's pieces run together
// ("aaaaabaac…"), then the marker "Zj", then PairsPath: for the rules
// "/*Zj*xyz" of ShortPieceFile(_, "Zj*") each xyz occurs, but only before
// the marker.
func MarkerPath(n int) string {
	var b strings.Builder
	b.WriteString("/")
	for i := 0; b.Len() < n/2; i++ {
		b.WriteString(letter3(i))
	}
	return strings.ReplaceAll(b.String(), "Zj", "Z-") + "Zj" + PairsPath(n - b.Len() - 2)[1:]
}
