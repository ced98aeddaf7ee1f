package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The scope options come from flags (repeatable), the file (lists) and the
// environment (space-separated) like --resolve; ScopeRules gives the
// domains in the form the crawl stores them, and Validate names the flag
// of each bad value: a URL or garbage as a domain, a subdomain under
// --site-key domain, a negative hop count, a regular expression RE2
// rejects.
func TestScopeOptions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "crawler.yaml")
	os.WriteFile(file, []byte("allow_domain: [file.example]\nexclude: ['\\?sort=']\n"), 0o644)
	c := Default()
	if err := c.LoadFile(file); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c.Bind(fs)
	if err := fs.Parse([]string{"--allow-domain", "B.Example.", "--allow-domain", "a.example:8080", "--follow-external", "2", "--include", "/docs/", "--include", "/blog/"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := c.ScopeRules()
	if got := strings.Join(r.AllowDomains, " "); got != "a.example:8080 b.example" || r.FollowExternal != 2 ||
		strings.Join(r.Include, " ") != "/blog/ /docs/" || strings.Join(r.Exclude, " ") != `\?sort=` {
		t.Errorf("ScopeRules() = %+v", r)
	}
	c = Default()
	if err := c.ApplyEnv(func(k string) string { return map[string]string{"CRAWLER_ALLOW_DOMAIN": "x.example y.example"}[k] }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.ScopeRules().AllowDomains, " "); got != "x.example y.example" {
		t.Errorf("from the environment: %q", got)
	}

	c = Default()
	c.AllowDomain, c.FollowExternal, c.Include, c.Exclude = Repeated{"https://x.example/", "a b"}, -1, Repeated{"("}, Repeated{"ok", "[z-a]"}
	err := c.Validate()
	for _, want := range []string{`--allow-domain: frontier: not a domain: "https://x.example/" is a URL`, `--allow-domain: frontier: not a domain: "a b"`,
		"--follow-external: -1", `--include: "("`, `--exclude: "[z-a]"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to say %q", err, want)
		}
	}
	c = Default()
	c.SiteKey, c.AllowDomain = "domain", Repeated{"www.example.co.uk"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "give example.co.uk") {
		t.Errorf("a subdomain with --site-key domain: %v; want the registered domain named", err)
	}
}
