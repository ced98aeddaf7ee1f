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

// all is the KEYS list every script takes, in the order common.lua names.
func (k keys) all() []string {
	return []string{k.holders, k.owners, k.counter, k.lock, k.next, k.rules, k.health}
}
