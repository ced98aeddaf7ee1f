package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

// Redis behind a password, an ACL user confined to the key prefix, and TLS
// with a private CA: a fleet crawls through each, politely and completely.
// Wrong credentials, a prefix outside the user's keys (or only part of it)
// and an untrusted certificate each fail at once, saying what to fix.
func TestSecuredRedis(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func() (*redistest.Server, error)
		good  func(s *redistest.Server) []string
		bad   []badRun
	}{
		{
			name:  "password",
			start: func() (*redistest.Server, error) { return redistest.Start("--requirepass", "s3cret") },
			good:  func(s *redistest.Server) []string { return []string{"--redis", "redis://:s3cret@" + s.Addr} },
			bad: []badRun{
				{func(s *redistest.Server) []string { return []string{"--redis", "redis://:nope@" + s.Addr} }, 1, "refused the credentials"},
				{func(s *redistest.Server) []string { return []string{"--redis", "redis://" + s.Addr} }, 1, "refused the credentials"},
			},
		},
		{
			name: "acl user",
			start: func() (*redistest.Server, error) {
				return redistest.Start("--user", "crawler", "on", ">pw", "~acl:*", "&acl:*", "+@all", "-@dangerous", "+info",
					// the crawl's frontier keys only, not the sites' permits nor robots.txt
					"--user", "frontier", "on", ">pw", "~acl:crawls", "~acl:{crawl:*", "~acl:{s*", "&acl:*", "+@all", "-@dangerous", "+info",
					"--user", "default", "off")
			},
			good: func(s *redistest.Server) []string {
				return []string{"--redis", "redis://crawler:pw@" + s.Addr, "--prefix", "acl"}
			},
			bad: []badRun{
				{func(s *redistest.Server) []string {
					return []string{"--redis", "redis://crawler:pw@" + s.Addr, "--prefix", "other"}
				}, 1, "may not use keys under --prefix other"},
				{func(s *redistest.Server) []string { return []string{"--redis", "redis://crawler:wrong@" + s.Addr} }, 1, "refused the credentials"},
				{func(s *redistest.Server) []string { // seeds, then finds the permits refused
					return []string{"--redis", "redis://frontier:pw@" + s.Addr, "--prefix", "acl", "--crawl", "refused"}
				}, 1, "may not use keys under --prefix acl"},
			},
		},
		{
			name:  "tls",
			start: func() (*redistest.Server, error) { return redistest.StartTLS() },
			good: func(s *redistest.Server) []string {
				return []string{"--redis", "rediss://" + s.Addr, "--redis-ca", s.CAFile}
			},
			bad: []badRun{
				{func(s *redistest.Server) []string { return []string{"--redis", "rediss://" + s.Addr} }, 1, "TLS certificate this host does not trust"},
				{func(s *redistest.Server) []string {
					return []string{"--redis", "redis://" + s.Addr, "--redis-ca", s.CAFile}
				}, 2, "--redis-ca: only with a rediss://"},
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs, err := c.start()
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			ts, seeds := startSites(t, "uniform", 3)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// fleet's own --redis comes first; the later one wins.
			waitAll(t, fleet(t, ctx, 2, "127.0.0.1:1", seeds, append(c.good(rs), "--workers", "4", "--lease", "2s")...))
			checkPolite(t, ts)
			checkAllFetched(t, ts)
			for _, b := range c.bad {
				b.check(t, ctx, rs, seeds[0])
			}
		})
	}
}

// badRun is a crawler run that must fail at once with code and a message
// containing want.
type badRun struct {
	args func(s *redistest.Server) []string
	code int
	want string
}

func (b badRun) check(t *testing.T, ctx context.Context, s *redistest.Server, seed string) {
	t.Helper()
	args := append(append([]string{"run", "--progress", "1h"}, b.args(s)...), seed)
	cmd := exec.CommandContext(ctx, build(t), args...)
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != b.code || !strings.Contains(string(out), b.want) || strings.Contains(string(out), "retrying") {
		t.Errorf("crawler %v: exit %d, want %d at once with %q; output:\n%s", args[1:], code, b.code, b.want, out)
	}
}
