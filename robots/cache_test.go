package robots

import (
	"context"
	"errors"
	"fmt"
	"github.com/polite-crawler/polite/internal/sitetest"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/testserver"
	"github.com/redis/go-redis/v9"
)

var srv *redistest.Server

const fleetEnv = "POLITE_ROBOTS_FLEET_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(fleetEnv) != "" {
		os.Exit(fleetChild())
	}
	redistest.Main(m, &srv, func(s *redistest.Server) error {
		return os.Setenv("REDIS_ADDR", s.Addr) // for the examples
	})
}

func newCache(t *testing.T, o CacheOptions) (*Cache, *redis.Client) {
	t.Helper()
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })
	if o.Prefix == "" {
		o.Prefix = "t:" + strings.ReplaceAll(t.Name(), "/", ".")
	}
	return NewCache(rdb, &http.Client{Timeout: 30 * time.Second}, &o), rdb
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// robotsServer serves /robots.txt with a status and body the test can change,
// counting requests.
type robotsServer struct {
	mu     sync.Mutex
	status int
	body   string
	delay  time.Duration
	hits   atomic.Int64
	// abandoned counts requests whose client gave up before delay ended.
	abandoned atomic.Int64
}

func (s *robotsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	s.hits.Add(1)
	s.mu.Lock()
	status, body, delay := s.status, s.body, s.delay
	s.mu.Unlock()
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		s.abandoned.Add(1)
		return
	}
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func (s *robotsServer) set(status int, body string) {
	s.mu.Lock()
	s.status, s.body = status, body
	s.mu.Unlock()
}

