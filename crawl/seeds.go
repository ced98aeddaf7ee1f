package crawl

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/polite-crawler/polite/frontier"
)

// ErrNoSeedReached is wrapped by Crawler.SeedsFailed's error: no seed this
// process gave could be fetched.
var ErrNoSeedReached = errors.New("crawl: no seed could be fetched")

// seedFates follows the seeds this process gave (Crawler.Seed), by their
// normalised URL (frontier.Item.URL), to the final verdict this process
// recorded on each. Only items at depth 0 are looked up (record).
type seedFates struct {
	mu    sync.Mutex
	order []string
	fate  map[string]*verdict // nil: not finished here (yet)
}

// gave notes seeds as this process's.
func (s *seedFates) gave(seeds []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fate == nil {
		s.fate = map[string]*verdict{}
	}
	for _, raw := range seeds {
		norm, _, err := frontier.Normalize(raw)
		if _, dup := s.fate[norm]; err != nil || dup {
			continue
		}
		s.fate[norm] = nil
		s.order = append(s.order, norm)
	}
}

// finished notes the final verdict on u, if u is one of the seeds.
func (s *seedFates) finished(u string, v verdict) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.fate[u]; ok && f == nil {
		s.fate[u] = &v
	}
}

// SeedsFailed returns an error wrapping ErrNoSeedReached, naming each seed
// with its outcome and cause ("http://127.0.0.9:1/: unreachable
// (connection refused)"), when this process gave seeds (Seed), finished
// every one of them itself, and each came to unreachable or
// failed_after_retries. It is nil otherwise: a seed answered (any status,
// a redirect, or a robots.txt that disallows it), or was finished by
// another process of the crawl or before this one began, or not yet (a
// stop). Call it after Run.
func (c *Crawler) SeedsFailed() error {
	s := &c.seeds
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) == 0 {
		return nil
	}
	why := make([]string, 0, len(s.order))
	for _, u := range s.order {
		v := s.fate[u]
		if v == nil || v.o != OutcomeUnreachable && v.o != OutcomeFailed {
			return nil
		}
		why = append(why, fmt.Sprintf("%s: %s (%s)", u, v.o, v.cause))
	}
	return fmt.Errorf("%w: %s", ErrNoSeedReached, strings.Join(why, "; "))
}
