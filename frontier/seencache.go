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
// then must be sent again. It is emptied when Redis is found to have lost
// its scripts (a restart, a failover, a flush: see pipelined), since it may
// have lost the seen sets too. Fingerprint 0 always counts as seen (the seen
// sets' sentinel), so an empty slot's 0 is a correct hit.
type seenCache struct {
	table atomic.Pointer[[seenCacheSlots]atomic.Uint64]
}

// has reports whether fp is known seen. A nil cache knows nothing.
func (c *seenCache) has(fp uint64) bool {
	if c == nil {
		return false
	}
	t := c.table.Load()
	return t != nil && t[fp&(seenCacheSlots-1)].Load() == fp
}

// add notes fps as seen.
func (c *seenCache) add(fps []uint64) {
	if c == nil || len(fps) == 0 {
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
}

// clear forgets every fingerprint.
func (c *seenCache) clear() {
	if c != nil {
		c.table.Store(nil)
	}
}