func TestSiteKey(t *testing.T) {
	for in, want := range map[string]string{
		"http://Example.COM/x":      "example.com",
		"http://example.com:80/":    "example.com",
		"https://example.com:443/":  "example.com",
		"https://example.com:8443/": "example.com:8443",
		"http://127.0.0.2:8080/":    "127.0.0.2:8080",
		"http://[::1]:8080/":        "[::1]:8080",
		"http://[::1]/":             "[::1]",
	} {
		if got := Site(mustURL(t, in)); got != want {
			t.Errorf("Site(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestFetchFollowsRedirectsAcrossHosts(t *testing.T) {
	ctx := ctxT(t)
	final := &robotsServer{status: 200, body: "User-agent: politebot\nConcurrency: 2\nDisallow: /x/\n"}
	b := httptest.NewServer(final)
	defer b.Close()
	a := httptest.NewServer(http.RedirectHandler(b.URL+"/robots.txt", http.StatusMovedPermanently))
	defer a.Close()
	c, _ := newCache(t, CacheOptions{})
	p, err := c.Policy(ctx, mustURL(t, a.URL+"/page"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Concurrency != 2 || p.Allowed("/x/1") || final.hits.Load() != 1 {
		t.Fatalf("policy through a cross-host redirect: %+v (hits %d)", p, final.hits.Load())
	}
}

func TestRedirectChains(t *testing.T) {
	ctx := ctxT(t)
	for _, c := range []struct {
		hops     int
		allowAll bool
	}{{2, false}, {5, false}, {6, true}, {7, true}} {
		t.Run(fmt.Sprint(c.hops), func(t *testing.T) {
			prof := testserver.Profile{Name: "r", Sites: []testserver.SiteSpec{{Pages: 2, Links: 1,
				Robots: testserver.Robots{RedirectHops: c.hops, Concurrency: 1, Disallow: []string{"/private/"}}}}}
			ts := sitetest.Start(t, prof)
			cache, _ := newCache(t, CacheOptions{})
			p, err := cache.Policy(ctx, mustURL(t, ts.Sites()[0].URL))
			if err != nil {
				t.Fatal(err)
			}
			if p.AllowAll != c.allowAll || p.Allowed("/private/1") != c.allowAll {
				t.Fatalf("%d redirects: %+v", c.hops, p)
			}
			if !c.allowAll && p.Cap(3) != 1 {
				t.Fatalf("cap %d", p.Cap(3))
			}
		})
	}
}

// 5xx: everything closed and a retry after the backoff; once the file is
// back, the good policy; when it fails again, the last good copy stands in.
func TestUnreachableThenRecovery(t *testing.T) {
	ctx := ctxT(t)
	rs := &robotsServer{status: 503}
	hs := httptest.NewServer(rs)
	defer hs.Close()
	u := mustURL(t, hs.URL)
	const retry = 150 * time.Millisecond
	c, rdb := newCache(t, CacheOptions{RetryMin: retry, RetryMax: 4 * retry, TTL: 300 * time.Millisecond})
	k := c.keys(origin{u.Scheme, Site(u)})

	p, err := c.Policy(ctx, u)
	if err != nil || !p.DisallowAll || !p.Unreachable() {
		t.Fatalf("503 robots.txt: %+v %v", p, err)
	}
	if ttl := rdb.PTTL(ctx, k.policy).Val(); ttl <= 0 || ttl > retry {
		t.Fatalf("first retry in %v, want <= %v", ttl, retry)
	}
	time.Sleep(retry + 20*time.Millisecond)
	c.Policy(ctx, u) // still 503: second failure, longer backoff
	if ttl := rdb.PTTL(ctx, k.policy).Val(); ttl <= retry || ttl > 2*retry {
		t.Fatalf("second retry in %v, want in (%v, %v]", ttl, retry, 2*retry)
	}
	if rs.hits.Load() != 2 {
		t.Fatalf("%d fetches, want 2 (no fetch during the backoff)", rs.hits.Load())
	}

	rs.set(200, "User-agent: *\nDisallow: /private/\n")
	time.Sleep(2*retry + 20*time.Millisecond)
	p, _ = c.Policy(ctx, u)
	if p.DisallowAll || p.Allowed("/private/x") || !p.Allowed("/public") {
		t.Fatalf("after recovery: %+v", p)
	}

	rs.set(500, "")
	time.Sleep(300*time.Millisecond + 20*time.Millisecond)
	p, _ = c.Policy(ctx, u)
	if p.DisallowAll || p.Allowed("/private/x") || !p.Allowed("/public") {
		t.Fatalf("unreachable again: the last good copy should stand in: %+v", p)
	}
	if rs.hits.Load() != 4 {
		t.Fatalf("%d fetches, want 4", rs.hits.Load())
	}
}

func TestSlowAndOversized(t *testing.T) {
	ctx := ctxT(t)
	slow := &robotsServer{status: 200, body: "User-agent: *\nDisallow: /\n", delay: 2 * time.Second}
	hs := httptest.NewServer(slow)
	defer hs.Close()
	c, _ := newCache(t, CacheOptions{FetchTimeout: 200 * time.Millisecond})
	p, err := c.Policy(ctx, mustURL(t, hs.URL))
	if err != nil || !p.DisallowAll || !p.Unreachable() {
		t.Fatalf("robots.txt slower than the fetch timeout: %+v %v", p, err)
	}
	// The fetch timeout was honoured: the cache gave up on the request
	// while the server was still sleeping (hs.Close waits for the handler).
	hs.Close()
	if slow.hits.Load() != 1 || slow.abandoned.Load() != 1 {
		t.Fatalf("fetch timeout not honoured: %d requests, %d abandoned by the client", slow.hits.Load(), slow.abandoned.Load())
	}

	big := &robotsServer{status: 200, body: "User-agent: *\nDisallow: /early/\n" + strings.Repeat("# pad\n", 120_000) + "Disallow: /late/\n"}
	hb := httptest.NewServer(big)
	defer hb.Close()
	p, err = c.Policy(ctx, mustURL(t, hb.URL))
	if err != nil || p.Allowed("/early/1") || !p.Allowed("/late/1") {
		t.Fatalf("oversized robots.txt: %+v %v", p.Rules, err)
	}
}

// The in-process layer answers without Redis, and stays bounded.
func TestLocalLayer(t *testing.T) {
	ctx := ctxT(t)
	rs := &robotsServer{status: 200, body: "User-agent: *\nDisallow: /p/\n"}
	hs := httptest.NewServer(rs)
	defer hs.Close()
	c, rdb := newCache(t, CacheOptions{LocalSize: 2})
	u := mustURL(t, hs.URL)
	if _, err := c.Policy(ctx, u); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, c.keys(origin{u.Scheme, Site(u)}).policy)
	if p, err := c.Policy(ctx, u); err != nil || p.Allowed("/p/1") || rs.hits.Load() != 1 {
		t.Fatalf("local layer: %+v %v hits %d", p, err, rs.hits.Load())
	}
	// Two more sites push the first out of a layer of 2.
	for _, h := range []string{"http://127.0.0.1:1/", "http://127.0.0.1:2/"} {
		c.Policy(ctx, mustURL(t, h)) // connection refused: unreachable, cached too
	}
	if p, _ := c.Policy(ctx, u); p.Allowed("/p/1") || rs.hits.Load() != 2 {
		t.Fatalf("evicted site not fetched again: hits %d", rs.hits.Load())
	}
	if ttl := rdb.PTTL(ctx, c.keys(origin{u.Scheme, Site(u)}).policy).Val(); ttl <= 23*time.Hour || ttl > 24*time.Hour {
		t.Fatalf("policy TTL %v, want 24h", ttl)
	}
}

// Many goroutines of one process asking at once share one load.
func TestSingleflight(t *testing.T) {
	ctx := ctxT(t)
	rs := &robotsServer{status: 200, body: "User-agent: *\nDisallow: /p/\n", delay: 200 * time.Millisecond}
	hs := httptest.NewServer(rs)
	defer hs.Close()
	c, rdb := newCache(t, CacheOptions{})
	rdb.ConfigResetStat(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p, err := c.Policy(ctx, mustURL(t, hs.URL+"/x")); err != nil || p.Allowed("/p/1") {
				t.Errorf("%+v %v", p, err)
			}
		}()
	}
	wg.Wait()
	if rs.hits.Load() != 1 {
		t.Fatalf("%d fetches for 20 callers", rs.hits.Load())
	}
	// One load went to Redis, not twenty (the fetch lease alone would also
	// give one fetch, but with twenty readers polling Redis).
	// (Redis counts the GET inside the lease-release script too.)
	stats := rdb.Info(ctx, "commandstats").Val()
	var gets int
	if i := strings.Index(stats, "cmdstat_get:calls="); i >= 0 {
		fmt.Sscanf(stats[i+len("cmdstat_get:calls="):], "%d", &gets)
	}
	if gets < 1 || gets > 2 {
		t.Fatalf("%d Redis GETs for 20 callers of one process, want 1 load:\n%s", gets, stats)
	}
}

// 8 worker processes ask for one site's policy at once: the site sees one
// robots.txt request, counted at the server.
func TestFleetFetchesOnce(t *testing.T) {
	prof := testserver.Profile{Name: "fleet", Sites: []testserver.SiteSpec{{Pages: 2, Links: 1,
		Robots: testserver.Robots{Delay: testserver.Duration(300 * time.Millisecond), Concurrency: 2, Disallow: []string{"/private/"}}}}}
	ts := sitetest.Start(t, prof)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prefix := "t:fleet"
	var wg sync.WaitGroup
	outs := make([][]byte, 8)
	errs := make([]error, 8)
	for i := range outs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fleetEnv+"=1", "FLEET_REDIS="+srv.Addr, "FLEET_URL="+ts.Sites()[0].URL, "FLEET_PREFIX="+prefix)
		wg.Add(1)
		go func() { defer wg.Done(); outs[i], errs[i] = cmd.CombinedOutput() }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || !strings.Contains(string(outs[i]), "cap=2 private=false") {
			t.Fatalf("worker %d: %v\n%s", i, err, outs[i])
		}
	}
	if n := ts.Stats().Sites[0].RobotsFetches; n != 1 {
		t.Fatalf("the site saw %d robots.txt requests from 8 workers, want 1", n)
	}
}

func fleetChild() int {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FLEET_REDIS")})
	defer rdb.Close()
	c := NewCache(rdb, nil, &CacheOptions{Prefix: os.Getenv("FLEET_PREFIX")})
	u, _ := url.Parse(os.Getenv("FLEET_URL"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.Policy(ctx, u)
			if err != nil {
				fmt.Println(err)
				failed.Store(true)
				return
			}
			fmt.Printf("cap=%d private=%v\n", p.Cap(3), p.Allowed("/private/1"))
		}()
	}
	wg.Wait()
	if failed.Load() {
		return 1
	}
	return 0
}

// recordingTransport stands in for the crawler's permit-taking transport: it
// sees every request the Cache makes.
type recordingTransport struct {
	mu   sync.Mutex
	seen []string
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.seen = append(rt.seen, fmt.Sprintf("%s ua=%s", req.URL.Path, req.Header.Get("User-Agent")))
	rt.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// The robots.txt fetch, redirect hops included, goes through the client the
// Cache was given.
func TestFetchGoesThroughGivenTransport(t *testing.T) {
	ctx := ctxT(t)
	final := &robotsServer{status: 200, body: "User-agent: *\nDisallow: /p/\n"}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Redirect(w, r, "/moved/robots.txt", http.StatusFound)
			return
		}
		r.URL.Path = "/robots.txt"
		final.ServeHTTP(w, r)
	}))
	defer hs.Close()
	rt := &recordingTransport{}
	rdb := srv.Client()
	defer rdb.Close()
	c := NewCache(rdb, &http.Client{Transport: rt}, &CacheOptions{Prefix: "t:transport", UserAgent: "PoliteBot/2.0 (+https://example.invalid)"})
	p, err := c.Policy(ctx, mustURL(t, hs.URL+"/a"))
	if err != nil || p.Allowed("/p/1") {
		t.Fatalf("%+v %v", p, err)
	}
	want := []string{
		"/robots.txt ua=PoliteBot/2.0 (+https://example.invalid)",
		"/moved/robots.txt ua=PoliteBot/2.0 (+https://example.invalid)",
	}
	if strings.Join(rt.seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("transport saw:\n%s", strings.Join(rt.seen, "\n"))
	}
}

