package frontier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/polite-crawler/polite/internal/keyname"
	"github.com/redis/go-redis/v9"
)

// ErrRunning refuses to delete a crawl with items in flight.
var ErrRunning = errors.New("frontier: crawl has items in flight")

// DeleteOptions say how Delete goes about it.
type DeleteOptions struct {
	// DryRun finds the keys and deletes nothing.
	DryRun bool
	// Force deletes a crawl with items in flight. Its workers then find
	// their items lost, and their processes the crawl deleted (the
	// tombstone; ErrCrawlGone): the few keys their last calls made again
	// get the crawl's TTL. Stop them first all the same.
	Force bool
}

// Deleted is what Delete found, and deleted unless DryRun.
type Deleted struct {
	Keys     int // the crawl's keys that exist
	Queues   int // per-site queue keys named by a ready set or found by the SCAN
	Shards   int
	InFlight int64
	Queued   int64 // URLs queued (not in flight) when Delete read the crawl
	// Registered is whether the registry had an entry for the crawl (it is
	// removed too).
	Registered bool
	// Complete is false when a SCAN for the crawl's keys stopped at
	// ScanBudget: keys it did not reach expire with the crawl's TTL.
	Complete bool
}

// Delete removes crawl's keys under prefix: its meta and scope, and every
// shard's keys (ready, inflight, counts, fly, rules, after, overflow, its
// seen buckets, and its sites' queues, found by the ready set and by a
// SCAN of the shard's keys bounded by ScanBudget), by UNLINK, and its
// registry entry. It leaves a tombstone (tombTTL), by which processes
// still working on the crawl learn that it was deleted (ErrCrawlGone)
// instead of putting its meta back. Keys shared by crawls (permits,
// robots.txt policies, site health) stay. It refuses, with an error wrapping ErrRunning, a
// crawl with items in flight unless o.Force, and returns an error wrapping
// ErrNoCrawl when the crawl has neither keys nor a registry entry.
func Delete(ctx context.Context, rdb redis.Cmdable, prefix, crawl string, o DeleteOptions) (Deleted, error) {
	var d Deleted
	for what, name := range map[string]string{"prefix": prefix, "crawl name": crawl} {
		if err := keyname.Check(what, name); err != nil {
			return d, fmt.Errorf("frontier: delete: %w", err)
		}
	}
	fail := func(err error) (Deleted, error) {
		return d, fmt.Errorf("frontier: delete crawl %s: %w", crawl, err)
	}
	f, m, err := Open(ctx, rdb, &Options{Prefix: prefix, Crawl: crawl})
	if err != nil && !errors.Is(err, ErrNoCrawl) {
		return fail(err)
	}
	keys := slotKeys{}
	crawlTag := "{crawl:" + crawl + "}:"
	keys.add(prefix+":"+crawlTag+"meta", prefix+":"+crawlTag+"scope")
	if f != nil {
		d.Shards = m.Shards
		lay, err := f.layout(ctx) // Open stored it
		if err != nil {
			return fail(err)
		}
		if d.InFlight, d.Queued, err = addShardKeys(ctx, rdb, lay, keys); err != nil {
			return fail(err)
		}
		if d.InFlight > 0 && !o.Force {
			return fail(fmt.Errorf("%w (%d): stop its workers first, or force it", ErrRunning, d.InFlight))
		}
	}
	if d.Complete, err = addScannedKeys(ctx, rdb, prefix, crawl, keys); err != nil {
		return fail(err)
	}
	reg := registryKey(prefix)
	tags, err := countKeys(ctx, rdb, reg, crawl, keys, &d)
	if err != nil {
		return fail(err)
	}
	if d.Keys == 0 && !d.Registered {
		return d, fmt.Errorf("%w: %s under prefix %s", ErrNoCrawl, crawl, prefix)
	}
	if o.DryRun {
		return d, nil
	}
	tomb := tombWorkLeft
	if f != nil && d.InFlight == 0 && d.Queued == 0 {
		tomb = tombDone
	}
	if err := unlinkKeys(ctx, rdb, reg, crawl, keys, tags, prefix+":"+crawlTag+"deleted", tomb, max(m.TTL, tombTTL)); err != nil {
		return fail(err)
	}
	return d, nil
}

// tombTTL is the least a tombstone Delete leaves in a deleted crawl's hash
// tag lasts; it lasts the crawl's TTL when that is longer, as a process
// of the crawl cut off from Redis that long still comes back to it. Its
// processes still running find it at their next refresh of the meta (at
// most a minute later, at once after a settlement of theirs found its item
// gone: keepMeta) and stop rather than put the meta back. A process that
// makes a crawl of the name anew removes it (layout).
const tombTTL = 10 * time.Minute

// The tombstone's value: whether the crawl had work left when Delete
// deleted it (URLs queued or in flight, or a crawl Delete could not read),
// or was done. A process that finds its crawl done and its meta gone tells
// by it whether it was deleted from under it (Frontier.WhyGone).
const (
	tombWorkLeft = "1"
	tombDone     = "done"
)

