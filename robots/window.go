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
//
// A piece shorter than a window has none to sample, so it is looked up
// exactly instead (searchShort): the path's positions are also listed by
// byte and by pair of bytes, the pairs once more ordered by the byte that
// follows, and a binary search gives a 1-, 2- or 3-byte piece's first
// occurrence at or after any place in O(log len(path)). Tens of thousands
// of "/*xyz" rules then cost a binary search each, not a scan each (26 ms
// per check of an 8 KiB path before; BenchmarkAllowedShortPieces).

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

	// The exact index of short pieces (see searchShort), built with the
	// window index on the first search for a piece under gramLen bytes.
	short   bool
	byByte  [256 + 1]int32   // byte c is at at1[byByte[c]:byByte[c+1]]
	byPair  [1<<16 + 1]int32 // pair k starts at2[…] and at3[byPair[k]:byPair[k+1]]
	byThird [257 + 1]int32   // ordering by third's key, for at3
	at1     []int32          // positions, ascending per byte
	at2     []int32          // positions, ascending per pair
	at3     []int32          // positions, per pair ordered by third then position
	order   []int32          // positions by third, then position: at3's input
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (m *matcher) newScratch(path string) *scratch {
	sc := scratchPool.Get().(*scratch)
	sc.path, sc.scanned, sc.after, sc.index, sc.short = path, 0, m.indexAfter, false, false
	sc.first = slices.Grow(sc.first[:0], len(m.pieces))[:len(m.pieces)]
	for i := range sc.first {
		sc.first[i] = unknown
	}
	return sc
}

// buildIndex lists where each window of the path starts, by bucket.
func (sc *scratch) buildIndex() {
	sc.index = true
	p := sc.path
	sc.at = place(sc.bucket[:], sc.at, nil, len(p)-gramLen+1, func(i int32) int { return int(gramHash(p[i:])) })
}

// buildShort lists where each byte and each pair of bytes of the path is,
// and the pairs again ordered by the byte after them (see searchShort).
func (sc *scratch) buildShort() {
	sc.short = true
	p := sc.path
	pair := func(i int32) int { return pairKey(p[i:]) }
	sc.at1 = place(sc.byByte[:], sc.at1, nil, len(p), func(i int32) int { return int(p[i]) })
	sc.at2 = place(sc.byPair[:], sc.at2, nil, len(p)-1, pair)
	sc.order = place(sc.byThird[:], sc.order, nil, len(p)-1, sc.third)
	sc.at3 = place(sc.byPair[:], sc.at3, sc.order, len(p)-1, pair) // stable: by pair, then third, then position
}

// third is the byte after the pair at i, plus one, or 0 at the path's end.
func (sc *scratch) third(i int32) int {
	if int(i)+2 < len(sc.path) {
		return int(sc.path[i+2]) + 1
	}
	return 0
}

func pairKey(s string) int { return int(s[0])<<8 | int(s[1]) }

// place is a counting sort of the positions 0 … n-1 by key, taken in the
// given order (nil: ascending), which it keeps within a key: key k's
// positions are at[start[k]:start[k+1]] on return. It costs O(n +
// len(start)).
func place(start, at, order []int32, n int, key func(int32) int) []int32 {
	n = max(n, 0)
	at = slices.Grow(at[:0], n)[:n]
	clear(start)
	for i := range int32(n) {
		start[key(i)+1]++
	}
	for k := 1; k < len(start); k++ {
		start[k] += start[k-1]
	}
	for j := range int32(n) { // start[k] is the next free place in k's run
		i := j
		if order != nil {
			i = order[j]
		}
		k := key(i)
		at[start[k]] = i
		start[k]++
	}
	copy(start[1:], start[:len(start)-1]) // each now ends where the next begins: shift back to starts
	start[0] = 0
	return at
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
	if sc.index && len(p.s) < gramLen {
		return sc.searchShort(p.s, pos)
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

// searchShort finds a piece of 1 to 3 bytes, once the window index is
// built, by binary search in exact position lists, so in O(log len(path))
// whatever the path holds: a byte in at1; a pair in at2; a pair then a
// byte, xyz, in at3, where xy's positions are ordered by the byte after
// them and so those followed by z are one ascending run.
func (sc *scratch) searchShort(s string, pos int) int {
	if !sc.short {
		sc.buildShort()
	}
	var cands []int32
	switch len(s) {
	case 1:
		cands = sc.at1[sc.byByte[s[0]]:sc.byByte[int(s[0])+1]]
	case 2:
		k := pairKey(s)
		cands = sc.at2[sc.byPair[k]:sc.byPair[k+1]]
	default:
		k, z := pairKey(s), int(s[2])+1
		g := sc.at3[sc.byPair[k]:sc.byPair[k+1]]
		lo := sort.Search(len(g), func(i int) bool { return sc.third(g[i]) >= z })
		hi := lo + sort.Search(len(g)-lo, func(i int) bool { return sc.third(g[lo+i]) > z })
		cands = g[lo:hi]
	}
	i := sort.Search(len(cands), func(i int) bool { return int(cands[i]) >= pos })
	if i == len(cands) {
		return -1
	}
	return int(cands[i])
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
