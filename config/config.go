// Package config is the crawler's one Config: defaults, then an optional YAML
// file, then CRAWLER_* environment variables, then command-line flags, each
// overriding the one before. Every field's file key, variable and flag are
// declared once, in its struct tags. Validate reports every problem at once.
package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/polite-crawler/polite/fetch"
	"github.com/polite-crawler/polite/internal/keyname"
	"github.com/polite-crawler/polite/internal/logging"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
)

// Config is everything `crawler run` can be told.
type Config struct {
	Redis              string        `yaml:"redis" env:"CRAWLER_REDIS_URL" flag:"redis" help:"Redis URL: redis://[user:password@]host:port[/db], or rediss:// for TLS"`
	RedisCluster       []string      `yaml:"redis_cluster" env:"CRAWLER_REDIS_CLUSTER" flag:"redis-cluster" help:"Redis Cluster node addresses, comma-separated (instead of --redis; user, password and TLS from --redis)"`
	RedisSentinel      string        `yaml:"redis_sentinel" env:"CRAWLER_REDIS_SENTINEL" flag:"redis-sentinel" help:"Sentinel: master@host:port,host:port (instead of --redis; user, password and TLS from --redis)"`
	RedisCA            string        `yaml:"redis_ca" env:"CRAWLER_REDIS_CA" flag:"redis-ca" help:"PEM file of CA certificates to trust for rediss:// besides the system's (a private CA)"`
	Prefix             string        `yaml:"prefix" env:"CRAWLER_PREFIX" flag:"prefix" help:"prefix of every Redis key"`
	Crawl              string        `yaml:"crawl" env:"CRAWLER_CRAWL" flag:"crawl" help:"name of the crawl; workers with the same name share it"`
	MaxPerSite         int           `yaml:"max_per_site" env:"CRAWLER_MAX_PER_SITE" flag:"max-per-site" help:"most requests at once per site, fleet-wide (robots.txt may ask for fewer)"`
	Workers            int           `yaml:"workers" env:"CRAWLER_WORKERS" flag:"workers" help:"concurrent fetches in this process"`
	UserAgent          string        `yaml:"user_agent" env:"CRAWLER_USER_AGENT" flag:"user-agent" help:"User-Agent; its product token is matched against robots.txt groups"`
	Lease              time.Duration `yaml:"lease" env:"CRAWLER_LEASE" flag:"lease" help:"permit lease; a permit not refreshed for this long is lost"`
	Semaphore          string        `yaml:"semaphore" env:"CRAWLER_SEMAPHORE" flag:"semaphore" help:"semaphore mode: locked (Redis in Action, lock-guarded) or atomic (one Lua script)"`
	SiteKey            string        `yaml:"site_key" env:"CRAWLER_SITE_KEY" flag:"site-key" help:"what one cap covers: host (each host:port) or domain (every host of a registered domain together; robots.txt stays per host); every process of a crawl must give the same"`
	MaxPages           int           `yaml:"max_pages" env:"CRAWLER_MAX_PAGES" flag:"max-pages" help:"stop admitting URLs after this many (0: no limit)"`
	MaxQueuedPerSite   int           `yaml:"max_queued_per_site" env:"CRAWLER_MAX_QUEUED_PER_SITE" flag:"max-queued-per-site" help:"most URLs queued for one site from links found on pages (seeds and sitemaps aside); links past it are dropped and not remembered, so found again only on pages fetched later (bounds a spider trap's cost in Redis, ~87 bytes a URL; 0: no bound)"`
	Shards             int           `yaml:"shards" env:"CRAWLER_SHARDS" flag:"shards" help:"hash tags the crawl's frontier spreads over, for Redis Cluster; fixed by the crawl's first process (later ones use the crawl's)"`
	CrawlTTL           time.Duration `yaml:"crawl_ttl" env:"CRAWLER_CRAWL_TTL" flag:"crawl-ttl" help:"how long a crawl's keys stay in Redis once no process works on it (each process refreshes them while it runs); 'crawler delete' removes them sooner"`
	AllowDomain        Repeated      `yaml:"allow_domain" env:"CRAWLER_ALLOW_DOMAIN" flag:"allow-domain" help:"follow links to this domain and its subdomains too, besides the seeds' sites (repeatable; a host, IP address or host:port; with --site-key domain, a registered domain); stored with the crawl by the process that creates it"`
	FollowExternal     int           `yaml:"follow_external" env:"CRAWLER_FOLLOW_EXTERNAL" flag:"follow-external" help:"follow links off the crawl's sites up to this many hops (0: none); links back into the crawl's sites are followed as usual"`
	Include            Repeated      `yaml:"include" env:"CRAWLER_INCLUDE" flag:"include" help:"follow only links whose normalised URL matches one of these RE2 regular expressions (repeatable); seeds are always crawled"`
	Exclude            Repeated      `yaml:"exclude" env:"CRAWLER_EXCLUDE" flag:"exclude" help:"never follow links whose normalised URL matches one of these RE2 regular expressions (repeatable); seeds are always crawled"`
	MaxDepth           int           `yaml:"max_depth" env:"CRAWLER_MAX_DEPTH" flag:"max-depth" help:"follow links at most this many hops from a seed (0: no limit)"`
	Out                string        `yaml:"out" env:"CRAWLER_OUT" flag:"out" help:"write one JSON line per turn of a URL to this file (url, outcome, status, bytes, depth, attempt, final, fetched_at, worker, ...)"`
	MetricsAddr        string        `yaml:"metrics_addr" env:"CRAWLER_METRICS_ADDR" flag:"metrics-addr" help:"serve Prometheus /metrics here (e.g. 127.0.0.1:9090; empty: off)"`
	MetricsLinger      time.Duration `yaml:"metrics_linger" env:"CRAWLER_METRICS_LINGER" flag:"metrics-linger" help:"keep serving /metrics this long after the crawl ends, for a last scrape (Ctrl-C ends it sooner; 0: stop at once)"`
	Visibility         time.Duration `yaml:"visibility" env:"CRAWLER_VISIBILITY" flag:"visibility" help:"a URL taken by a worker that goes quiet is handed to another after this"`
	MaxAttempts        int           `yaml:"max_attempts" env:"CRAWLER_MAX_ATTEMPTS" flag:"max-attempts" help:"tries per URL on 5xx, 429 and network errors"`
	Timeout            time.Duration `yaml:"timeout" env:"CRAWLER_TIMEOUT" flag:"timeout" help:"one request, waiting for its permit included (robots.txt: up to this for its permit, then this again for the request)"`
	MaxBodySize        Size          `yaml:"max_body_size" env:"CRAWLER_MAX_BODY_SIZE" flag:"max-body-size" help:"most of a response body read (512KiB, 10MiB, 10MB or bytes)"`
	MaxCrawlDelay      time.Duration `yaml:"max_crawl_delay" env:"CRAWLER_MAX_CRAWL_DELAY" flag:"max-crawl-delay" help:"longest Crawl-delay honoured; longer ones are clamped"`
	StopGrace          time.Duration `yaml:"stop_grace" env:"CRAWLER_STOP_GRACE" flag:"stop-grace" help:"on SIGINT/SIGTERM, how long downloads under way may go on to finish, so that no other worker fetches them again (0: cancel them at once)"`
	WARC               string        `yaml:"warc" env:"CRAWLER_WARC" flag:"warc" help:"keep every request and response (robots.txt and sitemaps included) as WARC 1.1 files (gzip per record) in this directory"`
	WARCSize           Size          `yaml:"warc_size" env:"CRAWLER_WARC_SIZE" flag:"warc-size" help:"start a new WARC file once one reaches this size (1GiB, 500MB or bytes)"`
	Sitemaps           bool          `yaml:"sitemaps" env:"CRAWLER_SITEMAPS" flag:"sitemaps" help:"also crawl the seeds' sites from their sitemaps (robots.txt's Sitemap: lines, or /sitemap.xml), under their permits like pages; --sitemaps=false: only links"`
	Forever            bool          `yaml:"forever" env:"CRAWLER_FOREVER" flag:"forever" help:"keep waiting for new URLs when the crawl is done"`
	Progress           time.Duration `yaml:"progress" env:"CRAWLER_PROGRESS" flag:"progress" help:"how often to report progress"`
	MaxURLLength       int           `yaml:"max_url_length" env:"CRAWLER_MAX_URL_LENGTH" flag:"max-url-length" help:"links longer than this (bytes) are dropped and counted, never fetched"`
	MaxPerIP           int           `yaml:"max_per_ip" env:"CRAWLER_MAX_PER_IP" flag:"max-per-ip" help:"most requests at once per server address, fleet-wide, on top of the site cap (0: off); an IPv6 address counts with its /64"`
	Resolve            Repeated      `yaml:"resolve" env:"CRAWLER_RESOLVE" flag:"resolve" help:"HOST:PORT:ADDR[,ADDR...]: connect to ADDR for HOST:PORT instead of asking DNS, as curl's --resolve (repeatable; HOST * is any host on PORT; the variable takes several, space-separated)"`
	Adaptive           bool          `yaml:"adaptive" env:"CRAWLER_ADAPTIVE" flag:"adaptive" help:"adapt each site's cap and delay to its health, fleet-wide: fewer requests at once to a site that slows down or fails, a growing hold-off after a 429/503 without Retry-After (--adaptive=false: the cap alone)"`
	AdaptiveBackoff    time.Duration `yaml:"adaptive_backoff" env:"CRAWLER_ADAPTIVE_BACKOFF" flag:"adaptive-backoff" help:"first fleet-wide hold-off after a 429 or 503 without Retry-After; it doubles with each repeat"`
	AdaptiveBackoffMax time.Duration `yaml:"adaptive_backoff_max" env:"CRAWLER_ADAPTIVE_BACKOFF_MAX" flag:"adaptive-backoff-max" help:"longest hold-off after repeated 429/503 without Retry-After (at most 24h)"`
	AdaptiveForgive    time.Duration `yaml:"adaptive_forgive" env:"CRAWLER_ADAPTIVE_FORGIVE" flag:"adaptive-forgive" help:"a site quiet this long (no 429/503 without Retry-After) starts its hold-offs from --adaptive-backoff again; a site not fetched this long forgets its health"`
	Seeds              Repeated      `yaml:"seeds" env:"-" flag:"-" help:"seed URLs for 'crawler run' (file only; seeds given as arguments replace them)"`
	LogLevel           string        `yaml:"log_level" env:"CRAWLER_LOG_LEVEL" flag:"log-level" help:"least level logged: debug, info, warn or error"`
	LogFormat          string        `yaml:"log_format" env:"CRAWLER_LOG_FORMAT" flag:"log-format" help:"log format: auto (text on a terminal, JSON otherwise), text or json"`
	Strict             bool          `yaml:"strict" env:"CRAWLER_STRICT" flag:"strict" help:"refuse to start on a Redis that may evict our keys (maxmemory-policy other than noeviction) or whose policy cannot be read, rather than warn"`
}

