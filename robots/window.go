package robots

import (
	"slices"
	"sort"
	"strings"
	"sync"
)

// The window index: once a check of a long path has searched indexAfter
// times the path's length (the policy has many wildcard pieces), the path's
// 4-byte windows are listed by where they start, bucketed by a hash of the
// window. A piece is then looked for only where its rarest sampled window
// is: if a sampled window's bucket is empty the piece is not in the path;
// if the rarest bucket is small, each position in it is a candidate to
// compare; if it is large, strings.Index is cheaper and is used. Either way
// a search costs at most about one strings.Index, and usually far less.

const (
	gramLen     = 4   // window length
	gramSamples = 8   // windows sampled per piece, last to first
	gramBits    = 14  // hash bits: 16,384 buckets
	gramMinPath = 256 // shorter paths are searched directly
	indexAfter  = 4   // path lengths searched in one check before the index is built
	unknown     = int32(-2)
)

// gram is one sampled window of a piece: its hash and where it starts in
// the piece.
type gram struct {
	h   uint16
	off int32
}

// scratch is one call's memory: each piece's first occurrence (unknown
// until searched) and, for a long path once enough of it was searched, the
// window index.
type scratch struct {
	first   []int32
	path    string
	scanned int                    // bytes given to strings.Index so far
	after   int                    // build the index once after × len(path) bytes were scanned
	index   bool                   // built
	bucket  [1<<gramBits + 1]int32 // bucket b's positions are at[bucket[b]:bucket[b+1]]
	at      []int32                // window starts, ascending within a bucket
	hashes  []uint16
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (m *matcher) newScratch(path string) *scratch {
	sc := scratchPool.Get().(*scratch)
	sc.path, sc.scanned, sc.after, sc.index = path, 0, m.indexAfter, false
	sc.first = slices.Grow(sc.first[:0], len(m.pieces))[:len(m.pieces)]
	for i := range sc.first {
		sc.first[i] = unknown
	}
	return sc
}

// buildIndex lists where each window of the path starts, by bucket.
func (sc *scratch) buildIndex() {
	sc.index = true
	n := len(sc.path) - gramLen + 1
	sc.hashes = slices.Grow(sc.hashes[:0], n)[:n]
	sc.at = slices.Grow(sc.at[:0], n)[:n]
	clear(sc.bucket[:])
	for i := range n { // count, then place: a counting sort keeps positions ascending
		h := gramHash(sc.path[i:])
		sc.hashes[i] = h
		sc.bucket[h+1]++
	}
	for b := 1; b < len(sc.bucket); b++ {
		sc.bucket[b] += sc.bucket[b-1]
	}
	for i, h := range sc.hashes { // bucket[h] is the next free place in h's run
		sc.at[sc.bucket[h]] = int32(i)
		sc.bucket[h]++
	}
	copy(sc.bucket[1:], sc.bucket[:len(sc.bucket)-1]) // each now ends where the next begins: shift back to starts
	sc.bucket[0] = 0
}

// find returns where piece id first occurs in the path at or after pos, or
// -1.
func (m *matcher) find(id int32, pos int, sc *scratch) int {
	first := sc.first[id]
	if first == unknown {
		first = int32(sc.search(&m.pieces[id], 0))
		sc.first[id] = first
	}
	switch {
	case first < 0:
		return -1 // nowhere in the path
	case int(first) >= pos:
		return int(first)
	}
	return sc.search(&m.pieces[id], pos)
}

// search returns where p first occurs in the path at or after pos, or -1.
func (sc *scratch) search(p *piece, pos int) int {
	rest := len(sc.path) - pos
	if !sc.index && sc.scanned >= sc.after*len(sc.path) && len(sc.path) >= gramMinPath {
		sc.buildIndex()
	}
	if sc.index && len(p.grams) > 0 {
		lo, hi, off := int32(0), int32(len(sc.at)+1), 0
		for _, g := range p.grams {
			l, h := sc.bucket[g.h], sc.bucket[g.h+1]
			if l == h {
				return -1 // a window of p is nowhere in the path
			}
			if h-l < hi-lo {
				lo, hi, off = l, h, int(g.off)
			}
		}
		cands := sc.at[lo:hi]
		if len(cands)*len(p.s) <= rest { // comparing at each candidate is cheaper than a search
			i := sort.Search(len(cands), func(i int) bool { return int(cands[i])-off >= pos })
			for _, at := range cands[i:] {
				start := int(at) - off
				if start+len(p.s) > len(sc.path) {
					break // so are all later ones
				}
				if sc.path[start:start+len(p.s)] == p.s {
					return start
				}
			}
			return -1
		}
	}
	sc.scanned += rest
	i := strings.Index(sc.path[pos:], p.s)
	if i < 0 {
		return -1
	}
	return pos + i
}

// gramHash hashes s's first 4 bytes to gramBits bits.
func gramHash(s string) uint16 {
	v := uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
	return uint16((v * 0x9E3779B1) >> (32 - gramBits))
}

// sampleGrams picks up to gramSamples windows of s, spread from its last to
// its first: the end of a piece tells pieces apart more often than its start.
func sampleGrams(s string) []gram {
	windows := len(s) - gramLen + 1
	if windows <= 0 {
		return nil
	}
	k := min(windows, gramSamples)
	g := make([]gram, 0, k)
	for j := range k {
		at := windows - 1
		if k > 1 {
			at -= j * (windows - 1) / (k - 1)
		}
		g = append(g, gram{gramHash(s[at:]), int32(at)})
	}
	return g
}
