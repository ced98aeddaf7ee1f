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

// call is the KEYS a script call takes: holders alone, which routes the
// call on a Cluster (every name carries the site's hash tag). The scripts
// make the other names from it (common.lua site_keys): a key passed is a
// string Redis makes for the call, some 1,400 instructions each.
func (k keys) call() []string {
	return []string{k.holders}
}
