package robots

import (
	"container/list"
	"sync"
	"time"
)

// lru is a bounded map of site → policy with expiry: the in-process layer in
// front of Redis.
type lru struct {
	mu    sync.Mutex
	size  int
	order *list.List // front = most recently used; values are *lruEntry
	items map[string]*list.Element
}

type lruEntry struct {
	site    string
	policy  Policy
	expires time.Time
}

func newLRU(size int) *lru {
	return &lru{size: size, order: list.New(), items: map[string]*list.Element{}}
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
		c.order.Remove(el)
		delete(c.items, site)
		return Policy{}, false
	}
	c.order.MoveToFront(el)
	return e.policy, true
}

func (c *lru) put(site string, p Policy, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[site]; ok {
		el.Value = &lruEntry{site, p, expires}
		c.order.MoveToFront(el)
		return
	}
	c.items[site] = c.order.PushFront(&lruEntry{site, p, expires})
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry).site)
	}
}
