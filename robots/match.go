package robots

import (
	"slices"
	"strings"
)

// matcher is a policy's rules compiled once, so that one Allowed call costs
// at most O(L) plus, per distinct rule, one prefix compare and one linear
// search of the path per literal piece after a '*' — however hostile the
// file — and usually far less: a piece's first occurrence, found once per
// call, answers most searches. L is the path's length.
//
// A pattern is split at its '*'s into literal pieces: p0 * p1 * … * pk,
// with an optional final '$'. It matches a path when p0 is a prefix of the
// path and p1 … pk occur after it in order, each as far left as it can go
// (greedy leftmost placement leaves the most room for what follows, so it
// finds a match whenever there is one, without backtracking); with '$' the
// last piece must end the path. Each search is linear in the path.
//
// Work is shared across rules: identical patterns are merged (Allow kept, as
// it wins the tie); identical pieces are searched once per call (the first
// occurrence is remembered, and reused whenever it lies at or after where the
// rule needs it); and once a check has searched a few path lengths, an index
// of the path's 4-byte windows, built once per call, finds a piece by its
// rarest window, or that it is absent, without scanning the path, and
// exact lists of its bytes and pairs of bytes find a shorter piece by
// binary search (see window.go). Rules are tried longest first, Allow first on a tie, and the
// first match decides (RFC 9309 2.2.2).
//
// Measured on a 500 KiB file of 4,400 distinct "/*" + 100 'a' + n lines
// and an 8 KiB path: ~0.1 ms for a path of 'a's, ~0.4 ms for a path of
// "aaaa<n>/" made so that a thousand pieces almost occur
// (BenchmarkAllowedHostile, BenchmarkAllowedCrafted); a backtracking
// matcher took 4–14 s.
type matcher struct {
	src        []Rule // what it was compiled from: Allowed recompiles if Rules was replaced
	rules      []crule
	pieces     []piece
	indexAfter int // see scratch.after; tests lower it to reach the index with few rules
}

// crule is one distinct pattern, compiled.
type crule struct {
	allow    bool
	prefix   string  // the literal before the first '*' (the whole pattern, less '$', if none)
	wild     bool    // the pattern has a '*'
	anchored bool    // a final '$' that constrains: the last piece must end the path
	pieces   []int32 // the non-empty literals after the first '*', as indexes into matcher.pieces
}

// piece is a distinct literal between '*'s, with some of its 4-byte windows
// for the path's window index (none when shorter than 4: see searchShort).
type piece struct {
	s     string
	grams []gram
}

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
	m := &matcher{src: rules, indexAfter: indexAfter}
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
	var sc *scratch // taken from the pool when a rule first needs a search
	allow := true
	for i := range m.rules {
		r := &m.rules[i]
		if !strings.HasPrefix(path, r.prefix) {
			continue
		}
		if !r.wild {
			if !r.anchored || len(path) == len(r.prefix) {
				allow = r.allow
				break
			}
			continue
		}
		if len(r.pieces) > 0 && sc == nil {
			sc = m.newScratch(path)
		}
		if m.matchPieces(r, path, sc) {
			allow = r.allow
			break
		}
	}
	if sc != nil {
		sc.path = "" // the pool keeps no path alive
		scratchPool.Put(sc)
	}
	return allow
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
		at := m.find(id, pos, sc)
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