// Repeated is a setting given once per value: each --flag adds one whole
// value (commas and all), the first replacing what a file or variable
// gave; a variable gives several separated by white space; a file, a list.
type Repeated []string

// MaxPerIPLimit is the most --max-per-ip allows.
const MaxPerIPLimit = 10000

// MinCrawlTTL is the least --crawl-ttl. A crawl's processes refresh its
// keys' TTLs every quarter of it (at most once a minute); a shorter TTL
// would leave too little margin for a pause or a slow Redis.
const MinCrawlTTL = time.Minute

// MinURLLength is the least --max-url-length: below it, ordinary links
// (long query strings, tracking parameters) would be dropped.
const MinURLLength = 256

// Default is the configuration before any file, variable or flag.
func Default() Config {
	return Config{
		Redis: "redis://127.0.0.1:6379", Prefix: "polite", Crawl: "default", MaxPerSite: 3, MaxQueuedPerSite: 1000000, Workers: 8, Shards: 16,
		UserAgent: "politebot/0.1 (+https://github.com/polite-crawler/polite)", Lease: 10 * time.Second,
		Semaphore: limiter.ModeLockedName, SiteKey: robots.SiteKeyHost, Visibility: 2 * time.Minute, MaxAttempts: 3, Timeout: time.Minute,
		MaxBodySize: 10 << 20, MaxCrawlDelay: 30 * time.Second, Progress: 5 * time.Second,
		StopGrace: 10 * time.Second, Sitemaps: true, WARCSize: 1 << 30, MaxURLLength: 8192, CrawlTTL: 24 * time.Hour,
		LogLevel: "info", LogFormat: logging.FormatAuto,
		Adaptive: true, AdaptiveBackoff: time.Minute, AdaptiveBackoffMax: 24 * time.Hour, AdaptiveForgive: 30 * time.Minute,
	}
}

