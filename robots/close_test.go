package robots

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Close ends a robots.txt fetch under way, gives its fetch lease back
// (so another process need not wait it out), stores no verdict on the
// site, and refuses later loads.
func TestCloseEndsLoadsAndGivesLeaseBack(t *testing.T) {
	ctx := ctxT(t)
	asked := make(chan struct{}, 1)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		select { // a robots.txt that takes far longer than the test allows Close
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}))
	defer site.Close()
	rdb := srv.Client()
	defer rdb.Close()
	c := NewCache(rdb, &http.Client{Timeout: time.Minute}, &CacheOptions{Prefix: "t:" + t.Name(), FetchTimeout: 20 * time.Second})
	u := mustURL(t, site.URL+"/x")
	o, err := c.origin(u)
	if err != nil {
		t.Fatal(err)
	}
	k := c.keys(o)

	got := make(chan error, 1)
	go func() {
		_, err := c.Policy(ctx, u)
		got <- err
	}()
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("robots.txt never asked for")
	}
	if n := rdb.Exists(ctx, k.lease).Val(); n != 1 {
		t.Fatalf("no fetch lease while fetching (%d)", n)
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v: it waited for the fetch instead of ending it", d)
	}
	// Read at once: Close returns only once the load has given its lease back.
	if n := rdb.Exists(ctx, k.lease, k.policy, k.fails).Val(); n != 0 {
		t.Fatalf("after Close: %d of lease, policy, fails left; want none (lease given back, no verdict stored)", n)
	}
	if err := <-got; !errors.Is(err, ErrClosed) || !errors.Is(err, ErrNotFetched) {
		t.Fatalf("Policy during Close: %v; want ErrClosed, as not fetched", err)
	}
	if _, err := c.Policy(ctx, mustURL(t, "http://other.example/")); !errors.Is(err, ErrClosed) || !errors.Is(err, ErrNotFetched) {
		t.Fatalf("Policy after Close: %v; want ErrClosed, as not fetched", err)
	}
	if err := c.Close(cctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// closeOnIncr closes the cache when its command INCRs a robots.txt's
// failure count, and lets the command go on once Close has begun.
type closeOnIncr struct {
	c    **Cache
	once sync.Once
}

func (h *closeOnIncr) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *closeOnIncr) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *closeOnIncr) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "incr" && strings.HasSuffix(fmt.Sprint(cmd.Args()[1]), ":fails") {
			h.once.Do(func() {
				go (*h.c).Close(context.Background())
				for (*h.c).stop.Err() == nil {
					time.Sleep(time.Millisecond)
				}
			})
		}
		return next(ctx, cmd)
	}
}

// A verdict already fetched is recorded whole when Close comes in the
// middle of recording it: the failure count of an unreachable robots.txt
// gets its TTL, and the policy it backs off is stored.
func TestCloseWhileRecordingKeepsTheVerdictWhole(t *testing.T) {
	ctx := ctxT(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	u := mustURL(t, gone.URL+"/x")
	gone.Close() // refused: unreachable
	var c *Cache
	rdb := srv.Client()
	defer rdb.Close()
	rdb.AddHook(&closeOnIncr{c: &c})
	c = NewCache(rdb, &http.Client{Timeout: 10 * time.Second}, &CacheOptions{Prefix: "t:" + t.Name()})
	p, err := c.Policy(ctx, u)
	if err != nil || !p.Unreachable() {
		t.Fatalf("Policy: %+v, %v; want the unreachable verdict", p, err)
	}
	o, _ := c.origin(u)
	k := c.keys(o)
	if ttl := rdb.PTTL(ctx, k.fails).Val(); ttl <= 0 {
		t.Errorf("failure count's TTL %v: want one (else it outlives the process)", ttl)
	}
	if rdb.Exists(ctx, k.policy).Val() != 1 {
		t.Error("the unreachable policy was not stored")
	}
}
