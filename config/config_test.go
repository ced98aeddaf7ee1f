package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Defaults < file < environment < flags.
func TestPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "crawler.yaml")
	os.WriteFile(file, []byte("workers: 4\nmax_per_site: 2\nlease: 20s\nuser_agent: filebot\nredis_cluster: [\"10.0.0.1:7000\"]\n"), 0o644)
	c := Default()
	if err := c.LoadFile(file); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CRAWLER_WORKERS": "6", "CRAWLER_LEASE": "30s", "CRAWLER_FOREVER": "true"}
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c.Bind(fs)
	if err := fs.Parse([]string{"--workers", "7", "--redis-cluster", "a:1,b:2", "--forever=false"}); err != nil {
		t.Fatal(err)
	}
	if c.Workers != 7 || c.MaxPerSite != 2 || c.Lease != 30*time.Second || c.UserAgent != "filebot" || c.Forever ||
		strings.Join(c.RedisCluster, " ") != "a:1 b:2" || c.MaxAttempts != 3 {
		t.Fatalf("got %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	c := Default()
	c.Redis, c.MaxPerSite, c.Workers, c.Lease, c.Semaphore = "http://x", 0, 0, time.Millisecond, "fast"
	c.MetricsAddr, c.RedisSentinel, c.Prefix, c.Visibility, c.StopGrace = "nope", "nomaster", "a{b}", 10*time.Second, -time.Second
	c.Shards, c.SiteKey, c.MetricsLinger = 0, "ip", -time.Second
	err := c.Validate()
	for _, field := range []string{"--metrics-linger:", "--site-key:", "--redis:", "--max-per-site:", "--workers:", "--lease:", "--semaphore:", "--metrics-addr:", "--redis-sentinel:", "--prefix:", "--visibility:", "--stop-grace:", "--shards:"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("no %s problem in %v", field, err)
		}
	}
}

// --metrics-linger needs --metrics-addr: with nothing served, there is
// nothing to linger for.
func TestMetricsLingerNeedsAnAddress(t *testing.T) {
	c := Default()
	c.MetricsLinger = time.Minute
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--metrics-linger: 1m0s: needs --metrics-addr") {
		t.Fatalf("--metrics-linger without --metrics-addr: %v", err)
	}
	c.MetricsAddr = "127.0.0.1:9090"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestBadInputs(t *testing.T) {
	c := Default()
	if err := c.ApplyEnv(func(k string) string {
		return map[string]string{"CRAWLER_WORKERS": "many", "CRAWLER_LEASE": "10"}[k]
	}); err == nil || !strings.Contains(err.Error(), "CRAWLER_WORKERS") || !strings.Contains(err.Error(), "CRAWLER_LEASE") {
		t.Fatalf("env errors: %v", err)
	}
	file := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(file, []byte("wrokers: 3\n"), 0o644)
	if err := c.LoadFile(file); err == nil || !strings.Contains(err.Error(), "wrokers") {
		t.Fatalf("unknown key: %v", err)
	}
	if err := c.LoadFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("a missing file is an error")
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(empty, nil, 0o644)
	if err := c.LoadFile(empty); err != nil {
		t.Fatalf("an empty file: %v", err)
	}
}

func TestRedisOptions(t *testing.T) {
	c := Default()
	c.Redis = "rediss://crawler:s3cret@redis.internal:6380/2"
	o, err := c.RedisOptions()
	if err != nil || o.Username != "crawler" || o.Password != "s3cret" || o.DB != 2 || o.TLSConfig == nil || o.Addrs[0] != "redis.internal:6380" {
		t.Fatalf("%+v %v", o, err)
	}
	c.RedisSentinel = "mymaster@s1:26379,s2:26379"
	o, _ = c.RedisOptions()
	if o.MasterName != "mymaster" || len(o.Addrs) != 2 || o.Password != "s3cret" {
		t.Fatalf("sentinel %+v", o)
	}
	if got := c.RedisAddrs(); got != "sentinel mymaster@s1:26379,s2:26379" {
		t.Fatal(got)
	}
}

// --redis-ca names a PEM file of CA certificates, and only goes with TLS.
func TestRedisCA(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o644)
	for _, c := range []struct{ url, ca, want string }{
		{"rediss://127.0.0.1:6380", filepath.Join(dir, "missing.pem"), "--redis-ca"},
		{"rediss://127.0.0.1:6380", junk, "holds no PEM certificate"},
		{"redis://127.0.0.1:6379", junk, "only with a rediss://"},
	} {
		cfg := Default()
		cfg.Redis, cfg.RedisCA = c.url, c.ca
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with --redis-ca %s: %v, want %q", c.url, c.ca, err, c.want)
		}
	}
}

