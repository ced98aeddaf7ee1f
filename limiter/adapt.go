package limiter

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/internal/luanums"
)

// Adaptive politeness: a site that slows down or fails gets fewer requests
// from the whole fleet. Each fetch's outcome (Permit.SetOutcome) is recorded
// by the script that releases its permit, in the site's health record
// beside its semaphore (same hash tag: <prefix>:{<site>}:health), and a
// controller in that script sets the site's effective cap (1 up to the
// rule's limit) and extra delay, which every acquire, waiter check and
// release of every process applies on top of the rule (the lower limit, the
// longer delay). The record costs no round trip: acquire reads it in the
// MGET it already makes, release rewrites it in its own script.
//
// The controller, per recorded outcome (defaults in Adaptive):
//
//   - Trouble is the smoothed time to first byte (an EWMA of ordinary
//     responses, weight Smoothing) above Slowdown times the best recent one
//     and MinExcess above it, for SlowRun samples in a row (the sample
//     itself slow too; just after an increase, the samples alone), or a
//     429 or 503 without Retry-After, or errors (5xx, 429 with
//     Retry-After, timeouts, connection errors) above ErrorShare of Window
//     outcomes.
//   - On trouble the cap halves (at least 1); at 1 an extra delay starts at
//     FirstDelay and doubles up to MaxDelay. Then the outcomes of the
//     fetches in flight under the old cap, and Cooldown more, are not
//     counted as trouble again.
//   - When healthy the extra delay halves first (below FirstDelay it is 0),
//     then the cap grows by one after each window of healthy outcomes. The
//     window starts at Window; an increase followed by trouble doubles it
//     (up to MaxWindow), an increase that held for a window halves it again.
//     So a site fine at 1 but not at 2 is probed ever more rarely.
//   - A 429 or 503 without Retry-After holds the whole fleet off the site
//     (as Backoff does) for Backoff, doubling with each repeat up to
//     MaxBackoff, ±10 % jitter; its level is forgiven after Forgive without
//     one. A 429/503 with Retry-After holds off as the site asks (the
//     caller's Backoff, as without adaptive politeness), and counts as an
//     error.
//   - The best recent time is the lowest smoothed one; a site slow for
//     BestMemory on end has got slower for good, and its best re-bases.
//   - The record expires Forgive after its last write (or its backoff's
//     end): a site left alone that long starts afresh at its full cap.
//
// Recovery: a site that recovers sheds its extra delay in a few fetches
// (one halving per healthy fetch) and then gains one slot per Window
// healthy fetches: from 1 to a cap of 3, 2 × Window = 100 fetches by
// default, more (up to MaxWindow per step) if its earlier probes failed.
// Nothing ever raises the effective cap above the rule's limit.

// OutcomeClass is what a fetch came to, for the site's health.
type OutcomeClass int

const (
	// OutcomeNone records nothing (the permit was not used for a fetch).
	OutcomeNone OutcomeClass = iota
	// OutcomeOK is a response other than those below (2xx, 3xx, 4xx).
	OutcomeOK
	// OutcomeThrottled is a 429 or 503 without Retry-After: the fleet is
	// held off the site for a backoff that doubles with each repeat.
	OutcomeThrottled
	// OutcomeRetryAfter is a 429 or 503 with Retry-After (the caller holds
	// the fleet off as asked, with Backoff): an error, no doubling.
	OutcomeRetryAfter
	// OutcomeServerError is any other 5xx.
	OutcomeServerError
	// OutcomeTimeout is a request that timed out.
	OutcomeTimeout
	// OutcomeConnError is a request that failed to connect or was cut off.
	OutcomeConnError
)

var outcomeNames = [...]string{"none", "ok", "throttled", "retry-after", "server-error", "timeout", "conn-error"}

func (c OutcomeClass) String() string {
	if c >= 0 && int(c) < len(outcomeNames) {
		return outcomeNames[c]
	}
	return "OutcomeClass(" + strconv.Itoa(int(c)) + ")"
}

// Outcome is what a fetch under a permit came to: its class and its times
// from the request written to the first byte of the response and to its
// last (0 or less: not measured).
type Outcome struct {
	Class OutcomeClass
	TTFB  time.Duration
	TTLB  time.Duration
}