// slotKeys are keys by hash tag, so that each UNLINK stays in one slot.
type slotKeys map[string][]string

// add files each key under its hash tag.
func (s slotKeys) add(keys ...string) {
	for _, k := range keys {
		tag := k[strings.IndexByte(k, '{')+1 : strings.IndexByte(k, '}')]
		s[tag] = append(s[tag], k)
	}
}

// addShardKeys adds the keys of every shard of lay: its fixed keys,
// overflow, seen buckets, and the queues its ready set names. It returns
// the items in flight, read in the same round trip.
func addShardKeys(ctx context.Context, rdb redis.Cmdable, lay *layout, keys slotKeys) (inFlight, queued int64, err error) {
	pipe := rdb.Pipeline()
	read := queueStats(ctx, pipe, lay)
	ready := make([]*redis.StringSliceCmd, len(lay.shards))
	for i, sh := range lay.shards {
		ready[i] = pipe.ZRange(ctx, sh.keys[0], 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, err
	}
	for i, sh := range lay.shards {
		keys.add(sh.keys...)
		keys.add(sh.base + "overflow")
		for b := range seenBuckets {
			keys.add(sh.base + "seen:" + strconv.Itoa(b))
		}
		for _, site := range ready[i].Val() {
			if site != "" { // the sentinel (common.lua)
				keys.add(sh.base + "q:" + site)
			}
		}
	}
	st := read()
	return st.InFlight, st.Queued, nil
}

// addScannedKeys adds the keys only a SCAN finds, each SCAN bounded by
// ScanBudget: queues whose site left the ready set, shards of a crawl whose
// meta is gone, and the crawl's claims (Claim). complete is false when a
// SCAN stopped at its budget.
func addScannedKeys(ctx context.Context, rdb redis.Cmdable, prefix, crawl string, keys slotKeys) (complete bool, err error) {
	// Every key of a tag "s<n>/crawl:<crawl>".
	scanned, complete, err := scanKeys(ctx, rdb, globEscape(prefix+":{s")+"*"+globEscape("/crawl:"+crawl+"}:")+"*", ScanBudget)
	if err != nil {
		return false, err
	}
	for _, k := range scanned {
		if isShardKey(k, prefix, crawl) {
			keys.add(k)
		}
	}
	// Claims of once-per-crawl work (Claim), in the crawl's own tag.
	claims, claimsDone, err := scanKeys(ctx, rdb, globEscape(prefix+":{crawl:"+crawl+"}:claim:")+"*", ScanBudget)
	if err != nil {
		return false, err
	}
	keys.add(claims...)
	return complete && claimsDone, nil
}

// countKeys sorts and dedups keys, and fills d's Keys, Queues and
// Registered (whether reg has crawl) in one round trip. It returns the
// hash tags of keys.
func countKeys(ctx context.Context, rdb redis.Cmdable, reg, crawl string, keys slotKeys, d *Deleted) ([]string, error) {
	pipe := rdb.Pipeline()
	var exists []*redis.IntCmd
	tags := make([]string, 0, len(keys))
	for tag, ks := range keys {
		slices.Sort(ks)
		ks = slices.Compact(ks)
		keys[tag] = ks
		tags = append(tags, tag)
		exists = append(exists, pipe.Exists(ctx, ks...))
	}
	score := pipe.ZScore(ctx, reg, crawl)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	for i, tag := range tags {
		d.Keys += int(exists[i].Val())
		for _, k := range keys[tag] {
			if strings.Contains(k, "}:q:") {
				d.Queues++
			}
		}
	}
	d.Registered = score.Err() == nil
	return tags, nil
}

// unlinkKeys UNLINKs keys, tag by tag in chunks of 256, and removes crawl
// from the registry reg, in one round trip.
func unlinkKeys(ctx context.Context, rdb redis.Cmdable, reg, crawl string, keys slotKeys, tags []string, tomb, tombValue string, tombFor time.Duration) error {
	pipe := rdb.Pipeline()
	// Before the meta goes: a process refreshing it between the two finds
	// it still there, and the tombstone at its next refresh.
	pipe.Set(ctx, tomb, tombValue, tombFor)
	for _, tag := range tags {
		for ks := range slices.Chunk(keys[tag], 256) {
			pipe.Unlink(ctx, ks...)
		}
	}
	pipe.ZRem(ctx, reg, crawl)
	_, err := pipe.Exec(ctx)
	return err
}

// isShardKey is whether k is a key of a shard of crawl: its tag is
// "s<digits>/crawl:<crawl>".
func isShardKey(k, prefix, crawl string) bool {
	rest, ok := strings.CutPrefix(k, prefix+":{s")
	if !ok {
		return false
	}
	n, _, ok := strings.Cut(rest, "/crawl:"+crawl+"}:")
	if !ok || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
