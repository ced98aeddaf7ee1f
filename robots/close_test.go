package robots

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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
	if err := <-got; !errors.Is(err, ErrClosed) || !errors.Is(err, ErrNotFetched) {
		t.Fatalf("Policy during Close: %v; want ErrClosed, as not fetched", err)
	}
	if n := rdb.Exists(ctx, k.lease, k.policy, k.fails).Val(); n != 0 {
		t.Fatalf("after Close: %d of lease, policy, fails left; want none (lease given back, no verdict stored)", n)
	}
	if _, err := c.Policy(ctx, mustURL(t, "http://other.example/")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Policy after Close: %v; want ErrClosed", err)
	}
	if err := c.Close(cctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