// ApplyEnv applies the CRAWLER_* variables that getenv returns non-empty.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	var errs []error
	c.each(func(f reflect.StructField, v reflect.Value) {
		if f.Tag.Get("env") == "-" {
			return
		}
		if s := getenv(f.Tag.Get("env")); s != "" {
			if _, ok := v.Interface().(Repeated); ok {
				v.Set(reflect.ValueOf(Repeated(strings.Fields(s))))
				return
			}
			if err := set(v, s); err != nil {
				errs = append(errs, fmt.Errorf("config: %s=%q: %w", f.Tag.Get("env"), s, err))
			}
		}
	})
	return errors.Join(errs...)
}

// Bind defines a flag per field on fs, defaulting to the field's current
// value, so that parsing fs afterwards overrides only what is given.
func (c *Config) Bind(fs *flag.FlagSet) {
	c.each(func(f reflect.StructField, v reflect.Value) {
		if f.Tag.Get("flag") == "-" {
			return
		}
		help := f.Tag.Get("help") + " (env " + f.Tag.Get("env") + ")"
		if v.Kind() == reflect.Bool {
			fs.Var(boolValue{v}, f.Tag.Get("flag"), help)
			return
		}
		if _, ok := v.Interface().(Repeated); ok {
			fs.Var(&repeatedValue{v: v}, f.Tag.Get("flag"), help)
			return
		}
		fs.Var(value{v}, f.Tag.Get("flag"), help)
	})
}

