package robots

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// A policy of a 500 KiB robots.txt compiles to megabytes: the in-process
// cache must stay within its byte budget however many such sites it is
// given, as well as within its count, dropping the least recently used.
func TestLocalCacheStaysWithinItsByteBudget(t *testing.T) {
	big := Parse(200, shortPieceFile(""), "politebot")
	small := Parse(200, []byte("User-agent: *\nDisallow: /private/\n"), "politebot")
	const budget = 16 << 20
	c := newLRU(10000, budget)
	expires := time.Now().Add(time.Hour)
	for i := range 20 {
		c.put("http://big"+strconv.Itoa(i), big, expires)
		c.put("http://small"+strconv.Itoa(i), small, expires)
		if c.bytes > budget {
			t.Fatalf("after %d large policies (%d bytes each) the cache holds %d bytes; budget %d", i+1, big.size(), c.bytes, budget)
		}
	}
	sum := 0
	for el := c.order.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*lruEntry).bytes
	}
	if sum != c.bytes {
		t.Errorf("entries hold %d bytes, the cache counts %d", sum, c.bytes)
	}
	if _, ok := c.get("http://big19", time.Now()); !ok {
		t.Error("the newest large policy was dropped")
	}
	if _, ok := c.get("http://big0", time.Now()); ok {
		t.Error("the oldest large policy was kept")
	}
	tiny := newLRU(10, big.size()-1)
	if tiny.put("http://huge", big, expires); tiny.order.Len() != 0 || tiny.bytes != 0 {
		t.Errorf("a policy over the whole budget was kept: %d entries, %d bytes", tiny.order.Len(), tiny.bytes)
	}
}

// Policy.size is what the budget counts, so it must be about what a policy
// really holds: within a factor of two of the heap a parsed 500 KiB file
// of short rules keeps alive (about 5 MiB).
func TestPolicySizeIsAboutItsHeap(t *testing.T) {
	file := shortPieceFile("")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := Parse(200, file, "politebot")
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int(after.HeapAlloc) - int(before.HeapAlloc)
	t.Logf("Policy.size %d bytes, heap growth %d", p.size(), heap)
	if est := p.size(); est < heap/2 || est > 2*heap {
		t.Errorf("Policy.size says %d bytes; the heap grew by %d", est, heap)
	}
	runtime.KeepAlive(p)
}