// Adaptive configures adaptive politeness. A nil *Adaptive, and every zero
// field, means the default named on the field.
type Adaptive struct {
	// Off turns adaptive politeness off: limits and delays are the rules'
	// alone and nothing is recorded (no Redis command more than without).
	Off bool
	// Slowdown is how many times its best recent time to first byte a
	// site's smoothed one must reach to count as slow. Default 2.5 (a
	// fragile site three times slower with two requests in flight reads as
	// slow at two).
	Slowdown float64
	// MinExcess is how far above its best the smoothed time must also be:
	// a 5 ms site at 15 ms is not suffering. Default 50ms.
	MinExcess time.Duration
	// SlowRun is how many slow samples in a row count as trouble (one
	// stall of a busy worker does not). Default 2.
	SlowRun int
	// Smoothing is the weight of a new sample in the smoothed times
	// (EWMA), in (0, 1]. Default 0.25.
	Smoothing float64
	// ErrorShare is the share of Window outcomes that may be errors (5xx,
	// timeouts, connection errors) before they count as trouble. Default
	// 0.05 (3 in 50).
	ErrorShare float64
	// Window is the number of outcomes errors are counted over, and of
	// healthy outcomes before the cap grows by one. Default 50.
	Window int
	// MaxWindow bounds the window after failed increases. Default 16 ×
	// Window.
	MaxWindow int
	// Cooldown is how many outcomes beyond those in flight under the old
	// cap are not counted as trouble after a decrease. Default 3.
	Cooldown int
	// FirstDelay is the extra delay added when trouble finds the cap at 1.
	// Default 250ms.
	FirstDelay time.Duration
	// MaxDelay bounds the extra delay (the crawler passes
	// --max-crawl-delay). Default 30s; at most the package's MaxDelay.
	MaxDelay time.Duration
	// Backoff is the first hold-off after a 429 or 503 without
	// Retry-After. Default 1m.
	Backoff time.Duration
	// MaxBackoff bounds the doubling hold-off. Default 24h, at most the
	// package's MaxDelay.
	MaxBackoff time.Duration
	// Forgive is how long without a headerless 429/503 resets the backoff
	// level, and how long a site's health outlives its last fetch. Default
	// 30m.
	Forgive time.Duration
	// BestMemory is how long a site may stay slow before its best time
	// re-bases on its current one. Default 10m.
	BestMemory time.Duration
}

func (a *Adaptive) on() bool { return a == nil || !a.Off }

func (a *Adaptive) window() int {
	if a == nil || a.Window <= 0 {
		return 50
	}
	return a.Window
}

func (a *Adaptive) maxWindow() int {
	if a == nil || a.MaxWindow <= 0 {
		return 16 * a.window()
	}
	return max(a.MaxWindow, a.window())
}

func (a *Adaptive) backoff() time.Duration {
	if a == nil || a.Backoff <= 0 {
		return time.Minute
	}
	return min(a.Backoff, MaxDelay)
}

func (a *Adaptive) forgive() time.Duration {
	if a == nil || a.Forgive <= 0 {
		return 30 * time.Minute
	}
	return min(a.Forgive, MaxDelay)
}

func (a *Adaptive) maxDelay() time.Duration {
	if a == nil || a.MaxDelay <= 0 {
		return 30 * time.Second
	}
	return min(a.MaxDelay, MaxDelay)
}

// def is v, or d when v is zero.
func def[T int | float64 | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// params is adaptive.lua's adapt_params argument: the controller's 14
// parameters in its order, as little-endian doubles (one struct.unpack in
// the script, where parsing text cost Redis several µs a release).
func (a *Adaptive) params() string {
	var z Adaptive
	if a != nil {
		z = *a
	}
	v := []float64{
		def(z.Slowdown, 2.5),
		float64(ms(def(z.MinExcess, 50*time.Millisecond))),
		def(z.ErrorShare, 0.05),
		float64(a.window()),
		float64(a.maxWindow()),
		float64(def(z.Cooldown, 3)),
		float64(max(1, ms(def(z.FirstDelay, 250*time.Millisecond)))),
		float64(ms(a.maxDelay())),
		float64(max(1, ms(a.backoff()))),
		float64(max(1, ms(max(min(def(z.MaxBackoff, 24*time.Hour), MaxDelay), a.backoff())))),
		float64(max(1, ms(a.forgive()))),
		float64(max(1, ms(def(z.BestMemory, 10*time.Minute)))),
		min(def(z.Smoothing, 0.25), 1),
		float64(def(z.SlowRun, 2)),
	}
	return luanums.Pack(v...)
}

// check reports the first field out of range, wrapping ErrInvalid.
func (a *Adaptive) check() error {
	if a == nil {
		return nil
	}
	bad := func(name string, v any, want string) error {
		return fmt.Errorf("%w: Options.Adaptive.%s %v (want 0 for the default, or %s)", ErrInvalid, name, v, want)
	}
	switch {
	case a.Slowdown < 0 || (a.Slowdown > 0 && a.Slowdown <= 1):
		return bad("Slowdown", a.Slowdown, "more than 1")
	case a.Smoothing < 0 || a.Smoothing > 1:
		return bad("Smoothing", a.Smoothing, "in (0, 1]")
	case a.ErrorShare < 0 || a.ErrorShare > 1:
		return bad("ErrorShare", a.ErrorShare, "in (0, 1]")
	case a.Window < 0 || a.MaxWindow < 0 || a.Cooldown < 0 || a.SlowRun < 0:
		return bad("Window, MaxWindow, Cooldown or SlowRun", fmt.Sprint(a.Window, a.MaxWindow, a.Cooldown, a.SlowRun), "a positive count")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"MinExcess", a.MinExcess}, {"FirstDelay", a.FirstDelay}, {"MaxDelay", a.MaxDelay}, {"Backoff", a.Backoff},
		{"MaxBackoff", a.MaxBackoff}, {"Forgive", a.Forgive}, {"BestMemory", a.BestMemory}} {
		if d.v < 0 || d.v > MaxDelay {
			return bad(d.name, d.v, "a positive duration up to "+MaxDelay.String())
		}
	}
	return nil
}

