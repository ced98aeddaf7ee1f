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

// list is the KEYS a script call takes: the five of every call, then the
// health when the call may read or write it (health: adaptive politeness,
// or status), and the rules when it may apply the site's ceiling (rules: a
// contributor), the health then standing in its place whether read or
// not. Redis makes a string of every key a call names, some 1,400
// instructions each (common.lua), so a key the call will not touch is left
// out.
func (k keys) list(health, rules bool) []string {
	switch {
	case rules:
		return k.all()
	case health:
		return []string{k.holders, k.owners, k.counter, k.lock, k.next, k.health}
	}
	return []string{k.holders, k.owners, k.counter, k.lock, k.next}
}