// notFetched is a transport that never gets to send: its error wraps
// ErrNotFetched, as the crawler's does without a permit.
type notFetched struct{}

func (notFetched) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("no permit in time: %w", ErrNotFetched)
}

// A fetch the transport could not make is an error, not an unreachable
// site: nothing is stored, and the next call fetches.
func TestNotFetchedIsNoVerdict(t *testing.T) {
	ctx := ctxT(t)
	hs := httptest.NewServer(&robotsServer{status: 200, body: "User-agent: *\nDisallow: /p/\n"})
	defer hs.Close()
	rdb := srv.Client()
	defer rdb.Close()
	o := &CacheOptions{Prefix: "t:notfetched"}
	if _, err := NewCache(rdb, &http.Client{Transport: notFetched{}}, o).Policy(ctx, mustURL(t, hs.URL+"/a")); !errors.Is(err, ErrNotFetched) {
		t.Fatalf("Policy through a transport that could not send: %v, want ErrNotFetched", err)
	}
	p, err := NewCache(rdb, &http.Client{}, o).Policy(ctx, mustURL(t, hs.URL+"/a"))
	if err != nil || p.Unreachable() || p.Allowed("/p/1") || !p.Allowed("/q") {
		t.Fatalf("the next Policy: %+v, %v; want the site's own rules, fetched", p, err)
	}
}

