package limiter

// keys are the Redis names of one site's semaphore. Every name carries the
// site as a hash tag, so on Redis Cluster they share one slot and one node.
type keys struct {
	site                                 string
	holders, owners, counter, lock, next string
	rules                                string // the ceiling's contributors (ceiling.lua)
	health                               string // the site's health record (adaptive.lua)
}

func keysFor(prefix, site string) keys {
	base := prefix + ":{" + site + "}:"
	return keys{
		site:    site,
		holders: base + "holders",
		owners:  base + "owners",
		counter: base + "counter",
		lock:    base + "lock",
		next:    base + "next",
		rules:   base + "rules",
		health:  base + "health",
	}
}

// all is every key of the site, in the order common.lua names them.
func (k keys) all() []string {
	return []string{k.holders, k.owners, k.counter, k.lock, k.next, k.health, k.rules}
}

// keyArgs is the KEYS a script call takes. Where keys never move (a
// single node, a Ring: luafn.Slotless), holders alone: the scripts make
// the other names from it (common.lua site_keys), where a key passed is a
// string Redis makes for the call, some 1,400 instructions each. On a
// Cluster every key, because while a slot migrates Redis refuses a script
// that would run half on either node (TRYAGAIN, which the client retries)
// only for the keys it declares: given holders alone, a check could find
// holders moved and owners not yet, and drop a live entry.
func (l *Limiter) keyArgs(k keys) []string {
	if l.oneKey {
		return []string{k.holders}
	}
	return k.all()
}
