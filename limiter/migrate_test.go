package limiter

import (
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/redistest"
)

// While a Cluster slot migrates, a site's keys can be split between the two
// nodes. Redis refuses a script that would run on such a split (TRYAGAIN)
// only for the keys it declares: on a Cluster every call declares all of
// them (keyArgs). Here holders has moved and owners has not; a Refresh
// named with holders alone would find no owners on the new node and drop
// the live entry (ErrPermitLost); declaring all, it is refused and the
// entry stays.
func TestClusterSlotMigrationLeavesPermitsAlone(t *testing.T) {
	rc, err := redistest.StartCluster(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	ctx := ctxT(t)
	cc := rc.Client()
	t.Cleanup(func() { cc.Close() })
	l := newLimiter(t, cc, Options{Mode: ModeAtomic, NoRestartGuard: true})
	site := "migrate.example"
	p, err := l.Acquire(ctx, site, 2)
	if err != nil {
		t.Fatal(err)
	}
	k := p.k
	src, err := cc.MasterForKey(ctx, k.holders)
	if err != nil {
		t.Fatal(err)
	}
	var dst *redis.Client
	for _, a := range rc.Addrs() {
		if a != src.Options().Addr {
			dst = redis.NewClient(&redis.Options{Addr: a})
		}
	}
	t.Cleanup(func() { dst.Close() })
	srcID, err := src.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	dstID, err := dst.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	slot, err := src.ClusterKeySlot(ctx, k.holders).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		node *redis.Client
		args []any
	}{
		{dst, []any{"CLUSTER", "SETSLOT", slot, "IMPORTING", srcID}},
		{src, []any{"CLUSTER", "SETSLOT", slot, "MIGRATING", dstID}},
	} {
		if err := c.node.Do(ctx, c.args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	host, port, _ := net.SplitHostPort(dst.Options().Addr)
	if err := src.Do(ctx, "MIGRATE", host, port, "", 0, 5000, "KEYS", k.holders).Err(); err != nil {
		t.Fatal(err)
	}
	err = p.Refresh(ctx)
	if errors.Is(err, ErrPermitLost) {
		t.Fatalf("Refresh mid-migration: %v: the live entry was dropped", err)
	}
	pipe := dst.Pipeline()
	pipe.Do(ctx, "ASKING")
	holders := pipe.ZRange(ctx, k.holders, 0, -1)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(holders.Val(), p.ID()) {
		t.Fatalf("holders on the importing node %v lack the permit %s (Refresh: %v)", holders.Val(), p.ID(), err)
	}
}