// adaptNums are release.lua's adaptive numbers for an outcome o: on (1),
// its class, time to first and to last byte ms (-1: not measured), the
// backoff's jitter; all 0 (nothing to record) when adaptive politeness is
// off.
func (l *Limiter) adaptNums(o Outcome) [5]float64 {
	if !l.adaptive {
		return [5]float64{}
	}
	if o.Class < OutcomeNone || o.Class > OutcomeConnError {
		o.Class = OutcomeNone
	}
	return [5]float64{1, float64(o.Class), msf(o.TTFB), msf(o.TTLB), rand.Float64()*2 - 1}
}

// msf is d in ms with a fraction, -1 when d is not positive (not measured).
func msf(d time.Duration) float64 {
	if d <= 0 {
		return -1
	}
	return float64(d) / float64(time.Millisecond)
}

// tightened is r under a health record's effective cap (0: not reduced)
// and extra delay: the lower limit, the longer delay (a delay forcing
// limit 1).
func (r Rule) tightened(hcap int64, hdelay int64) Rule {
	if hcap > 0 && int(hcap) < r.Limit {
		r.Limit = int(hcap)
	}
	if d := time.Duration(hdelay) * time.Millisecond; d > r.Delay {
		r.Delay, r.Limit = d, 1
	}
	return r
}

// AdaptStats are the controller's figures as this process has seen them in
// its releases: counts of what it did, and the sites it last saw reduced.
type AdaptStats struct {
	Decreases, Increases, Backoffs int64 // controller actions, counted since New
	Reduced                        int   // sites last seen with a cap below their rule's
	Delayed                        int   // sites last seen with an extra delay
	HeldOff                        int   // sites held off by a backoff now
}

// AdaptStats reads the controller's figures (see AdaptStats). The sites are
// those this process released a permit of within Adaptive.Forgive, at most
// maxViews of them: a process's view, not the fleet's.
func (l *Limiter) AdaptStats() AdaptStats {
	return l.views.stats(l.opts.now()(), l.opts.adaptive().forgive())
}

// maxViews bounds the sites a Limiter remembers for AdaptStats.
const maxViews = 4096

// views are the reduced sites a process last saw in its releases.
type views struct {
	dec, inc, back atomic.Int64
	mu             sync.Mutex
	m              map[string]view // only sites reduced, delayed or held off
}

type view struct {
	cap     int64
	delay   int64
	heldTo  time.Time
	reduced bool // cap below the rule's limit
	at      time.Time
}

// note records what a release found for site (release.lua's reply: ev,
// cap, delay ms, held-off ms) under the rule's limit.
func (v *views) note(site string, limit int64, ev, hcap, hdelay, hoff int64, now time.Time) {
	if ev&1 != 0 {
		v.dec.Add(1)
	}
	if ev&2 != 0 {
		v.inc.Add(1)
	}
	if ev&4 != 0 {
		v.back.Add(1)
	}
	w := view{cap: hcap, delay: hdelay, reduced: hcap > 0 && hcap < limit, at: now}
	if hoff > 0 {
		w.heldTo = now.Add(time.Duration(hoff) * time.Millisecond)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !w.reduced && w.delay == 0 && hoff == 0 {
		delete(v.m, site)
		return
	}
	if v.m == nil {
		v.m = map[string]view{}
	}
	if _, ok := v.m[site]; !ok && len(v.m) >= maxViews {
		for k := range v.m { // full: forget one at random
			delete(v.m, k)
			break
		}
	}
	v.m[site] = w
}

func (v *views) stats(now time.Time, keep time.Duration) AdaptStats {
	s := AdaptStats{Decreases: v.dec.Load(), Increases: v.inc.Load(), Backoffs: v.back.Load()}
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, w := range v.m {
		if now.Sub(w.at) > keep && !now.Before(w.heldTo) {
			delete(v.m, k) // not seen for long: its record has expired
			continue
		}
		if w.reduced {
			s.Reduced++
		}
		if w.delay > 0 {
			s.Delayed++
		}
		if now.Before(w.heldTo) {
			s.HeldOff++
		}
	}
	return s
}
