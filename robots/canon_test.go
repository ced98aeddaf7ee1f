package robots

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCanonicalPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/%2E/private/x", "/private/x"},
		{"/a/%2E%2E/private/x", "/private/x"},
		{"/a/%2e%2E/private/x", "/private/x"},
		{"/a/.%2e/b", "/b"},
		{"/%7Ea", "/~a"},
		{"/a/./b/../c", "/a/c"},
		{"/a/b/..", "/a/"},
		{"/a/b/.", "/a/b/"},
		{"/../a", "/a"},
		{"/..", "/"},
		{"/a//b/../c", "/a//c"},        // "//" is kept: only dot segments go
		{"/a/..b/.c/", "/a/..b/.c/"},   // dots inside a segment are data
		{"/a%2F..%2Fb", "/a%2F..%2Fb"}, // %2F is not a separator
		{"/a/%2f../b", "/a/%2F../b"},
		{"/x?%3F=/../y", "/x?%3F=/../y"}, // the query keeps its dots
		{"/x/../y?q=%7e", "/y?q=~"},
		{"/ä", "/%C3%A4"},
		{"", ""},
	} {
		if got := CanonicalPath(c.in); got != c.want {
			t.Errorf("CanonicalPath(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := CanonicalPath(c.want); got != c.want {
			t.Errorf("CanonicalPath(%q) = %q: not a fixed point", c.want, got)
		}
	}
}

// Servers resolve encoded dot segments, so a Disallow must see through them.
func TestEncodedDotSegmentsAreDisallowed(t *testing.T) {
	p := Parse(200, []byte("User-agent: *\nDisallow: /private/\nDisallow: /*/secret$\n"), "politebot")
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/%2E/private/x", false},
		{"/a/%2E%2E/private/x", false},
		{"/a/%2e%2e/private/x", false},
		{"/./private/x", false},
		{"/a/../private/x", false},
		{"/public/../private/x?y=1", false},
		{"/a/b/%2E%2E/secret", false},
		{"/private%2Fx", true}, // an escaped '/' is not a separator
		{"/a/%2E%2E", true},
		{"/x?/../private/", true}, // the query is not resolved
	} {
		if got := p.Allowed(c.path); got != c.want {
			t.Errorf("Allowed(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}

// Policies stored in Redis before rules were compiled load and match the
// same; a decoded policy comes back compiled.
func TestPolicyJSONCompiles(t *testing.T) {
	old := `{"status":200,"rules":[{"pattern":"/private/open"},{"allow":true,"pattern":"/private/open"},{"pattern":"/*.gif$"},{"pattern":"/private/"}]}`
	var p Policy
	if err := json.Unmarshal([]byte(old), &p); err != nil {
		t.Fatal(err)
	}
	if !p.m.compiledFrom(p.Rules) {
		t.Fatal("a decoded policy is not compiled")
	}
	for path, want := range map[string]bool{"/private/x": false, "/private/open": true, "/a.gif": false, "/a.gif?x": true, "/": true} {
		if got := p.Allowed(path); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", path, got, want)
		}
	}
	raw, err := json.Marshal(p)
	if err != nil || string(raw) != old {
		t.Errorf("re-encoded as %s, %v; want %s", raw, err, old)
	}
	// Rules replaced after decoding are noticed.
	p.Rules = []Rule{{Pattern: "/"}}
	if p.Allowed("/x") {
		t.Error("replaced rules not used")
	}
}

// Identical patterns fold into one, and Allow survives the fold.
func TestDuplicateRulesFold(t *testing.T) {
	file := "User-agent: *\n" + strings.Repeat("Disallow: /*a*b\n", 1000) + "Allow: /*a*b\n" + strings.Repeat("Disallow: /*a*b\n", 1000)
	p := Parse(200, []byte(file), "politebot")
	if n := len(p.m.rules); n != 1 {
		t.Fatalf("%d compiled rules, want 1", n)
	}
	if !p.Allowed("/xaxb") {
		t.Error("the Allow among identical Disallows lost the tie")
	}
}

// Resolving ".." must not copy what was kept so far: a hostile link of
// "/a"×N then "/%2E%2E"×M once took 3.2 s at 512 KiB (each pop copied the
// output to search it). Counting allocations says so without a clock: a
// linear CanonicalPath allocates a handful of buffers whatever N and M are.
func TestCanonicalPathManyDotSegmentsIsLinear(t *testing.T) {
	path := strings.Repeat("/a", 90<<10) + strings.Repeat("/%2E%2E", 50<<10) // 512 KiB
	want := strings.Repeat("/a", 40<<10) + "/"                               // the last ".." leaves its "/"
	if got := CanonicalPath(path); got != want {
		t.Fatalf("CanonicalPath: got %d bytes, want %d", len(got), len(want))
	}
	if n := testing.AllocsPerRun(2, func() { CanonicalPath(path) }); n > 64 {
		t.Errorf("CanonicalPath of a 512 KiB path of dot segments made %v allocations; want a handful", n)
	}
}

// A pattern without '*' has its complete dot segments resolved as paths
// do, so it still covers the path it names; one with '*', or a last
// segment still open, keeps them.
func TestDotSegmentsInPatterns(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		disallowed    bool
	}{
		{"/a/./b", "/a/b/c", true},
		{"/a/x/../b", "/a/b", true},
		{"/a/%2E/b", "/a/b", true},
		{"/a/./b$", "/a/b", true},
		{"/a/./b$", "/a/b/c", false},
		{"/a/..$", "/", true},
		{"/a/./b?q=/../x", "/a/b?q=/../x", true}, // the query keeps its dots
		{"/a/..", "/a/..b", true},                // an open last segment stays
		{"/a/..", "/x", false},
		{"/a/*/../b", "/a/b", false}, // a '*' pattern keeps its dot segments
	} {
		p := Parse(200, []byte("User-agent: *\nDisallow: "+c.pattern+"\n"), "politebot")
		if got := !p.Allowed(c.path); got != c.disallowed {
			t.Errorf("Disallow: %s (rules %+v): %s disallowed = %v, want %v", c.pattern, p.Rules, c.path, got, c.disallowed)
		}
	}
}
