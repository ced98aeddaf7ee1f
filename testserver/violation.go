package testserver

import (
	"fmt"
	"strings"
)

// Violation says what the site saw that a polite crawler never causes:
// more requests in flight at once than its Cap (MaxInFlight > Cap, or a
// request that started with Cap already in flight, OverCap > 0), a request
// for a path its robots.txt disallows (DisallowedHits > 0), or a gap
// between requests under the crawl delay it asks for (CrawlDelayMs > 0 and
// a MinGapMs measured below it). It returns each reason seen, in that
// order and joined by "; ", or "" when the site saw none of them. A
// fragile site's 503s, requests early after a Retry-After
// (EarlyAfterRetry), duplicates and robots.txt fetches are not violations.
func (s SiteStats) Violation() string {
	var why []string
	if s.MaxInFlight > s.Cap || s.OverCap > 0 {
		why = append(why, fmt.Sprintf("%d at once, cap %d (%d started over it)", s.MaxInFlight, s.Cap, s.OverCap))
	}
	if s.DisallowedHits > 0 {
		why = append(why, fmt.Sprintf("%d disallowed request(s)", s.DisallowedHits))
	}
	if s.CrawlDelayMs > 0 && s.MinGapMs >= 0 && s.MinGapMs < float64(s.CrawlDelayMs) {
		why = append(why, fmt.Sprintf("gap %.0f ms under crawl delay %d ms", s.MinGapMs, s.CrawlDelayMs))
	}
	return strings.Join(why, "; ")
}

// Violation says what an IP saw, over all the sites it serves, that a
// polite crawler never causes: a request that started with the profile's
// cap per IP already in flight (OverCap > 0; never when the profile sets
// no cap), or a request answered 421 because its Host names no site of
// the address it was sent to (Misdirected > 0). It returns each reason
// seen, joined by "; ", or "" when none. It is meant for the rows of
// Stats.Addresses; a listener (Stats.Listeners) has no cap of its own.
func (a AddrStats) Violation() string {
	var why []string
	if a.OverCap > 0 {
		why = append(why, fmt.Sprintf("%d request(s) started with cap %d in flight", a.OverCap, a.Cap))
	}
	if a.Misdirected > 0 {
		why = append(why, fmt.Sprintf("%d misdirected request(s) (421)", a.Misdirected))
	}
	return strings.Join(why, "; ")
}
