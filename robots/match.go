package robots

import (
	"slices"
	"strings"
	"sync"
)

// matcher is a policy's rules compiled once, so that one Allowed call costs
// O(L + Σ over distinct rules of one prefix compare) plus, for each distinct
// literal piece after a '*' that the path may contain, one linear search of
// the path — however hostile the file. L is the path's length.
//
// A pattern is split at its '*'s into literal pieces: p0 * p1 * … * pk,
// with an optional final '$'. It matches a path when p0 is a prefix of the
// path and p1 … pk occur after it in order, each as far left as it can go
// (greedy leftmost placement leaves the most room for what follows, so it
// finds a match whenever there is one, without backtracking); with '$' the
// last piece must end the path. Each search is strings.Index, linear in the
// path.
//
// Work is shared across rules: identical patterns are merged (Allow kept, as
// it wins the tie); identical pieces are searched once per call (the first
// occurrence is remembered, and reused whenever it lies at or after where the
// rule needs it); and when the path is long, a set of the path's 4-byte
// windows, built once per call, rejects a piece that cannot occur without
// searching for it. Rules are tried longest first, Allow first on a tie, and
// the first match decides (RFC 9309 2.2.2).
type matcher struct {
	src    []Rule // what it was compiled from: Allowed recompiles if Rules was replaced
	rules  []crule
	pieces []piece
}

// crule is one distinct pattern, compiled.
type crule struct {
	allow    bool
	prefix   string  // the literal before the first '*' (the whole pattern, less '$', if none)
	wild     bool    // the pattern has a '*'
	anchored bool    // a final '$' that constrains: the last piece must end the path
	pieces   []int32 // the non-empty literals after the first '*', as indexes into matcher.pieces
}

// piece is a distinct literal between '*'s, with sample hashes of its
// 4-byte windows for the path's window set (none when shorter than 4).
type piece struct {
	s     string
	grams []uint16
}

const (
	gramLen     = 4   // window length of the path's window set
	gramSamples = 8   // windows sampled per piece
	gramMinPath = 256 // shorter paths are searched directly: the set would cost more than it saves
)

// precedence orders rules as RFC 9309 applies them: the longest pattern
// first and, on equal length, Allow first, so the first rule that matches
// decides.
func precedence(a, b Rule) int {
	if len(a.Pattern) != len(b.Pattern) {
		return len(b.Pattern) - len(a.Pattern)
	}
	switch {
	case a.Allow == b.Allow:
		return 0
	case a.Allow:
		return -1
	}
	return 1
}

// compile builds the matcher for rules (normalised patterns, in any order).
func compile(rules []Rule) *matcher {
	m := &matcher{src: rules}
	sorted := slices.Clone(rules)
	slices.SortStableFunc(sorted, precedence)
	seen := make(map[string]bool, len(sorted))
	ids := map[string]int32{}
	for _, r := range sorted {
		if seen[r.Pattern] {
			continue // the same pattern sorted earlier: Allow if either was
		}
		seen[r.Pattern] = true
		pat, anchored := strings.CutSuffix(r.Pattern, "$")
		parts := strings.Split(pat, "*")
		c := crule{allow: r.Allow, prefix: parts[0], wild: len(parts) > 1}
		// '$' after a final '*' constrains nothing: "/a*$" is "/a*".
		c.anchored = anchored && (!c.wild || parts[len(parts)-1] != "")
		for _, s := range parts[1:] {
			if s == "" {
				continue
			}
			id, ok := ids[s]
			if !ok {
				id = int32(len(m.pieces))
				ids[s] = id
				m.pieces = append(m.pieces, piece{s: s, grams: sampleGrams(s)})
			}
			c.pieces = append(c.pieces, id)
		}
		m.rules = append(m.rules, c)
	}
	return m
}

// compiledFrom reports whether m was compiled from exactly this slice.
func (m *matcher) compiledFrom(rules []Rule) bool {
	return m != nil && len(m.src) == len(rules) && (len(rules) == 0 || &m.src[0] == &rules[0])
}

