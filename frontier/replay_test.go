package frontier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// retried is a client whose read timeout (200ms) a stall of its Redis
// outlasts, so that go-redis sends a call again (MaxRetries) after Redis
// may have run it.
var retried = redis.Options{ReadTimeout: 200 * time.Millisecond, MaxRetries: 3}

// unretried is a client that does not send a call again itself (no
// retry of go-redis's) and gives up on an answer after 400ms: a call
// through a longer stall is sent again by the frontier (again).
var unretried = redis.Options{ReadTimeout: 400 * time.Millisecond, MaxRetries: -1}

// stalledFrontier is a frontier of one shard (o's other options) with n
// sites of one URL each, on a client of the package's Redis with ro's
// timeouts and retries.
func stalledFrontier(t *testing.T, ctx context.Context, n int, ro redis.Options, o Options) *Frontier {
	t.Helper()
	ro.Addr = srv.Addr
	rdb := redis.NewClient(&ro)
	t.Cleanup(func() { rdb.Close() })
	o.Crawl, o.Shards = fmt.Sprintf("stall.%d", crawls.Add(1)), 1
	f := New(rdb, &o)
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("http://st%d.example/", i))
	}
	if _, err := f.Add(ctx, 0, all...); err != nil {
		t.Fatal(err)
	}
	return f
}

// stall stops the package's redis-server for d while do runs, and waits
// until every try of do has had its answer.
func stall(t *testing.T, d time.Duration, do func()) {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := time.AfterFunc(d, func() { srv.Resume() })
	defer resumed.Stop()
	do()
	time.Sleep(d + 100*time.Millisecond) // past the stall, and every try run
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
}

// A Redis that stalls past the client's read timeout while a Next is on
// its way takes one item for it, not one per try: the tries after the
// first get the first one's answer (common.lua answered). Without that,
// each took another item that nobody held until the visibility timeout.
func TestStalledNextTakesOnce(t *testing.T) {
	ctx := ctxT(t)
	f := stalledFrontier(t, ctx, 8, retried, Options{})
	var it Item
	var err error
	stall(t, 500*time.Millisecond, func() { it, err = f.Next(ctx) })
	st, serr := f.Stats(ctx)
	if serr != nil {
		t.Fatal(serr)
	}
	if st.InFlight != 1 || err != nil {
		t.Fatalf("after one Next through a stall: %d items in flight, Next %+v, %v; want the one it took", st.InFlight, it, err)
	}
	if r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched}); r.Settled != nil {
		t.Fatalf("settling the item Next answered: %v", r.Settled)
	}
}

// A settlement that takes the next item, through the same stall, settles
// its item and takes one, and the result says so. With go-redis's retries,
// a try after the first answers as the first did, where it found its item
// gone ("no longer held", a turn not finished) and took another. Without
// them the settlement gets no answer, is sent once more (again), and that
// answer decides, where it said "not settled" of an item Redis settled
// when it woke.
func TestStalledSettleAnswersOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		ro   redis.Options
	}{{"go-redis retries", retried}, {"sent again", unretried}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			f := stalledFrontier(t, ctx, 8, c.ro, Options{})
			it, err := f.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var r Result
			stall(t, 500*time.Millisecond, func() { r = f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Next: true}) })
			st, err := f.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.Settled != nil || r.Unsettled || r.NextErr != nil || st.Done != 1 || st.InFlight != 1 {
				t.Fatalf("settling through a stall: %v (unsettled %v), next %v; stats %d done, %d in flight; want 1 and 1",
					r.Settled, r.Unsettled, r.NextErr, st.Done, st.InFlight)
			}
		})
	}
}

// proxy forwards loopback connections to Redis until it is shut: then it
// refuses new ones and cuts those it carries.
type proxy struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t *testing.T, to string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, r)
			p.mu.Unlock()
			go func() { io.Copy(r, c); r.Close() }()
			go func() { io.Copy(c, r); c.Close() }()
		}
	}()
	t.Cleanup(p.shut)
	return p
}

func (p *proxy) shut() {
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A settlement that could not be sent at all (Redis refuses connections)
// is not settled, and says so: the item comes back after the visibility
// timeout, and its turn is not its URL's last.
func TestSettleNotSentIsUnsettled(t *testing.T) {
	ctx := ctxT(t)
	p := newProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.l.Addr().String(), MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	f := New(rdb, &Options{Crawl: fmt.Sprintf("refused.%d", crawls.Add(1)), Shards: 1})
	if _, err := f.Add(ctx, 0, "http://a.example/1"); err != nil {
		t.Fatal(err)
	}
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.shut()
	r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched})
	if r.Settled == nil || !r.Unsettled {
		t.Fatalf("settling with Redis unreachable: %v, unsettled %v; want an error, unsettled", r.Settled, r.Unsettled)
	}
}

// A repeat answered from memory that says "no longer held" is what the
// first send found: the item was handed out again before it, and the
// settlement is unsettled, not taken as settled.
func TestRepeatNotHeldIsUnsettled(t *testing.T) {
	ctx := ctxT(t)
	// No retry of go-redis's: the first send gets no answer, and the
	// frontier's own repeat (again) gets the remembered one.
	f := stalledFrontier(t, ctx, 2, unretried, Options{Visibility: 300 * time.Millisecond})
	it, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	other, err := nextSoon(ctx, f, time.Second) // tidies: it is handed out again
	if err != nil {
		t.Fatal(err)
	}
	if other.URL != it.URL {
		if other, err = nextSoon(ctx, f, time.Second); err != nil || other.URL != it.URL {
			t.Fatalf("the expired item was not handed out again: %+v, %v", other, err)
		}
	}
	var r Result
	stall(t, 500*time.Millisecond, func() { r = f.Settle(ctx, Settlement{Item: it, Outcome: Fetched}) })
	if !errors.Is(r.Settled, ErrLost) || !r.Unsettled {
		t.Fatalf("the late settlement through a stall: %v, unsettled %v; want ErrLost, unsettled", r.Settled, r.Unsettled)
	}
}
