package crawl

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redisacl"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/limiter"
	"github.com/polite-crawler/polite/robots"
	"github.com/polite-crawler/polite/testserver"
)

// stopAtNext is a go-redis hook that stops the crawl while the answer of
// Next's script is on its way back: the script has run in Redis (an item is
// taken), and the call then fails with the caller's context error if that
// context was the one stopped.
type stopAtNext struct {
	armed atomic.Bool
	stop  context.CancelFunc
}

func (h *stopAtNext) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *stopAtNext) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if err == nil && isNextCall(cmd) && h.armed.CompareAndSwap(true, false) {
				h.stop()
				if ctx.Err() != nil {
					cmd.SetErr(ctx.Err())
					return ctx.Err()
				}
			}
		}
		return err
	}
}

func (h *stopAtNext) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && isNextCall(cmd) && h.armed.CompareAndSwap(true, false) {
			h.stop()
			if ctx.Err() != nil {
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
		}
		return err
	}
}

// isNextCall reports whether cmd runs a frontier shard script (its first
// key is a shard's ready set): once the crawl is seeded, the first is Next's.
func isNextCall(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) <= 3 || !(strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") || strings.EqualFold(cmd.Name(), "fcall")) {
		return false
	}
	k, _ := args[3].(string)
	return strings.HasSuffix(k, ":ready")
}

// A stop that comes while Next's answer is on its way does not strand the
// item it took: the worker gives it back at once, rather than leaving it
// in flight until the visibility timeout (a minute here).
func TestStopDuringNextGivesTheItemBack(t *testing.T) {
	ts := serve(t, testserver.Profile{Name: t.Name(), Seed: 1, Sites: []testserver.SiteSpec{{Pages: 5, Links: 2}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, stop := context.WithCancel(ctx)
	defer stop()
	hook := &stopAtNext{stop: stop}
	rdb := srv.Client()
	defer rdb.Close()
	rdb.AddHook(hook)
	prefix := redistest.Prefix(t)
	lim := limiter.New(rdb, &limiter.Options{Prefix: prefix, Lease: time.Second})
	defer lim.Close()
	rob := NewRobotsCache(rdb, lim, 3, robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"}, nil)
	fr := frontier.New(rdb, &frontier.Options{Prefix: prefix, Crawl: "stopnext", Visibility: time.Minute})
	c := New(fr, lim, rob, Options{Workers: 1, UserAgent: "politebot/1.0", Timeout: 20 * time.Second})
	if _, err := c.Seed(ctx, []string{ts.Sites()[0].URL + "/"}); err != nil {
		t.Fatal(err)
	}
	hook.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- c.Run(run) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the crawler did not stop")
	}
	if hook.armed.Load() {
		t.Fatal("the crawler never called Next")
	}
	st, err := fr.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.InFlight != 0 || st.Queued != 1 {
		t.Fatalf("after the stop: %d in flight, %d queued; want the seed given back (0, 1)", st.InFlight, st.Queued)
	}
}

// refused is a one-site test server, a minute's context, a client of the
// tests' Redis and one of a user (named user) the ACL refuses every key
// the crawl uses, for the tests of a crawl that Redis refuses.
func refused(t *testing.T, user string) (ts *testserver.Server, ctx context.Context, rdb, narrow *redis.Client) {
	t.Helper()
	ts = serve(t, testserver.Profile{Name: t.Name(), Seed: 1, Sites: []testserver.SiteSpec{{Pages: 5, Links: 2}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	rdb = srv.Client()
	t.Cleanup(func() { rdb.Close() })
	narrow, err := srv.ClientAs(ctx, user, "resetkeys", "~other:*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { narrow.Close() })
	return ts, ctx, rdb, narrow
}

// refusedCrawler is a crawler of crawl name under prefix whose limiter
// uses client lim and frontier client fr (either may be refused), its
// robots.txt cache the tests' Redis rdb; and its frontier.
func refusedCrawler(t *testing.T, prefix, name string, rdb, lim, fr *redis.Client) (*Crawler, *frontier.Frontier) {
	t.Helper()
	l := limiter.New(lim, &limiter.Options{Prefix: prefix, NoRestartGuard: true})
	t.Cleanup(func() { l.Close() })
	rob := NewRobotsCache(rdb, l, 3, robots.CacheOptions{Prefix: prefix, UserAgent: "politebot/1.0"}, nil)
	f := frontier.New(fr, &frontier.Options{Prefix: prefix, Crawl: name, Visibility: time.Minute})
	return New(f, l, rob, Options{Workers: 2, UserAgent: "politebot/1.0", Timeout: 20 * time.Second}), f
}

// wantRefused runs c and fails the test unless Run ends within 30 s with
// ErrRefused wrapping Redis's refusal (of what: the test's words).
func wantRefused(t *testing.T, ctx context.Context, c *Crawler, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrRefused) || !redisacl.Refused(err) {
			t.Fatalf("Run = %v, want ErrRefused wrapping Redis's refusal", err)
		}
		t.Log(err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the crawl went on after Redis refused %s", what)
	}
}

// A crawl whose Redis user the ACL refuses the limiter's keys (the
// frontier's and robots.txt's allowed) ends with ErrRefused
// and Redis's NOPERM, at once, instead of putting the URL back and asking
// again forever; the seed is given back, nothing fetched.
func TestRefusedPermitEndsTheCrawl(t *testing.T) {
	ts, ctx, rdb, narrow := refused(t, "crawl-refused")
	c, fr := refusedCrawler(t, redistest.Prefix(t), "refused", rdb, narrow, rdb)
	if _, err := c.Seed(ctx, []string{ts.Sites()[0].URL + "/"}); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, ctx, c, "its permits")
	st, err := fr.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.InFlight != 0 || st.Queued != 1 || st.Done != 0 {
		t.Errorf("after the refusal: %d in flight, %d queued, %d done; want the seed given back (0, 1, 0)", st.InFlight, st.Queued, st.Done)
	}
	if n := ts.Stats().Sites[0].Requests; n != 0 {
		t.Errorf("the site saw %d requests, want none", n)
	}
}

// The same when the ACL refuses the frontier's keys once the crawl is
// seeded (the user's ACL changed under a running fleet): Run ends with
// ErrRefused rather than retrying the frontier forever.
func TestRefusedFrontierEndsTheCrawl(t *testing.T) {
	ts, ctx, rdb, narrow := refused(t, "crawl-refused-fr")
	seeder, _ := refusedCrawler(t, redistest.Prefix(t), "refusedfr", rdb, rdb, rdb)
	if _, err := seeder.Seed(ctx, []string{ts.Sites()[0].URL + "/"}); err != nil {
		t.Fatal(err)
	}
	c, _ := refusedCrawler(t, redistest.Prefix(t), "refusedfr", rdb, rdb, narrow)
	wantRefused(t, ctx, c, "its frontier")
}
