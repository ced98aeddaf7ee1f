package assemble

import (
	"bytes"
	"context"
	"errors"
	"github.com/polite-crawler/polite/internal/sitetest"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/testserver"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// settings are the defaults on the test's Redis, under a prefix and a
// crawl of the test's own.
func settings(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Redis = "redis://" + srv.Addr
	cfg.Prefix = "t:" + strings.ReplaceAll(t.Name(), "/", ":")
	cfg.Crawl = "c"
	cfg.Workers = 4
	cfg.Timeout = 20 * time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// syncBuffer is a log's destination that the crawl's goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// build is New on the test's Redis, with a log the test reads; Finish and
// Close run when the test ends.
func build(t *testing.T, cfg *config.Config) (*Crawl, *syncBuffer) {
	t.Helper()
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	var logs syncBuffer
	c, err := New(context.Background(), rdb, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Finish(); c.Close() })
	return c, &logs
}

func TestSeeds(t *testing.T) {
	for _, c := range []struct {
		name    string
		file    []string // the settings' seeds: list
		args    []string
		forever bool
		want    string // the seeds, space-separated, or the usage error
		wantBad bool
	}{
		{"args", nil, []string{"http://a.test/"}, false, "http://a.test/", false},
		{"the file's", []string{"http://f.test/"}, nil, false, "http://f.test/", false},
		{"args replace the file's", []string{"http://f.test/"}, []string{"http://a.test/", "https://b.test/x"}, false, "http://a.test/ https://b.test/x", false},
		{"none", nil, nil, false, "no seed URLs (give at least one, or a seeds: list in the --config file, or --forever to join a crawl others seed)", true},
		{"none, forever", nil, nil, true, "", false},
		{"not http", nil, []string{"http://a.test/", "ftp://x"}, false, `seed "ftp://x": want an absolute http(s) URL`, true},
		{"relative", nil, []string{"/x"}, false, `seed "/x": want an absolute http(s) URL`, true},
		{"no scheme", nil, []string{"a.test:8080/x"}, false, `seed "a.test:8080/x": want an absolute http(s) URL (did you mean http://a.test:8080/x?)`, true},
		{"flag after the seeds", nil, []string{"http://a.test/", "--workers"}, false, `seed "--workers": flags go before the seed URLs`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Seeds, cfg.Forever = c.file, c.forever
			seeds, err := Seeds(&cfg, c.args)
			switch {
			case c.wantBad && (!errors.Is(err, ErrUsage) || err.Error() != c.want):
				t.Errorf("Seeds = %q, %v; want a usage error %q", seeds, err, c.want)
			case !c.wantBad && (err != nil || strings.Join(seeds, " ") != c.want):
				t.Errorf("Seeds = %q, %v; want %q", seeds, err, c.want)
			}
		})
	}
}

// A crawl built from settings crawls the sites politely to the end,
// writes its results to --out and every exchange to --warc, runs the
// watch beside it until it is over, and logs what it did.
func TestCrawlFromSettings(t *testing.T) {
	p, _ := testserver.Preset("mixed", 3, 1)
	ts := sitetest.Start(t, p)
	var seeds []string
	for _, s := range ts.Sites() {
		seeds = append(seeds, s.URL+"/")
	}
	cfg := settings(t)
	cfg.Out, cfg.WARC = filepath.Join(t.TempDir(), "out.jsonl"), t.TempDir()
	cfg.Resolve = ts.Resolve()
	const earlier = "{\"url\":\"an earlier run's result\"}\n" // --out is appended to
	if err := os.WriteFile(cfg.Out, []byte(earlier), 0o644); err != nil {
		t.Fatal(err)
	}
	c, logs := build(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	watched := false
	err := c.Run(ctx, func(ctx context.Context, over <-chan struct{}) {
		select {
		case <-over:
			watched = true
		case <-ctx.Done():
		}
	})
	if err != nil || ctx.Err() != nil || !watched {
		t.Fatalf("Run = %v (ctx %v, watch saw the end: %v)", err, ctx.Err(), watched)
	}
	c.Finish()
	for _, s := range ts.Stats().Sites {
		if why := s.Violation(); why != "" || s.Pages == 0 {
			t.Errorf("site %s: %d pages, violation %q", s.Host, s.Pages, why)
		}
	}
	out, _ := os.ReadFile(cfg.Out)
	warcs, _ := filepath.Glob(filepath.Join(cfg.WARC, "*.warc.gz"))
	if !bytes.HasPrefix(out, []byte(earlier)) {
		t.Errorf("--out lost what an earlier run wrote: it starts %.80q", out)
	}
	if bytes.Count(out, []byte("\n")) < len(seeds)+1 || len(warcs) == 0 {
		t.Errorf("--out has %d lines, --warc %d files", bytes.Count(out, []byte("\n")), len(warcs))
	}
	for _, want := range []string{"msg=\"crawl started\"", "seeds=3 new=3", "msg=\"crawl finished\"", "stopped=false", "msg=\"WARC written\""} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs.String(), "keys are gone") {
		t.Errorf("a crawl that ended by itself was told gone:\n%s", logs)
	}
}

