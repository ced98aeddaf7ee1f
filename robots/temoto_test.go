package robots

import (
	"testing"

	"github.com/temoto/robotstxt"
)

// TestCorrectionsOverTemoto runs the same files through
// github.com/temoto/robotstxt and through Parse. Each row is a case where they
// differ and RFC 9309 sides with Parse; if temoto ever changes its answer, the
// row says so, and if Parse does, the RFC is broken.
func TestCorrectionsOverTemoto(t *testing.T) {
	for _, c := range []struct {
		name, file, agent, path string
		temoto                  string // "allow", "disallow" or "error"
		rfc                     bool   // allowed per RFC 9309
	}{
		{"agent matched by prefix", "User-agent: politebot-images\nDisallow: /\n", "politebot-images-extra", "/x", "disallow", true},
		{"whole UA string matched by prefix of a short group", "User-agent: p\nDisallow: /\n", "politebot", "/x", "disallow", true},
		{"Allow does not win a tie", "User-agent: *\nDisallow: /a/\nAllow: /a/\n", "politebot", "/a/x", "disallow", true},
		{"wildcards ranked by regexp length", "User-agent: *\nAllow: /a/b.c\nDisallow: /a/*.c\n", "politebot", "/a/b.c", "disallow", true},
		{"one bad Crawl-delay fails the file", "User-agent: *\nCrawl-delay: fast\nDisallow: /private/\n", "politebot", "/private/x", "error", false},
		{"a rule before any group fails the file", "Disallow: /x/\nUser-agent: *\nDisallow: /private/\n", "politebot", "/private/x", "error", false},
		{"429 allows all", "", "politebot", "/x", "allow", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			status := 200
			if c.name == "429 allows all" {
				status = 429
			}
			got := "error"
			if r, err := robotstxt.FromStatusAndBytes(status, []byte(c.file)); err == nil {
				got = "disallow"
				if r.TestAgent(c.path, c.agent) {
					got = "allow"
				}
			}
			if got != c.temoto {
				t.Errorf("temoto now says %s (was %s): this row may no longer be a correction", got, c.temoto)
			}
			if ours := Parse(status, []byte(c.file), c.agent).Allowed(c.path); ours != c.rfc {
				t.Errorf("Parse says allowed=%v, RFC 9309 says %v", ours, c.rfc)
			}
		})
	}
}
