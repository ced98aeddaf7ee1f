package redistest

import (
	"strconv"
	"strings"
	"sync"
)

// T is what Prefix needs of a *testing.T or *testing.B (an interface for
// the reason M is one).
type T interface {
	Name() string
	Cleanup(func())
}

// Prefix is a key prefix of the running test's own on a server that the
// package's tests share: "t:" and the test's name ('/' and ' ' as '.' and
// '_'), and for a run after the first of that name in the process (go test
// -count=N runs each test N times against the same server, where the keys
// of the run before would still count) ":run" and the run's number. Every
// call within one test returns the same prefix.
func Prefix(t T) string {
	prefixMu.Lock()
	defer prefixMu.Unlock()
	if p, ok := prefixes[t]; ok {
		return p
	}
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	p := "t:" + name
	if n := runs[name]; n > 0 {
		p += ":run" + strconv.Itoa(n+1)
	}
	runs[name]++
	prefixes[t] = p
	t.Cleanup(func() {
		prefixMu.Lock()
		delete(prefixes, t)
		prefixMu.Unlock()
	})
	return p
}

var (
	prefixMu sync.Mutex
	prefixes = map[T]string{}   // the running tests' prefixes
	runs     = map[string]int{} // by test name: runs so far
)