func (c *Config) each(fn func(reflect.StructField, reflect.Value)) {
	rv := reflect.ValueOf(c).Elem()
	for i := 0; i < rv.NumField(); i++ {
		fn(rv.Type().Field(i), rv.Field(i))
	}
}

// value is a flag.Value over one Config field.
type value struct{ v reflect.Value }

func (f value) String() string {
	if !f.v.IsValid() {
		return ""
	}
	switch x := f.v.Interface().(type) {
	case []string:
		return strings.Join(x, ",")
	case time.Duration:
		return x.String()
	}
	return fmt.Sprint(f.v.Interface())
}

func (f value) Set(s string) error { return set(f.v, s) }

// Type names what the flag takes, for its help: int, size, duration, list
// (comma-separated) or string.
func (f value) Type() string {
	if !f.v.IsValid() {
		return "value"
	}
	switch f.v.Interface().(type) {
	case int:
		return "int"
	case Size:
		return "size"
	case time.Duration:
		return "duration"
	case []string:
		return "list"
	}
	return "string"
}

// repeatedValue is a flag.Value over a Repeated field: each Set adds one
// value, the first one replacing the field's earlier values.
type repeatedValue struct {
	v   reflect.Value
	set bool
}

func (f *repeatedValue) String() string {
	if f == nil || !f.v.IsValid() {
		return ""
	}
	return strings.Join(f.v.Interface().(Repeated), " ")
}

