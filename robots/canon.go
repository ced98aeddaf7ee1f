package robots

import (
	"bytes"
	"strings"
)

// CanonicalPath is the one form of a URL's path (escaped, as
// url.URL.EscapedPath gives it), optionally followed by '?' and the query,
// that robots rules are matched against and a crawl de-duplicates on:
// percent-escapes of unreserved characters are decoded ("%7E" → "~",
// "%2E" → "."), other escapes get upper-case hex, bytes outside printable
// US-ASCII are escaped, and then the dot segments of the path part (not the
// query) are removed as RFC 3986 5.2.4 says, so "/a/%2E%2E/private/x" is
// "/private/x", the path a server resolves it to. Reserved escapes such as
// "%2F" and "%3F" stay escaped: they are data, not separators. The result
// is a fixed point: CanonicalPath(CanonicalPath(s)) == CanonicalPath(s).
func CanonicalPath(s string) string {
	s = normalize(s)
	path, query, hasQuery := strings.Cut(s, "?")
	clean := removeDotSegments(path)
	switch {
	case len(clean) == len(path): // no dot segment (resolving one always shortens)
		return s
	case hasQuery:
		return clean + "?" + query
	}
	return clean
}

// resolvePattern removes the dot segments of a normalised pattern that has
// no '*', as CanonicalPath removes them from the paths it is matched
// against, so "Disallow: /a/./b" or "/a/x/../b" covers "/a/b" (a pattern
// with a dot segment could otherwise match nothing). A segment counts only
// once it is complete, ended by '/', '?' or a final '$': as a prefix,
// "/a/.." also matches "/a/..b", so its last segment stays. A pattern with
// a '*' is left alone: "/a/*/../b" is not a path, and resolving it would
// change what it matches.
func resolvePattern(pat string) string {
	if !strings.HasPrefix(pat, "/") || strings.Contains(pat, "*") {
		return pat
	}
	rest, anchored := strings.CutSuffix(pat, "$")
	path, query, hasQuery := strings.Cut(rest, "?")
	tail := ""
	if !anchored && !hasQuery { // the last segment may go on in the paths it matches
		i := strings.LastIndexByte(path, '/')
		path, tail = path[:i+1], path[i+1:]
	}
	out := removeDotSegments(path) + tail
	if hasQuery {
		out += "?" + query
	}
	if anchored {
		out += "$"
	}
	return out
}

// removeDotSegments is RFC 3986 5.2.4 on a decoded-unreserved path: "." and
// ".." segments are resolved, nothing else changes (unlike path.Clean, "//"
// and a trailing "/" stay). It runs in O(len(p)).
func removeDotSegments(p string) string {
	if !hasDotSegment(p) {
		return p
	}
	out := make([]byte, 0, len(p))
	// pop drops the last segment and its "/" from out. It scans out in
	// place (no copy), and only the bytes it drops, so the whole is linear.
	pop := func() {
		if i := bytes.LastIndexByte(out, '/'); i >= 0 {
			out = out[:i]
		} else {
			out = out[:0]
		}
	}
	in := p
	for in != "" { // every step consumes at least one byte of in
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			pop()
		case in == "/..":
			in = "/"
			pop()
		case in == "." || in == "..":
			in = ""
		default:
			end := strings.IndexByte(in[1:], '/') + 1 // the first segment, with its leading "/"
			if end == 0 {
				end = len(in)
			}
			out = append(out, in[:end]...)
			in = in[end:]
		}
	}
	return string(out)
}

// hasDotSegment reports whether p has a "." or ".." segment.
func hasDotSegment(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '.' || (i > 0 && p[i-1] != '/') {
			continue
		}
		j := i + 1
		if j < len(p) && p[j] == '.' {
			j++
		}
		if j == len(p) || p[j] == '/' {
			return true
		}
	}
	return false
}

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
