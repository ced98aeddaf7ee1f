package limiter

import (
	"errors"
	"fmt"
	"time"

	"github.com/polite-crawler/polite/internal/keyname"
)

// Bounds on the durations the limiter hands to Redis. Every lease, key TTL
// and hold-off the scripts compute is a sum of these, so with them no sum
// overflows and every key keeps a TTL.
const (
	// MaxLease is the longest Options.Lease (and Options.LockTTL) accepted;
	// a Limiter configured with more fails every call with ErrInvalid.
	MaxLease = time.Hour
	// MaxDelay is the longest crawl delay or backoff the limiter applies:
	// longer ones (a robots.txt asking for days) are cut to it, so a site
	// that asks for more gets one request a day.
	MaxDelay = 24 * time.Hour
)

// Mode selects how a new entry takes its place in a site's semaphore. Both
// modes use the same keys and keep the same limit, crawl delay and leases,
// and workers in different modes can share a site. They order waiters from
// different processes differently: ModeAtomic in the order they asked,
// ModeLocked in the order their processes won the site lock (see
// AcquireRule).
type Mode int

const (
	// ModeLocked is the Redis in Action 6.3 acquire, guarded by a per-site lock
	// (SET NX PX with a random token, compare-and-delete release): one
	// round trip to acquire when uncontended, a pipeline of SET NX and a
	// script that enters the batch only while the lock is ours and releases
	// it (the script runs after the SET, on the site's node), and one to
	// release. A process's callers of one site
	// queue in arrival order and one hold of the lock enters all those queued
	// (see gates), so a burst costs a few lock rounds, not a spin per caller.
	ModeLocked Mode = iota
	// ModeAtomic runs the same steps in one Lua script: one round trip to
	// acquire, and one to release. It treats a held site lock as contention.
	ModeAtomic
)

// Names of the modes, as String gives them and ParseMode reads them.
const (
	ModeLockedName = "locked"
	ModeAtomicName = "atomic"
)

// String is the mode's name: "locked", "atomic", or "unknown" for a value that
// is neither mode.
func (m Mode) String() string {
	switch m {
	case ModeLocked:
		return ModeLockedName
	case ModeAtomic:
		return ModeAtomicName
	}
	return "unknown"
}

// ErrMode rejects a mode name other than "locked" and "atomic".
var ErrMode = errors.New("limiter: unknown mode")

// ParseMode returns the Mode a name gives: "locked" ModeLocked, "atomic"
// ModeAtomic; otherwise an error wrapping ErrMode. It reads what String
// writes.
func ParseMode(name string) (Mode, error) {
	switch name {
	case ModeLockedName:
		return ModeLocked, nil
	case ModeAtomicName:
		return ModeAtomic, nil
	}
	return 0, fmt.Errorf("%w %q: want %s or %s", ErrMode, name, ModeLockedName, ModeAtomicName)
}

// Options configure a Limiter. A nil *Options, and every zero field, means the
// default named on the field.
type Options struct {
	// Mode is ModeLocked (the default) or ModeAtomic.
	Mode Mode
	// Lease is how long a permit stays valid without a refresh. Default 10s,
	// minimum 100ms (shorter ones are raised to it), at most MaxLease.
	Lease time.Duration
	// Prefix starts every Redis key and channel name. Default "polite". It
	// must pass keyname.Check: no braces (they would change the Redis
	// Cluster hash tag), no whitespace.
	Prefix string
	// Delay is the crawl delay applied to every site whose Rule does not set
	// one: the minimum gap between one permit's release and the next grant.
	// A delay forces the site's limit to 1. Default 0 (none); longer than
	// MaxDelay counts as MaxDelay.
	Delay time.Duration
	// LockTTL bounds how long ModeLocked's site lock can outlive a crashed
	// acquirer. Default 1s, at most MaxLease.
	LockTTL time.Duration
	// Poll is the longest a waiter sleeps between checks when no wake-up
	// message arrives (a safety net; releases wake waiters directly). Default
	// 500ms, never more than Lease/3.
	Poll time.Duration
	// StopMargin is the least time by which a permit that cannot be
	// refreshed counts as lost before Redis can hand its slot on (beyond the
	// rounding margin, Lease/50 + 2ms), so that the work it covers has
	// stopped at the far end (a site noticing a dropped connection) by then.
	// The margin used is max(StopMargin, Lease/10), at most Lease/4: it grows
	// with the lease, because what stalled the refreshes (an overloaded host,
	// a slow network) slows the abort too. Default 0 (so Lease/10). The
	// crawler passes fetch.AbortGrace, the floor for short leases.
	StopMargin time.Duration
	// NoRestartGuard turns off the restart guard. By default a Redis node
	// grants no permit for a site whose state it does not have until it has
	// been up for Lease + the site's crawl delay + 1s: a node that restarted
	// has forgotten the permits it granted, whose holders may still be
	// downloading until their next refresh or their own clock stops them.
	// Set it only when no permit can have come from this Redis before: a
	// redis-server the program started itself, as this module's tests do
	// (the benchmarks keep the guard and wait it out: GuardLeft). The guard
	// reads INFO server; where the Redis user may not run INFO (GuardLeft
	// says so) it is off.
	NoRestartGuard bool
	// RuleMemory is how long a contributor's rule (Rule.From) counts
	// toward its site's rule after the last request that asked with it: a
	// host of a domain not asked about for that long no longer holds the
	// domain to its limit or delay. Default 24h, the robots.txt cache's
	// TTL; at most MaxDelay.
	RuleMemory time.Duration
	// Adaptive configures adaptive politeness (see Adaptive and adapt.go):
	// each site's effective cap and extra delay follow its health,
	// fleet-wide. nil: on, with the defaults; Adaptive.Off turns it off.
	Adaptive *Adaptive
	// Now is the worker's clock. The limiter takes all lease and ordering
	// decisions from Redis TIME and uses this clock only to time its own
	// waits, so a skewed clock changes nothing. Default time.Now.
	Now func() time.Time
}

