package robots

import "strings"

// normalize brings a path or pattern to one form so that equal URLs compare
// equal (RFC 9309 2.2.2, RFC 3986 6.2.2): percent-escapes of unreserved
// characters are decoded, other escapes get upper-case hex, and bytes outside
// printable US-ASCII are escaped. '*' and '$' are left alone.
func normalize(s string) string {
	if !needsNormalizing(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteByte(upperHex[v>>4])
				b.WriteByte(upperHex[v&15])
			}
			i += 2
		case c <= ' ' || c >= 0x7f:
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

const upperHex = "0123456789ABCDEF"

func needsNormalizing(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '%' || c <= ' ' || c >= 0x7f {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

func isUnreserved(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// match reports whether pattern matches the start of path: '*' matches any
// run of characters, and a final '$' anchors the end. Greedy with one
// backtrack point per '*', so it runs in O(len(pattern) × len(path)) at worst.
func match(pattern, path string) bool {
	anchored := strings.HasSuffix(pattern, "$")
	if anchored {
		pattern = pattern[:len(pattern)-1]
	}
	if !strings.Contains(pattern, "*") {
		if anchored {
			return path == pattern
		}
		return strings.HasPrefix(path, pattern)
	}
	p, s := 0, 0
	star, mark := -1, 0
	for s < len(path) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, s
			p++
		case p < len(pattern) && pattern[p] == path[s]:
			p++
			s++
		case p == len(pattern) && !anchored:
			return true // the pattern matched a prefix
		case star >= 0:
			p = star + 1
			mark++
			s = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