// allowed applies the rules to a canonical path: the first that matches
// decides; none matching allows.
func (m *matcher) allowed(path string) bool {
	var sc *scratch
	for i := range m.rules {
		r := &m.rules[i]
		if !strings.HasPrefix(path, r.prefix) {
			continue
		}
		if !r.wild {
			if !r.anchored || len(path) == len(r.prefix) {
				return r.allow
			}
			continue
		}
		if len(r.pieces) > 0 && sc == nil {
			sc = m.newScratch(path)
			defer scratchPool.Put(sc)
		}
		if m.matchPieces(r, path, sc) {
			return r.allow
		}
	}
	return true
}

// matchPieces places r's pieces after its prefix, each as far left as it
// goes; with '$' the last one must end the path.
func (m *matcher) matchPieces(r *crule, path string, sc *scratch) bool {
	pos := len(r.prefix)
	n := len(r.pieces)
	if r.anchored {
		n-- // the last piece is checked against the end
	}
	for _, id := range r.pieces[:n] {
		at := m.find(id, path, pos, sc)
		if at < 0 {
			return false
		}
		pos = at + len(m.pieces[id].s)
	}
	if r.anchored {
		last := m.pieces[r.pieces[n]].s
		return len(path)-len(last) >= pos && strings.HasSuffix(path, last)
	}
	return true
}

// find returns where piece id first occurs in path at or after pos, or -1.
func (m *matcher) find(id int32, path string, pos int, sc *scratch) int {
	first := sc.first[id]
	if first == unknown {
		first = -1
		if p := &m.pieces[id]; sc.mayContain(p) {
			first = int32(strings.Index(path, p.s))
		}
		sc.first[id] = first
	}
	switch {
	case first < 0:
		return -1 // nowhere in the path
	case int(first) >= pos:
		return int(first)
	}
	i := strings.Index(path[pos:], m.pieces[id].s)
	if i < 0 {
		return -1
	}
	return pos + i
}

const unknown = -2

// scratch is one call's memory: each piece's first occurrence (unknown
// until searched), and the set of the path's 4-byte windows when the path
// is long.
type scratch struct {
	first   []int32
	grams   [1 << 16 / 64]uint64
	useGram bool
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (m *matcher) newScratch(path string) *scratch {
	sc := scratchPool.Get().(*scratch)
	sc.first = slices.Grow(sc.first[:0], len(m.pieces))[:len(m.pieces)]
	for i := range sc.first {
		sc.first[i] = unknown
	}
	sc.useGram = len(path) >= gramMinPath
	if sc.useGram {
		clear(sc.grams[:])
		for i := 0; i+gramLen <= len(path); i++ {
			h := gramHash(path[i:])
			sc.grams[h>>6] |= 1 << (h & 63)
		}
	}
	return sc
}

// mayContain is false only when some sampled window of p is nowhere in the
// path, so p cannot occur in it.
func (sc *scratch) mayContain(p *piece) bool {
	if !sc.useGram {
		return true
	}
	for _, h := range p.grams {
		if sc.grams[h>>6]&(1<<(h&63)) == 0 {
			return false
		}
	}
	return true
}

// gramHash hashes s's first 4 bytes to 16 bits.
func gramHash(s string) uint16 {
	v := uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
	return uint16((v * 0x9E3779B1) >> 16)
}

// sampleGrams hashes up to gramSamples windows of s, spread from its first
// to its last.
func sampleGrams(s string) []uint16 {
	windows := len(s) - gramLen + 1
	if windows <= 0 {
		return nil
	}
	k := min(windows, gramSamples)
	g := make([]uint16, 0, k)
	for j := 0; j < k; j++ {
		at := 0
		if k > 1 {
			at = j * (windows - 1) / (k - 1)
		}
		g = append(g, gramHash(s[at:]))
	}
	slices.Sort(g)
	return slices.Compact(g)
}
