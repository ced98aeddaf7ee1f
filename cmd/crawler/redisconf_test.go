package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/testserver"
)

// A Redis that may evict keys is named at start: `crawler run` warns and
// crawls, or with --strict exits 1 without crawling, saying which setting is
// safe and why; with maxmemory-policy noeviction it says nothing of it.
func TestEvictingRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rdb := rs.Client()
	defer rdb.Close()
	for _, c := range []struct {
		policy string
		strict bool
	}{
		{"allkeys-lru", false},
		{"volatile-lru", false},
		{"volatile-ttl", true},
		{"allkeys-lru", true},
		{"noeviction", false},
		{"noeviction", true},
	} {
		name := c.policy
		if c.strict {
			name += "/strict"
		}
		t.Run(name, func(t *testing.T) {
			if err := rdb.ConfigSet(ctx, "maxmemory-policy", c.policy).Err(); err != nil {
				t.Fatal(err)
			}
			ts, seeds := serveSites(t, testserver.Profile{Name: "evict", Seed: 1, Sites: []testserver.SiteSpec{{Pages: 3, Links: 2}}})
			args := []string{"--lease", "1s"}
			if c.strict {
				args = append(args, "--strict")
			}
			cmd := worker(t, ctx, build(t), nil, rs.Addr, seeds, args...)
			err := cmd.Wait()
			log := cmd.Stderr.(*strings.Builder).String()
			_, requests := totals(ts)
			evicting := c.policy != "noeviction"
			switch {
			case evicting && c.strict:
				if code := exitCode(err); code != 1 || requests != 0 {
					t.Errorf("--strict on %s: exit %d, %d requests to the site; want exit 1 and none", c.policy, code, requests)
				}
				for _, want := range []string{"--strict: Redis at " + rs.Addr + " has maxmemory-policy " + c.policy, "set maxmemory-policy noeviction", "has a TTL"} {
					if !strings.Contains(log, want) {
						t.Errorf("--strict on %s: no %q in its output:\n%s", c.policy, want, log)
					}
				}
			case evicting:
				if err != nil || requests == 0 {
					t.Errorf("on %s: %v, %d requests; want the crawl done", c.policy, err, requests)
				}
				for _, want := range []string{`"msg":"Redis may evict permits: maxmemory-policy ` + c.policy + `"`, `"safe":"maxmemory-policy noeviction"`, "has a TTL"} {
					if !strings.Contains(log, want) {
						t.Errorf("on %s: no %q in its log:\n%s", c.policy, want, log)
					}
				}
			default:
				if err != nil || requests == 0 || strings.Contains(log, "maxmemory") {
					t.Errorf("on noeviction (strict %v): %v, %d requests; want the crawl done and nothing said of maxmemory:\n%s", c.strict, err, requests, log)
				}
			}
		})
	}
}

// A Redis user that may not run INFO leaves the policy unknown: `crawler
// run` says so and crawls, or with --strict exits 1 saying what to grant.
func TestEvictionPolicyUnreadable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rdb := rs.Client()
	defer rdb.Close()
	if err := rdb.Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	for _, strict := range []bool{false, true} {
		ts, seeds := serveSites(t, testserver.Profile{Name: "noinfo", Seed: 1, Sites: []testserver.SiteSpec{{Pages: 3, Links: 2}}})
		args := []string{"--lease", "1s", "--crawl", fmt.Sprintf("noinfo-%v", strict)}
		if strict {
			args = append(args, "--strict")
		}
		cmd := worker(t, ctx, build(t), nil, "noinfo:pw@"+rs.Addr, seeds, args...)
		err := cmd.Wait()
		log := cmd.Stderr.(*strings.Builder).String()
		_, requests := totals(ts)
		if strict && (exitCode(err) != 1 || requests != 0 || !strings.Contains(log, "--strict: cannot read the maxmemory-policy") || !strings.Contains(log, "run INFO")) {
			t.Errorf("--strict without INFO: exit %d, %d requests; want exit 1, none, and why:\n%s", exitCode(err), requests, log)
		}
		if !strict && (err != nil || requests == 0 || !strings.Contains(log, `"msg":"cannot read Redis's maxmemory-policy`)) {
			t.Errorf("without INFO: %v, %d requests; want the crawl done and a warning:\n%s", err, requests, log)
		}
	}
}

// exitCode is a finished process's exit code (0 for a nil error).
func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
