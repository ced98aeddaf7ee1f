package frontier

import "sync/atomic"

// seenCacheSlots sizes a process's cache of fingerprints known seen: 2^17
// slots, 1 MiB.
const seenCacheSlots = 1 << 17

// seenCache remembers fingerprints that this process's calls have put in
// (or found in) the crawl's seen sets, so that a link it has sent once is
// not sent again: on a crawl most links on a page point at pages already
// seen, and each costs the script a SADD, its item's JSON and its bytes on
// the wire. Redis stays the authority: a miss is sent and decided there,
// and a hit only skips a URL that Redis already refused or admitted.
//
// It is direct-mapped (a fingerprint's slot is its low bits; a newer one
// evicts the older), so it is bounded and lock-free, and its table is made
// by the first fingerprint added: a Frontier that only reads (Open, List)
// costs nothing. A fingerprint is remembered only once the script that
// admitted it has answered. It is used only without a page limit: past
// one, a script may drop a new URL and forget it (common.lua admit), which
// then must be sent again. Nor does it remember the links of a call that
// dropped any at their site's queue bound (Options.MaxQueuedPerSite;
// Frontier.sent). It is emptied when Redis may have lost writes to the
// seen sets: a call finds its script or function gone (a restart
// without the data, a flush), a call fails (see Frontier.failed), or a
// shard answers from a new instance of the library (a restart from the
// append-only file or a snapshot, or a failover: the functions stay, the
// last writes may not; see noteInstance). Links it left out before the
// answer that tells (that call's own among them) are not sent again: a URL
// Redis lost then waits for the next page that links to it. Fingerprints
// sent before it was emptied are not remembered after (the call that sent
// them may have run before the loss). Fingerprint 0 always counts as seen
// (the seen sets' sentinel), so an empty slot's 0 is a correct hit.
type seenCache struct {
	table atomic.Pointer[[seenCacheSlots]atomic.Uint64]
	gen   atomic.Uint64 // how many times it was emptied
}

// generation is how many times the cache was emptied: add takes it as it
// was before the fingerprints were sent. A nil cache has 0.
func (c *seenCache) generation() uint64 {
	if c == nil {
		return 0
	}
	return c.gen.Load()
}

// has reports whether fp is known seen. A nil cache knows nothing.
func (c *seenCache) has(fp uint64) bool {
	if c == nil {
		return false
	}
	t := c.table.Load()
	return t != nil && t[fp&(seenCacheSlots-1)].Load() == fp
}

// add notes fps as seen, unless the cache was emptied since generation
// gen (see generation).
func (c *seenCache) add(fps []uint64, gen uint64) {
	if c == nil || len(fps) == 0 || c.gen.Load() != gen {
		return
	}
	t := c.table.Load()
	if t == nil {
		t = new([seenCacheSlots]atomic.Uint64)
		if !c.table.CompareAndSwap(nil, t) {
			t = c.table.Load()
		}
	}
	for _, fp := range fps {
		t[fp&(seenCacheSlots-1)].Store(fp)
	}
	if c.gen.Load() != gen {
		// Emptied while we wrote: our table may be one made after it.
		c.table.CompareAndSwap(t, nil)
	}
}

// clear forgets every fingerprint, and those sent before it (see add).
func (c *seenCache) clear() {
	if c != nil {
		c.gen.Add(1)
		c.table.Store(nil)
	}
}