// eofTransport notes whether each response's body was read to its end
// before it was closed.
type eofTransport struct {
	mu  sync.Mutex
	eof []bool
}

type eofBody struct {
	io.ReadCloser
	t   *eofTransport
	hit bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.hit = true
	}
	return n, err
}

func (b *eofBody) Close() error {
	b.t.mu.Lock()
	b.t.eof = append(b.t.eof, b.hit)
	b.t.mu.Unlock()
	return b.ReadCloser.Close()
}

func (t *eofTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = &eofBody{ReadCloser: resp.Body, t: t}
	}
	return resp, err
}

// A robots.txt that answers an error is read to its end when short: a
// recording transport (WARC) keeps the error page whole rather than mark
// it truncated.
func TestErrorAnswerReadToItsEnd(t *testing.T) {
	ctx := ctxT(t)
	for _, status := range []int{404, 503} {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			io.WriteString(w, strings.Repeat("not here. ", 50))
		}))
		rt := &eofTransport{}
		rdb := srv.Client()
		c := NewCache(rdb, &http.Client{Transport: rt}, &CacheOptions{Prefix: fmt.Sprintf("t:errbody%d", status)})
		if _, err := c.Policy(ctx, mustURL(t, hs.URL+"/a")); err != nil {
			t.Fatal(err)
		}
		rt.mu.Lock()
		if len(rt.eof) != 1 || !rt.eof[0] {
			t.Errorf("robots.txt answering %d: bodies read to their end %v, want [true]", status, rt.eof)
		}
		rt.mu.Unlock()
		rdb.Close()
		hs.Close()
	}
}

// Fetched runs before the policy is stored: a crawl delay it starts is in
// place before any worker can read the policy and request a page (a worker
// that read it in between went to the site right after robots.txt).
func TestFetchedBeforeStored(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nCrawl-delay: 1\n")
	}))
	defer hs.Close()
	ctx := ctxT(t)
	var stored []string
	var c *Cache
	var rdb *redis.Client
	c, rdb = newCache(t, CacheOptions{Prefix: fmt.Sprintf("t:fetched:%d", time.Now().UnixNano()), Fetched: func(ctx context.Context, site string, p Policy) {
		var err error
		stored, err = rdb.Keys(ctx, c.o.prefix()+"*").Result()
		if err != nil {
			t.Error(err)
		}
	}})
	p, err := c.Policy(ctx, mustURL(t, hs.URL+"/a"))
	if err != nil || p.CrawlDelay != time.Second {
		t.Fatalf("policy %+v, %v", p, err)
	}
	o, err := c.origin(mustURL(t, hs.URL+"/a"))
	if err != nil {
		t.Fatal(err)
	}
	k := c.keys(o)
	for _, key := range stored {
		if key == k.policy || key == k.good {
			t.Fatalf("the policy was stored before Fetched ran (%s)", key)
		}
	}
	if n, _ := rdb.Exists(ctx, k.policy).Result(); n != 1 {
		t.Fatal("the policy was not stored")
	}
}