// Names that go into Redis keys follow the one rule of internal/keyname:
// a crawl name with a newline (which broke `crawler status`) or a tab is
// refused with its flag, as braces and spaces were.
func TestNamesFollowTheKeyRule(t *testing.T) {
	for _, c := range []struct{ prefix, crawl, flag string }{
		{"polite", "a\nb", "--crawl:"},
		{"polite", "a\tb", "--crawl:"},
		{"polite", "a{}", "--crawl:"},
		{"po\x00lite", "news", "--prefix:"},
		{"{}", "news", "--prefix:"},
	} {
		cfg := Default()
		cfg.Prefix, cfg.Crawl = c.prefix, c.crawl
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("prefix %q, crawl %q: %v, want a %s problem", c.prefix, c.crawl, err, c.flag)
		}
	}
	cfg := Default()
	cfg.Prefix, cfg.Crawl = "polite", "news-2026"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSiteKey(t *testing.T) {
	c := Default()
	if c.SiteKey != "host" || c.Validate() != nil {
		t.Fatalf("default site key %q: %v", c.SiteKey, c.Validate())
	}
	if err := c.ApplyEnv(func(k string) string { return map[string]string{"CRAWLER_SITE_KEY": "domain"}[k] }); err != nil || c.SiteKey != "domain" {
		t.Fatalf("CRAWLER_SITE_KEY=domain: %q, %v", c.SiteKey, err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "Domain", "ip"} {
		c.SiteKey = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--site-key: \""+bad+"\": want host or domain") {
			t.Errorf("--site-key %q: %v", bad, err)
		}
	}
}

// --crawl-ttl defaults to 24h, comes from the file, the variable or the
// flag, and is at least MinCrawlTTL.
func TestCrawlTTL(t *testing.T) {
	if d := Default().CrawlTTL; d != 24*time.Hour {
		t.Fatalf("default %s, want 24h", d)
	}
	file := filepath.Join(t.TempDir(), "crawler.yaml")
	os.WriteFile(file, []byte("crawl_ttl: 2h\n"), 0o644)
	c := Default()
	if err := c.LoadFile(file); err != nil || c.CrawlTTL != 2*time.Hour {
		t.Fatalf("file: %s, %v", c.CrawlTTL, err)
	}
	if err := c.ApplyEnv(func(k string) string { return map[string]string{"CRAWLER_CRAWL_TTL": "3h"}[k] }); err != nil || c.CrawlTTL != 3*time.Hour {
		t.Fatalf("env: %s, %v", c.CrawlTTL, err)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c.Bind(fs)
	if err := fs.Parse([]string{"--crawl-ttl", "90m"}); err != nil || c.CrawlTTL != 90*time.Minute {
		t.Fatalf("flag: %s, %v", c.CrawlTTL, err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, 59 * time.Second, -time.Hour} {
		c.CrawlTTL = d
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--crawl-ttl:") {
			t.Errorf("--crawl-ttl %s: %v, want a --crawl-ttl problem", d, err)
		}
	}
	c.CrawlTTL = MinCrawlTTL
	if err := c.Validate(); err != nil {
		t.Errorf("--crawl-ttl %s: %v", MinCrawlTTL, err)
	}
}

// --log-level and --log-format take only the names they list, from a flag,
// the environment or a file alike.
func TestLogSettings(t *testing.T) {
	c := Default()
	if c.LogLevel != "info" || c.LogFormat != "auto" || c.Validate() != nil {
		t.Fatalf("defaults %q %q: %v", c.LogLevel, c.LogFormat, c.Validate())
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.Bind(fs)
	if err := fs.Parse([]string{"--log-level", "debug", "--log-format", "json"}); err != nil || c.Validate() != nil {
		t.Fatalf("debug json: %v %v", err, c.Validate())
	}
	c.ApplyEnv(func(k string) string {
		return map[string]string{"CRAWLER_LOG_LEVEL": "loud", "CRAWLER_LOG_FORMAT": "xml"}[k]
	})
	err := c.Validate()
	for _, want := range []string{`--log-level: "loud": want debug, info, warn or error`, `--log-format: "xml": want auto, text or json`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no %q in %v", want, err)
		}
	}
}