// A crawl deleted under its process looks done to it when it had no
// fetch in flight: Run then fails as the process would have mid-crawl
// (frontier.ErrCrawlGone), so crawler run exits 1, rather than finish.
// One whose keys Redis lost (no tombstone) only warns: its state went
// with Redis.
func TestCrawlDeletedUnderRunIsTold(t *testing.T) {
	for _, lost := range []bool{false, true} {
		cfg := settings(t)
		c, logs := build(t, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Seed(ctx, []string{"http://a.test/", "http://b.test/"}); err != nil {
			t.Fatal(err)
		}
		if _, err := frontier.Delete(ctx, srv.Client(), cfg.Prefix, cfg.Crawl, frontier.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if lost { // as if Redis lost the keys: no tombstone
			if n, err := srv.Client().Del(ctx, cfg.Prefix+":{crawl:"+cfg.Crawl+"}:deleted").Result(); n != 1 || err != nil {
				t.Fatalf("deleting the tombstone: %d, %v", n, err)
			}
		}
		err := c.Run(ctx, nil)
		if lost {
			if err != nil || !strings.Contains(logs.String(), "the crawl's keys are gone: Redis lost them") || !strings.Contains(logs.String(), "crawl finished") {
				t.Errorf("lost keys: Run = %v; the log does not say the crawl's keys went:\n%s", err, logs)
			}
			continue
		}
		if !errors.Is(err, frontier.ErrCrawlGone) || !strings.Contains(err.Error(), "was deleted (crawler delete)") {
			t.Errorf("deleted: Run = %v, want frontier.ErrCrawlGone saying it was deleted", err)
		}
		if strings.Contains(logs.String(), "keys are gone") || !strings.Contains(logs.String(), "crawl finished") {
			t.Errorf("deleted: the log warns of lost keys, or does not say the crawl finished:\n%s", logs)
		}
	}
}

// Seeding errors the user fixes by changing the seeds or the settings
// are ErrUsage and name the setting; a second seeding of the same seeds
// is logged as fetching nothing again.
func TestSeedErrors(t *testing.T) {
	ctx := context.Background()
	cfg := settings(t)
	c, logs := build(t, cfg)
	if err := c.Seed(ctx, []string{"http://a.test/"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Seed(ctx, []string{"http://a.test/"}); err != nil || !strings.Contains(logs.String(), "every seed was already seen") {
		t.Errorf("seeding again: %v; log:\n%s", err, logs)
	}
	long := "http://a.test/" + strings.Repeat("x", cfg.MaxURLLength)
	if err := c.Seed(ctx, []string{long}); !errors.Is(err, ErrUsage) || !strings.HasSuffix(err.Error(), "(see --max-url-length)") {
		t.Errorf("a seed too long: %v, want a usage error pointing to --max-url-length", err)
	}
	other := *cfg
	other.Include = config.Repeated{`^http://a\.test/only/`}
	c2, _ := build(t, &other)
	if err := c2.Seed(ctx, []string{"http://a.test/"}); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "scope") {
		t.Errorf("another scope for the same crawl: %v, want a usage error about the scope", err)
	}
}

// A Redis user who may not use keys under --prefix is told so.
func TestSeedKeyPermission(t *testing.T) {
	ctx := context.Background()
	admin := srv.Client()
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "assemble-other", "on", ">pw", "~other:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.Do(ctx, "ACL", "DELUSER", "assemble-other")
	cfg := settings(t)
	cfg.Redis = "redis://assemble-other:pw@" + srv.Addr
	rdb, err := cfg.Connect(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	c, err := New(ctx, rdb, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Seed(ctx, []string{"http://a.test/"})
	if err == nil || errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "may not use keys under --prefix "+cfg.Prefix) {
		t.Errorf("seeding with keys refused: %v, want an error with the --prefix hint", err)
	}
}

// A Redis user who may use the keys under --prefix but not its channels
// (Redis 7 gives a new user none unless told) is warned at the start that
// waiters will poll, with the ACL rule that fixes it; one who may is not.
func TestWakeupChannelsRefused(t *testing.T) {
	ctx := context.Background()
	cfg := settings(t)
	for _, c := range []struct {
		user, channels string
		warn           bool
	}{{"assemble-nochan", "resetchannels", true}, {"assemble-chan", "&" + cfg.Prefix + ":*", false}} {
		rdb, err := srv.ClientAs(ctx, c.user, "resetkeys", "~"+cfg.Prefix+":*", "resetchannels", c.channels)
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		var logs syncBuffer
		cr, err := New(ctx, rdb, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		cr.Close()
		want := "Redis refuses the limiter's wake-up channels"
		if got := strings.Contains(logs.String(), want) && strings.Contains(logs.String(), "&"+cfg.Prefix+":*"); got != c.warn {
			t.Errorf("user with %s: warned %v, want %v; log:\n%s", c.channels, got, c.warn, logs.String())
		}
	}
}

// New fails on a taken --metrics-addr, naming the setting, and on an
// --out it cannot open, after the WARC directory, which it closes again.
func TestNewFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	rdb := srv.Client()
	defer rdb.Close()
	cfg := settings(t)
	cfg.MetricsAddr = taken.Addr().String()
	if _, err := New(context.Background(), rdb, cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.HasPrefix(err.Error(), "--metrics-addr: ") {
		t.Errorf("a taken --metrics-addr: %v", err)
	}
	cfg = settings(t)
	cfg.WARC, cfg.Out = t.TempDir(), filepath.Join(t.TempDir(), "no", "such", "dir", "out.jsonl")
	var logs syncBuffer
	if _, err := New(context.Background(), rdb, cfg, slog.New(slog.NewTextHandler(&logs, nil))); err == nil || !strings.HasPrefix(err.Error(), "--out: ") {
		t.Errorf("an --out in no directory: %v", err)
	}
	if !strings.Contains(logs.String(), "msg=\"WARC written\"") {
		t.Errorf("the WARC archive was not closed:\n%s", logs.String())
	}
}