// Type names what the flag takes, for its help: one string a time.
func (f *repeatedValue) Type() string { return "string" }

func (f *repeatedValue) Set(s string) error {
	var cur Repeated
	if f.set {
		cur = f.v.Interface().(Repeated)
	}
	f.set = true
	f.v.Set(reflect.ValueOf(append(cur, s)))
	return nil
}

type boolValue struct{ value reflect.Value }

func (b boolValue) String() string {
	if !b.value.IsValid() {
		return "false"
	}
	return strconv.FormatBool(b.value.Bool())
}
func (b boolValue) Set(s string) error { return set(b.value, s) }
func (b boolValue) IsBoolFlag() bool   { return true }

func set(v reflect.Value, s string) error {
	switch v.Interface().(type) {
	case string:
		v.SetString(s)
	case int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return errors.New("want a whole number")
		}
		v.SetInt(int64(n))
	case Size:
		n, err := ParseSize(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(n))
	case bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("want true or false")
		}
		v.SetBool(b)
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return errors.New("want a duration such as 10s or 1m30s")
		}
		v.SetInt(int64(d))
	case []string:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
	}
	return nil
}

// Validate returns every problem at once, each naming its flag and what is
// allowed.
func (c *Config) Validate() error {
	var errs []error
	bad := func(flag, format string, a ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, a...)))
	}
	if u, err := url.Parse(c.Redis); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		hint := ""
		if _, _, err := net.SplitHostPort(c.Redis); err == nil && !strings.Contains(c.Redis, "/") {
			hint = fmt.Sprintf(" (did you mean redis://%s?)", c.Redis)
		}
		bad("redis", "%q is not a redis:// or rediss:// URL%s", c.Redis, hint)
	}
	for _, a := range c.RedisCluster {
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad("redis-cluster", "%q is not host:port", a)
		}
	}
	if c.RedisSentinel != "" {
		master, addrs, ok := strings.Cut(c.RedisSentinel, "@")
		if !ok || master == "" || addrs == "" {
			bad("redis-sentinel", "%q: want master@host:port[,host:port]", c.RedisSentinel)
		}
		if len(c.RedisCluster) > 0 {
			bad("redis-sentinel", "give either --redis-cluster or --redis-sentinel, not both")
		}
	}
	if err := keyname.Check("name", c.Prefix); err != nil {
		bad("prefix", "%q: want a non-empty name without braces, whitespace or control characters (%v)", c.Prefix, err)
	}
	if err := keyname.Check("name", c.Crawl); err != nil {
		bad("crawl", "%q: want a non-empty name without braces, whitespace or control characters (%v)", c.Crawl, err)
	}
	if c.MaxPerSite < 1 || c.MaxPerSite > 1000 {
		bad("max-per-site", "%d: want 1..1000", c.MaxPerSite)
	}
	if c.Workers < 1 || c.Workers > 10000 {
		bad("workers", "%d: want 1..10000", c.Workers)
	}
	if strings.TrimSpace(c.UserAgent) == "" {
		bad("user-agent", "must not be empty")
	}
	if c.Lease < 100*time.Millisecond || c.Lease > time.Hour {
		bad("lease", "%s: want 100ms..1h", c.Lease)
	}
	if _, err := limiter.ParseMode(c.Semaphore); err != nil {
		bad("semaphore", "%q: want %s or %s", c.Semaphore, limiter.ModeLockedName, limiter.ModeAtomicName)
	}
	if _, err := robots.ParseSiteKey(c.SiteKey); err != nil || c.SiteKey == "" {
		bad("site-key", "%q: want %s or %s", c.SiteKey, robots.SiteKeyHost, robots.SiteKeyDomain)
	}
	if c.WARCSize < 1<<20 {
		bad("warc-size", "%s: want at least 1MiB", c.WARCSize)
	}
	if c.MaxPerIP < 0 || c.MaxPerIP > MaxPerIPLimit {
		bad("max-per-ip", "%d: want 0 (off) ..%d", c.MaxPerIP, MaxPerIPLimit)
	}
	if _, err := fetch.ParseResolve(c.Resolve); err != nil {
		bad("resolve", "%v", err)
	}
	if c.RedisCA != "" {
		if !strings.HasPrefix(c.Redis, "rediss://") {
			bad("redis-ca", "only with a rediss:// (TLS) --redis URL")
		} else if _, err := c.caPool(); err != nil {
			bad("redis-ca", "%v", err)
		}
	}
	if c.MaxPages < 0 {
		bad("max-pages", "%d: want >= 0", c.MaxPages)
	}
	if c.MaxQueuedPerSite < 0 {
		bad("max-queued-per-site", "%d: want >= 0 (0: no bound)", c.MaxQueuedPerSite)
	}
	if c.Shards < 1 || c.Shards > 1024 {
		bad("shards", "%d: want 1..1024", c.Shards)
	}
	if c.CrawlTTL < MinCrawlTTL {
		bad("crawl-ttl", "%s: want at least %s", c.CrawlTTL, MinCrawlTTL)
	}
	c.validateScope(bad)
	if c.MaxDepth < 0 {
		bad("max-depth", "%d: want >= 0", c.MaxDepth)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			bad("metrics-addr", "%q is not host:port", c.MetricsAddr)
		}
	}
	switch {
	case c.MetricsLinger < 0 || c.MetricsLinger > 24*time.Hour:
		bad("metrics-linger", "%s: want 0..24h", c.MetricsLinger)
	case c.MetricsLinger > 0 && c.MetricsAddr == "":
		bad("metrics-linger", "%s: needs --metrics-addr (there is no /metrics to keep serving)", c.MetricsLinger)
	}
	if c.Visibility < time.Second {
		bad("visibility", "%s: want at least 1s", c.Visibility)
	}
	if c.Timeout < time.Second {
		bad("timeout", "%s: want at least 1s", c.Timeout)
	} else if c.Visibility <= c.Timeout {
		bad("visibility", "%s must be longer than --timeout %s, or slow fetches are handed out twice", c.Visibility, c.Timeout)
	}
	if c.StopGrace < 0 {
		bad("stop-grace", "%s: want >= 0", c.StopGrace)
	}
	if c.MaxAttempts < 1 {
		bad("max-attempts", "%d: want >= 1", c.MaxAttempts)
	}
	if c.MaxBodySize < 1 {
		bad("max-body-size", "%s: want at least 1 byte", c.MaxBodySize)
	}
	if c.MaxCrawlDelay < 0 {
		bad("max-crawl-delay", "%s: want >= 0", c.MaxCrawlDelay)
	}
	if c.AdaptiveBackoff < 100*time.Millisecond {
		bad("adaptive-backoff", "%s: want at least 100ms", c.AdaptiveBackoff)
	}
	if c.AdaptiveBackoffMax < c.AdaptiveBackoff || c.AdaptiveBackoffMax > 24*time.Hour {
		bad("adaptive-backoff-max", "%s: want from --adaptive-backoff (%s) to 24h", c.AdaptiveBackoffMax, c.AdaptiveBackoff)
	}
	if c.AdaptiveForgive < time.Second || c.AdaptiveForgive > 24*time.Hour {
		bad("adaptive-forgive", "%s: want 1s to 24h", c.AdaptiveForgive)
	}
	if c.MaxURLLength < MinURLLength {
		bad("max-url-length", "%d: want at least %d", c.MaxURLLength, MinURLLength)
	}
	if logging.CheckLevel(c.LogLevel) != nil {
		bad("log-level", "%q: want %s", c.LogLevel, logging.Levels)
	}
	if logging.CheckFormat(c.LogFormat) != nil {
		bad("log-format", "%q: want %s", c.LogFormat, logging.Formats)
	}
	if c.Progress < 100*time.Millisecond {
		bad("progress", "%s: want at least 100ms", c.Progress)
	}
	return errors.Join(errs...)
}
