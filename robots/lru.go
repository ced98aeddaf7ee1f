package robots

import (
	"container/list"
	"sync"
	"time"
	"unsafe"
)

// lru is a bounded map of site → policy with expiry: the in-process layer in
// front of Redis. It holds at most size policies and at most budget bytes
// of them, by Policy.size: a 500 KiB robots.txt compiles to megabytes, so a
// bound on the count alone does not bound memory.
type lru struct {
	mu     sync.Mutex
	size   int        // most entries
	budget int        // most bytes, the sum of the entries' Policy.size
	bytes  int        // that sum now
	order  *list.List // front = most recently used; values are *lruEntry
	items  map[string]*list.Element
}

type lruEntry struct {
	site    string
	policy  Policy
	expires time.Time
	bytes   int // policy.size()
}

func newLRU(size, budget int) *lru {
	return &lru{size: size, budget: budget, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru) get(site string, now time.Time) (Policy, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[site]
	if !ok {
		return Policy{}, false
	}
	e := el.Value.(*lruEntry)
	if !now.Before(e.expires) {
		c.remove(el)
		return Policy{}, false
	}
	c.order.MoveToFront(el)
	return e.policy, true
}

// put keeps p for site until expires, then drops the least recently used
// entries until both bounds hold. A policy larger than the whole budget is
// not kept (and replaces nothing but site's own entry).
func (c *lru) put(site string, p Policy, expires time.Time) {
	e := &lruEntry{site, p, expires, p.size()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[site]; ok {
		c.remove(el)
	}
	if e.bytes > c.budget {
		return
	}
	c.items[site] = c.order.PushFront(e)
	c.bytes += e.bytes
	for c.order.Len() > c.size || c.bytes > c.budget {
		c.remove(c.order.Back())
	}
}

func (c *lru) remove(el *list.Element) {
	e := el.Value.(*lruEntry)
	c.order.Remove(el)
	delete(c.items, e.site)
	c.bytes -= e.bytes
}

// size is about how many bytes p holds: its strings, its rules and their
// compiled form (the figure the in-process cache budgets by).
func (p Policy) size() int {
	n := int(unsafe.Sizeof(p)) + cap(p.Rules)*int(unsafe.Sizeof(Rule{})) + cap(p.Sitemaps)*int(unsafe.Sizeof(""))
	for _, s := range p.Sitemaps {
		n += len(s)
	}
	for _, r := range p.Rules {
		n += len(r.Pattern)
	}
	return n + p.m.size()
}

// size is about how many bytes m holds beyond the patterns it was compiled
// from (its prefixes and pieces are substrings of them).
func (m *matcher) size() int {
	if m == nil {
		return 0
	}
	n := int(unsafe.Sizeof(*m)) + cap(m.rules)*int(unsafe.Sizeof(crule{})) + cap(m.pieces)*int(unsafe.Sizeof(piece{}))
	for i := range m.rules {
		n += allocSize(cap(m.rules[i].pieces) * 4)
	}
	for i := range m.pieces {
		n += allocSize(cap(m.pieces[i].grams) * int(unsafe.Sizeof(gram{})))
	}
	return n
}

// allocSize is n rounded up as the allocator's small size classes round.
func allocSize(n int) int {
	if n == 0 {
		return 0
	}
	return (n + 15) &^ 15
}
