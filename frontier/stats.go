package frontier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stats are a crawl's counts, summed over its shards.
type Stats struct {
	Queued, InFlight, Done, Failed, Admitted, Seen int64
	Skipped                                        int64 // of Done: settled as Skipped
	// Over is how many new URLs past the page limit wait in the overflow
	// for a process with a higher limit (see Options.MaxPages); Dropped,
	// how often a new URL was dropped because the overflow was full (not
	// remembered: a URL found again counts again).
	Over, Dropped int64
	// SiteFull is how many links were dropped because their site's queue
	// was at its bound (Options.MaxQueuedPerSite). After the first such
	// link of a page, the page's other links to the site are dropped
	// unlooked-at, so links to URLs already seen count too.
	SiteFull int64
	// SeenMostInShard is the most URLs seen in one shard: a site's URLs
	// all go to one shard, so one big site fills its shard's seen sets
	// alone (see CompactSeen).
	SeenMostInShard int64
	Shards          int // the crawl's shard count
	// Held is, when queued sites wait and none may be tried now, the one
	// the frontier hands out soonest; zero when a site is ready, or when
	// every site with URLs queued is at its cap.
	Held Held
}

// Held is a site the frontier holds back, and for how long yet: its crawl
// delay since its last fetch settled, or a deferral by a worker that found
// it held off (see limiter.Limiter.Status for why).
type Held struct {
	Site string
	In   time.Duration
}

// Stats reads the crawl's counts, in one round trip.
func (f *Frontier) Stats(ctx context.Context) (Stats, error) {
	lay, err := f.layout(ctx)
	if err != nil {
		return Stats{}, err
	}
	pipe := f.rdb.Pipeline()
	read := queueStats(ctx, pipe, lay)
	if _, err := pipe.Exec(ctx); err != nil {
		return Stats{}, fmt.Errorf("frontier: stats: %w", err)
	}
	return read(), nil
}

// queueStats queues on pipe the reads of lay's counts; once pipe has run,
// the function it returns sums them.
func queueStats(ctx context.Context, pipe redis.Pipeliner, lay *layout) func() Stats {
	counts := make([]*redis.MapStringStringCmd, len(lay.shards))
	inflight := make([]*redis.IntCmd, len(lay.shards))
	first := make([]*redis.ZSliceCmd, len(lay.shards))
	now := pipe.Time(ctx)
	for i, sh := range lay.shards {
		counts[i] = pipe.HGetAll(ctx, sh.keys[2])
		inflight[i] = pipe.ZCount(ctx, sh.keys[1], "-inf", inflightMax)
		first[i] = pipe.ZRangeWithScores(ctx, sh.keys[0], 0, 0)
	}
	return func() Stats {
		st := Stats{Shards: len(lay.shards), Held: held(first, now.Val())}
		for i := range lay.shards {
			c := counts[i].Val()
			n := func(k string) int64 { v, _ := strconv.ParseInt(c[k], 10, 64); return v }
			st.Queued += n("admitted") - n("done") - n("failed") - inflight[i].Val()
			st.Done += n("done")
			st.Failed += n("failed")
			st.Admitted += n("admitted")
			st.Seen += n("admitted") + n("over")
			st.SeenMostInShard = max(st.SeenMostInShard, n("admitted")+n("over"))
			st.Skipped += n("skipped")
			st.Over += n("over")
			st.Dropped += n("dropped")
			st.SiteFull += n("full")
			st.InFlight += inflight[i].Val()
		}
		return st
	}
}

// held is the site of the lowest first ready score of the shards when it
// lies in the future (see Stats.Held). Sentinels and parked sites score
// at least parked.
func held(first []*redis.ZSliceCmd, now time.Time) Held {
	var h Held
	soonest := float64(parked)
	for _, c := range first {
		if z := c.Val(); len(z) > 0 && z[0].Score < soonest {
			soonest, h.Site = z[0].Score, z[0].Member.(string)
		}
	}
	wait := soonest - float64(now.UnixMilli())
	if h.Site == "" || wait <= 0.5 { // common.lua's SOON: ready now
		return Held{}
	}
	h.In = time.Duration(wait * float64(time.Millisecond))
	return h
}

// SiteQueue is one site's backlog.
type SiteQueue struct {
	Site    string
	Queued  int64
	ReadyIn time.Duration // until the site may be tried (0: now, or when Full)
	// Full is a site whose items in flight are at its cap: it is ready
	// again when one of them settles.
	Full bool
}

// Sites lists the sites with queued URLs, those at their cap among them.
func (f *Frontier) Sites(ctx context.Context) ([]SiteQueue, error) {
	lay, err := f.layout(ctx)
	if err != nil {
		return nil, err
	}
	pipe := f.rdb.Pipeline()
	now := pipe.Time(ctx)
	ready := make([]*redis.ZSliceCmd, len(lay.shards))
	for i, sh := range lay.shards {
		ready[i] = pipe.ZRangeWithScores(ctx, sh.keys[0], 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("frontier: sites: %w", err)
	}
	var out []SiteQueue
	pipe = f.rdb.Pipeline()
	var lens []*redis.IntCmd
	for i, sh := range lay.shards {
		for _, z := range ready[i].Val() {
			site := z.Member.(string)
			if site == "" { // the sentinel (common.lua)
				continue
			}
			q := SiteQueue{Site: site, Full: z.Score >= parked}
			if !q.Full {
				q.ReadyIn = max(time.Duration(int64(z.Score)-now.Val().UnixMilli())*time.Millisecond, 0)
			}
			out = append(out, q)
			lens = append(lens, pipe.LLen(ctx, sh.base+"q:"+site))
		}
	}
	if len(out) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("frontier: sites: %w", err)
		}
	}
	kept := out[:0]
	for i := range out {
		// A site parked at its cap may have nothing queued (take parks
		// it without asking): not listed.
		if out[i].Queued = lens[i].Val(); out[i].Queued > 0 {
			kept = append(kept, out[i])
		}
	}
	return kept, nil
}

// Footprint is the memory the crawl's seen sets take in Redis.
type Footprint struct{ Keys, Bytes, URLs int64 }

// SeenFootprint measures it (MEMORY USAGE of every seen key, all of its
// members counted), in one round trip; URLs is Stats.Seen.
func (f *Frontier) SeenFootprint(ctx context.Context) (Footprint, error) {
	lay, err := f.layout(ctx)
	if err != nil {
		return Footprint{}, err
	}
	pipe := f.rdb.Pipeline()
	var use []*redis.IntCmd
	seen := make([]*redis.SliceCmd, len(lay.shards))
	for i, sh := range lay.shards {
		seen[i] = pipe.HMGet(ctx, sh.keys[2], "admitted", "over")
		for b := range seenBuckets {
			use = append(use, pipe.MemoryUsage(ctx, sh.base+"seen:"+strconv.Itoa(b), 0))
		}
	}
	pipe.Exec(ctx)
	var fp Footprint
	for _, c := range use {
		switch n, err := c.Result(); {
		case err == nil:
			fp.Keys++
			fp.Bytes += n
		case !errors.Is(err, redis.Nil):
			return Footprint{}, fmt.Errorf("frontier: seen footprint: %w", err)
		}
	}
	for _, c := range seen {
		v, err := c.Result()
		if err != nil {
			return Footprint{}, fmt.Errorf("frontier: seen footprint: %w", err)
		}
		fp.URLs += num(v[0]) + num(v[1])
	}
	return fp, nil
}
