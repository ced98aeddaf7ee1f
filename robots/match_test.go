package robots

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The compiled matcher agrees with the backtracking reference on many rules
// and long paths over a small alphabet, where pieces occur often and the
// window index has crowded buckets, with the index built at once and late.
func TestCompiledMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(alphabet string, n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := range 300 {
		var rules []Rule
		for range 1 + rng.IntN(60) {
			rules = append(rules, Rule{Allow: rng.IntN(2) == 0, Pattern: "/" + word("ab/**$", 1+rng.IntN(14))})
		}
		path := "/" + word("ab/", rng.IntN(700))
		want := refAllowed(rules, path)
		for _, after := range []int{0, indexAfter} {
			m := compile(rules)
			m.indexAfter = after
			if got := (Policy{Rules: rules, m: m}).Allowed(path); got != want {
				t.Fatalf("case %d, index after %d: Allowed(%q) = %v, the reference says %v (rules %+v)", i, after, path, got, want, rules)
			}
		}
	}
}
