// Package clock is the crawler's wall clock: time.Now, except in a binary
// built with the tag skewtest, where it is shifted by the duration in
// CRAWLER_TEST_CLOCK_SKEW (e.g. "1h", "-1h"). Tests build such a binary to
// run worker processes whose clocks are wrong; a normal build ignores the
// variable.
//
// The shift keeps the monotonic reading, so durations between two readings
// are unchanged, as on a host whose clock is set wrong. It shows where a
// reading meets a time from elsewhere: Redis, an HTTP date.
package clock

import "time"

// skew is set by skew.go in skewtest builds.
var skew time.Duration

// Now is the wall clock, shifted by the test skew if any.
func Now() time.Time { return time.Now().Add(skew) }

// Skew is the shift Now applies: 0 except in skewtest builds.
func Skew() time.Duration { return skew }
