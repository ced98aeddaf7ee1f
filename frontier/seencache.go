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
// evicts the older), so it is bounded and lock-free. A fingerprint is
// remembered only once the script that admitted it has answered. It is
// used only without a page limit: past one, a script may drop a new URL
// and forget it (common.lua admit), which then must be sent again.
// Fingerprint 0 always counts as seen (the seen sets' sentinel), so an
// empty slot's 0 is a correct hit.
type seenCache struct {
	slots []atomic.Uint64
}

func newSeenCache() *seenCache {
	return &seenCache{slots: make([]atomic.Uint64, seenCacheSlots)}
}

// has reports whether fp is known seen. A nil cache knows nothing.
func (c *seenCache) has(fp uint64) bool {
	return c != nil && c.slots[fp&(seenCacheSlots-1)].Load() == fp
}

// add notes fps as seen.
func (c *seenCache) add(fps []uint64) {
	if c == nil {
		return
	}
	for _, fp := range fps {
		c.slots[fp&(seenCacheSlots-1)].Store(fp)
	}
}
