package frontier

import "testing"

// Encoded dot segments and unreserved escapes name the same resource as
// their plain forms, so they de-duplicate to one URL; reserved escapes are
// data and stay.
func TestNormalizeCanonicalPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://a.example/%2E/private/x", "http://a.example/private/x"},
		{"http://a.example/a/%2E%2E/private/x", "http://a.example/private/x"},
		{"http://a.example/a/%2e%2e/private/x?q=1", "http://a.example/private/x?q=1"},
		{"http://a.example/%7Ea", "http://a.example/~a"},
		{"http://a.example/~a", "http://a.example/~a"},
		{"http://a.example/%7ea/%41", "http://a.example/~a/A"},
		{"http://a.example/a%2Fb", "http://a.example/a%2Fb"},
		{"http://a.example/a%2f..%2fb", "http://a.example/a%2F..%2Fb"},
		{"http://a.example/a%3Fb?c=%3F", "http://a.example/a%3Fb?c=%3F"},
		{"http://a.example/a%20b/%C3%A4", "http://a.example/a%20b/%C3%A4"},
		{"http://a.example/a/b/..", "http://a.example/a/"},
		{"http://a.example/..", "http://a.example/"},
		{"http://a.example?x", "http://a.example/?x"},
		{"http://a.example/x?/../y", "http://a.example/x?/../y"},
	} {
		got, _, err := Normalize(c.in)
		if err != nil || got != c.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