// check reports the first option out of range, wrapping ErrInvalid. New
// keeps it and every call of the Limiter returns it. Negative durations are
// errors; zero means the default.
func (o *Options) check() error {
	if o == nil {
		return nil
	}
	if err := keyname.Check("prefix", o.prefix()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := o.Adaptive.check(); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		max  time.Duration
	}{
		{"Lease", o.Lease, MaxLease},
		{"LockTTL", o.LockTTL, MaxLease},
		{"Delay", o.Delay, -1},
		{"Poll", o.Poll, -1},
		{"StopMargin", o.StopMargin, -1},
		{"RuleMemory", o.RuleMemory, MaxDelay},
	} {
		if d.v < 0 || (d.max > 0 && d.v > d.max) {
			return fmt.Errorf("%w: Options.%s %s (want 0 for the default, or %s)", ErrInvalid, d.name, d.v, maxText(d.max))
		}
	}
	return nil
}

func maxText(d time.Duration) string {
	if d < 0 {
		return "a positive duration"
	}
	return "a positive duration up to " + d.String()
}

func (o *Options) mode() Mode {
	if o == nil {
		return ModeLocked
	}
	return o.Mode
}

func (o *Options) lease() time.Duration {
	if o == nil || o.Lease == 0 {
		return 10 * time.Second
	}
	return min(max(o.Lease, 100*time.Millisecond), MaxLease)
}

// restartGuard is the age in ms a node needs before it grants a permit under
// rule to a site whose state it does not have (see young.lua); 0 turns the
// check off.
func (o *Options) restartGuard(rule Rule) int64 {
	if o != nil && o.NoRestartGuard {
		return 0
	}
	return ms(o.lease() + rule.Delay + time.Second)
}

// stopMargin is the rule written on StopMargin. With the rounding margin the
// fence falls at most 0.27 lease + 2ms early, so the keep-alive's refresh
// every Lease/3 still has more than a third of the lease to be confirmed.
func (o *Options) stopMargin() time.Duration {
	m := o.lease() / 10
	if o != nil {
		m = max(m, o.StopMargin)
	}
	return min(m, o.lease()/4)
}

func (o *Options) ruleMemory() time.Duration {
	if o == nil || o.RuleMemory <= 0 {
		return 24 * time.Hour
	}
	return min(o.RuleMemory, MaxDelay)
}

func (o *Options) prefix() string {
	if o == nil || o.Prefix == "" {
		return "polite"
	}
	return o.Prefix
}

func (o *Options) delay() time.Duration {
	if o == nil || o.Delay < 0 {
		return 0
	}
	return min(o.Delay, MaxDelay)
}

func (o *Options) lockTTL() time.Duration {
	if o == nil || o.LockTTL <= 0 {
		return time.Second
	}
	return min(o.LockTTL, MaxLease)
}

func (o *Options) poll() time.Duration {
	p := 500 * time.Millisecond
	if o != nil && o.Poll > 0 {
		p = o.Poll
	}
	return min(p, o.lease()/3)
}

func (o *Options) now() func() time.Time {
	if o == nil || o.Now == nil {
		return time.Now
	}
	return o.Now
}

func (o *Options) adaptive() *Adaptive {
	if o == nil {
		return nil
	}
	return o.Adaptive
}
