// Package limiter is a distributed, fair counting semaphore per site, kept in
// Redis, for crawler workers on many hosts.
//
// Before every request to a site a worker takes a Permit; a site never has
// more permits out than its limit, however many workers and hosts share it.
// The algorithm is the fair semaphore of Redis in Action 6.3: a holders ZSET
// scored by the server time of each entry's last heartbeat, an owners ZSET
// scored by an INCR counter, expired entries dropped with ZINTERSTORE WEIGHTS
// 1 0, and rank < limit meaning "holds a permit". Two changes make it correct
// and fast:
//
//   - Every new entry gets its counter while nothing else can add one (under
//     the site lock in ModeLocked, inside one script in ModeAtomic), so new
//     entries always rank behind existing ones and a rank can only fall.
//   - A blocked Acquire keeps its entry in the set as a place in line instead
//     of removing it, so waiters are served in the order they took their
//     places, whichever process they are in, and a release can name the
//     waiter it lets in. (When a place is taken depends on the Mode: see
//     AcquireRule.)
//
// All times come from Redis TIME; a worker's own clock only times its waits.
// See DESIGN.md for the keys.
//
// A Redis restarted empty has forgotten the permits out, while their holders
// download on until a refresh finds the permit gone or their own clock stops
// them, at most one lease later. So a node grants nothing for a site it has
// no state for until it has been up for a lease plus the site's crawl delay
// (young.lua; Options.NoRestartGuard).
//
// A Limiter is safe for concurrent use; one per process is enough. Acquire
// blocks until a permit is granted or ctx is done; TryAcquire never waits
// and answers a *BusyError (ErrBusy) when the site is full. Work under a
// Permit must stop once it is lost (Permit.Done, ErrPermitLost). Errors
// wrap the sentinels ErrBusy, ErrPermitLost, ErrClosed and ErrInvalid, or
// ctx's or Redis's error; match them with errors.Is.
package limiter

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/polite-crawler/polite/internal/keyname"
	"github.com/polite-crawler/polite/internal/luafn"
	"github.com/polite-crawler/polite/internal/luanums"
	"github.com/redis/go-redis/v9"
)

// Rule is what a site allows: at most Limit permits at once and, when Delay
// is set, at most one at a time with Delay between one release and the next
// grant (fleet-wide).
//
// From names who asks for the rule when a site is shared by several
// contributors that each have a rule of their own: the hosts of one
// registered domain, each with its own robots.txt. With From set, the limiter
// records the rule as From's, fleet-wide, and the site's rule is the
// strictest of all its contributors' recent rules: the lowest Limit and the
// longest Delay (a delay forcing limit 1), this one included. A contributor's
// rule replaces the one it recorded before, and counts until
// Options.RuleMemory has passed since the last request that asked with it
// (refreshed at most every RuleMemory/8). The permit's Rule is the rule it
// was granted under, its Release wakes and delays by the site's rule at that
// moment, and a waiter is let in only while it ranks below the site's rule
// at that moment. Requests whose rule has no From (a host-keyed site, a
// robots.txt request) are held to their own rule alone, and cost no extra
// Redis command.
type Rule struct {
	Limit int
	Delay time.Duration
	From  string
}

// normal returns the rule as the scripts apply it: a delay forces limit 1.
func (r Rule) normal() Rule {
	if r.Delay > 0 {
		r.Limit = 1
	}
	return r
}

// Limiter hands out per-site permits. It is safe for concurrent use. One
// Limiter per process is enough: its waiters share one pub/sub connection.
type Limiter struct {
	rdb   redis.UniversalClient
	fn    *luafn.Conn // the scripts on rdb's servers
	opts  *Options
	hub   *hub
	gates gates // ModeLocked's per-site queues of this process
	err   error // Options out of range: every call returns it

	adaptive bool // adaptive politeness is on
	// tail is release.lua's ARGV[3]: with adaptive politeness the
	// controller's parameters (Adaptive.params), then the wake-up
	// channels' base (hub.base); one string, the same on every call.
	tail  string
	views views // the sites this process last saw reduced (AdaptStats)
	// oneKey: a script call names holders alone (keyArgs).
	oneKey bool
}

// New returns a Limiter on rdb (a single node, Sentinel or Cluster client).
// opts may be nil for the defaults. Close it to stop its pub/sub connection.
// If an option is out of range (see Options), every call of the Limiter
// returns an error wrapping ErrInvalid that names it.
func New(rdb redis.UniversalClient, opts *Options) *Limiter {
	if opts != nil {
		o := *opts // keep the caller's struct out of our hands
		if o.Adaptive != nil {
			a := *o.Adaptive
			o.Adaptive = &a
		}
		opts = &o
	}
	l := &Limiter{rdb: rdb, fn: lib.On(rdb), opts: opts, hub: newHub(rdb, opts.prefix()), err: opts.check(), oneKey: luafn.Slotless(rdb)}
	if a := opts.adaptive(); a.on() {
		l.adaptive, l.tail = true, a.params()
	}
	l.tail += l.hub.base
	return l
}

// Close stops the Limiter's pub/sub connection and makes waiting and future
// Acquire calls return ErrClosed. Permits already held stay valid: release
// them as usual.
func (l *Limiter) Close() error { return l.hub.close() }

// Lease is the configured lease.
func (l *Limiter) Lease() time.Duration { return l.opts.lease() }

// Acquire blocks until a permit for site is free or ctx is done. It uses
// Options.Delay as the site's crawl delay. On failure it returns ctx.Err() (or
// a Redis error) and leaves no entry behind. See AcquireRule.
func (l *Limiter) Acquire(ctx context.Context, site string, limit int) (*Permit, error) {
	return l.AcquireRule(ctx, site, Rule{Limit: limit, Delay: l.opts.delay()})
}

// TryAcquire takes a permit for site if one is free now; otherwise it returns
// a *BusyError (errors.Is ErrBusy) at once, without joining the line. It
// uses Options.Delay as the site's crawl delay.
func (l *Limiter) TryAcquire(ctx context.Context, site string, limit int) (*Permit, error) {
	return l.TryAcquireRule(ctx, site, Rule{Limit: limit, Delay: l.opts.delay()})
}

// AcquireRule blocks until a permit for site under rule is free or ctx is
// done. Waiters are served in the order they took their places in line (see
// wait): in ModeAtomic, the order they first asked, across all processes; in
// ModeLocked, the order they first asked within a process, and across
// processes the order the processes won the site lock. A waiter is woken by the release that lets it in, or, when a
// holder dies, when that holder's lease runs out. On failure it returns
// ctx.Err(), ErrClosed or a Redis error, and removes its place in line
// (best effort; a place that cannot be removed expires after one lease).
func (l *Limiter) AcquireRule(ctx context.Context, site string, rule Rule) (*Permit, error) {
	k, rule, err := l.prepare(site, rule)
	if err != nil {
		return nil, err
	}
	for {
		if l.hub.isClosed() {
			return nil, ErrClosed
		}
		id := l.hub.newID()
		grants := l.hub.register(id)
		o, err := l.enter(ctx, k, id, rule, true)
		if err != nil || o.state == stGranted {
			l.hub.leave(id)
			if err != nil {
				return nil, err
			}
			return newPermit(l, k, id, o.rule, o.eff, o.sent, o.rank+1 >= o.eff.Limit), nil
		}
		p, err := l.wait(ctx, k, id, rule, o, grants)
		if errors.Is(err, errPlaceLost) {
			continue // our place expired while we waited (a long stall): join again
		}
		return p, err
	}
}

// TryAcquireRule is TryAcquire with an explicit rule.
func (l *Limiter) TryAcquireRule(ctx context.Context, site string, rule Rule) (*Permit, error) {
	k, rule, err := l.prepare(site, rule)
	if err != nil {
		return nil, err
	}
	if l.hub.isClosed() {
		return nil, ErrClosed
	}
	id := l.hub.newID()
	o, err := l.enter(ctx, k, id, rule, false)
	if err != nil {
		return nil, err
	}
	if o.state == stGranted {
		return newPermit(l, k, id, o.rule, o.eff, o.sent, o.rank+1 >= o.eff.Limit), nil
	}
	return nil, &BusyError{Site: site, Full: o.rank >= o.eff.Limit, Wait: o.wait}
}

// prepare checks a call's arguments (and the Limiter's options) and returns
// the site's keys and the rule as the scripts apply it: a delay cut to
// MaxDelay and forcing limit 1.
func (l *Limiter) prepare(site string, rule Rule) (keys, Rule, error) {
	if l.err != nil {
		return keys{}, rule, l.err
	}
	if err := keyname.Check("site", site); err != nil {
		return keys{}, rule, fmt.Errorf("%w: %w (want a host or host:port)", ErrInvalid, err)
	}
	if rule.From != "" {
		if err := keyname.Check("contributor", rule.From); err != nil || rule.From == "*" {
			return keys{}, rule, fmt.Errorf("%w: contributor %q for %s (want a host name)", ErrInvalid, rule.From, site)
		}
	}
	if rule.Limit < 1 {
		return keys{}, rule, fmt.Errorf("%w: limit %d for %s (want >= 1)", ErrInvalid, rule.Limit, site)
	}
	if rule.Delay < 0 {
		return keys{}, rule, fmt.Errorf("%w: delay %s for %s (want >= 0)", ErrInvalid, rule.Delay, site)
	}
	rule.Delay = min(rule.Delay, MaxDelay)
	return keysFor(l.opts.prefix(), site), rule.normal(), nil
}

// outcome is what one visit to Redis found out about an entry.
type outcome struct {
	state int
	rank  int           // live entries ahead of ours
	wait  time.Duration // hint: when to look again
	sent  time.Time     // worker clock just before the request that decided it
	rule  Rule          // the rule applied: the one asked for, tightened by the site's ceiling (Rule.From)
	eff   Rule          // rule tightened by the site's health (its effective cap and extra delay)
}

// enter gives id a place in site's semaphore. With queue it keeps the place
// when no permit is free (state stQueued); without, it leaves (stBusy).
func (l *Limiter) enter(ctx context.Context, k keys, id string, rule Rule, queue bool) (outcome, error) {
	for {
		var o outcome
		var err error
		if l.opts.mode() == ModeAtomic {
			o, err = l.enterAtomic(ctx, k, id, rule, queue)
		} else {
			o, err = l.enterLocked(ctx, k, id, rule, queue)
		}
		if err != nil {
			return o, err
		}
		switch {
		case o.state == stContended:
			// ModeAtomic: a ModeLocked worker holds the site lock while its
			// script runs (longer only when the node lacks the script):
			// back off a little (jittered so contenders spread out) and
			// try again. (ModeLocked waits in its gate.) The pause
			// is short; Close does not cut it.
			err = sleep(ctx, jitter(200*time.Microsecond, min(o.wait, 5*time.Millisecond)), nil)
		case o.state == stYoung && queue:
			// Redis restarted not long ago (restartGuard): nothing was
			// written, so there is no place in line to keep. Wait it out.
			err = sleep(ctx, o.wait, l.hub.done)
		case o.state == stYoung:
			o.state = stBusy
			return o, nil
		default:
			return o, nil
		}
		if err != nil {
			return o, err
		}
	}
}

func (l *Limiter) enterAtomic(ctx context.Context, k keys, id string, rule Rule, queue bool) (outcome, error) {
	sent := l.opts.now()()
	v, err := scriptInts(acquireScript.Run(ctx, l.fn, l.keyArgs(k), l.acquireArgs(id, rule, queue)...).Text())
	if err != nil {
		return outcome{}, fmt.Errorf("limiter: acquire %s: %w", k.site, err)
	}
	return parseOutcome(v, sent, rule)
}

// acquireArgs are acquire.lua's ARGV for id under rule; with queue it
// joins the line when no permit is free.
func (l *Limiter) acquireArgs(id string, rule Rule, queue bool) []any {
	args := []any{id, luanums.Pack(float64(rule.Limit), msn(l.opts.lease()), msn(l.keyTTL(rule)), bit(queue),
		float64(l.opts.restartGuard(rule)), msn(rule.Delay), msn(l.opts.ruleMemory()), bit(l.adaptive)), rule.From}
	if rule.From == "" {
		args = args[:2] // no contributor: a string less for Redis to make
	}
	return args
}

// check heartbeats id and reports its state (stGranted, stQueued or stLost)
// under rule, tightened by the site's ceiling when rule.From is set.
func (l *Limiter) check(ctx context.Context, k keys, id string, rule Rule) (outcome, error) {
	sent := l.opts.now()()
	v, err := scriptInts(checkScript.Run(ctx, l.fn, l.keyArgs(k), id, luanums.Pack(float64(rule.Limit), msn(l.opts.lease()), msn(l.keyTTL(rule)),
		ceiled(rule), msn(rule.Delay), msn(l.opts.ruleMemory()), bit(l.adaptive))).Text())
	if err != nil {
		return outcome{}, fmt.Errorf("limiter: check %s: %w", k.site, err)
	}
	return parseOutcome(v, sent, rule)
}

// ceiled is the scripts' number for applying the site's ceiling: 1 for a
// rule with a contributor, 0 (nothing to do) without.
func ceiled(rule Rule) float64 {
	return bit(rule.From != "")
}

// leave removes id; held says whether it held a permit (which starts the
// crawl delay), out what the fetch under it came to (recorded in the site's
// health). It reports whether the entry was still there. Waiters the
// removal lets in are told over pub/sub; those in this process are also told
// here at once, which saves them the trip through Redis.
func (l *Limiter) leave(ctx context.Context, k keys, id string, rule Rule, held bool, out Outcome) (bool, error) {
	v, err := releaseScript.Run(ctx, l.fn, l.keyArgs(k), l.leaveArgs(id, rule, held, out)...).Text()
	return l.left(k, rule, v, err, true)
}

// leaveArgs are release.lua's ARGV for removing id.
func (l *Limiter) leaveArgs(id string, rule Rule, held bool, out Outcome) []any {
	return l.releaseArgs(id, rule, held, out, nil)
}

// keepArgs are release.lua's ARGV for keeping id's slot under next (see
// Permit.KeepOn), or removing it under rule when it cannot be kept.
func (l *Limiter) keepArgs(id string, rule, next Rule, out Outcome) []any {
	return l.releaseArgs(id, rule, true, out, &next)
}

// releaseArgs are release.lua's ARGV: keeping the slot under next, unless
// next is nil. The kept rule's contributor goes only when there is one (a
// string less for Redis to make).
func (l *Limiter) releaseArgs(id string, rule Rule, held bool, out Outcome, next *Rule) []any {
	a := l.adaptNums(out)
	var keep [4]float64
	from := ""
	if next != nil {
		keep = [4]float64{1, float64(next.Limit), msn(next.Delay), msn(l.keyTTL(*next))}
		from = next.From
	}
	args := []any{id, luanums.Pack(float64(rule.Limit), msn(l.opts.lease()), msn(rule.Delay), bit(held), msn(l.keyTTL(rule)),
		ceiled(rule), msn(l.opts.ruleMemory()), a[0], a[1], a[2], a[3], a[4], keep[0], keep[1], keep[2], keep[3]),
		l.tail, from}
	if from == "" {
		args = args[:3]
	}
	return args
}

// left reads release.lua's reply (v, err) for an entry under rule, notes
// what the controller did (AdaptStats), wakes the local waiters it names
// (under the limit the script applied) and reports whether the entry was
// still there.
//
// With yield, when it handed a waiter a grant it may act on at once (no
// crawl delay to wait out), it yields the processor (runtime.Gosched), so
// that the waiter can start its request before the caller goes on: a woken
// goroutine otherwise waits, unless a processor is idle, until the caller
// blocks, which for a releaser is after the write of its next call to Redis.
// Best effort: the scheduler may still run the caller first. Callers that
// release many entries in a loop (drop) pass false.
func (l *Limiter) left(k keys, rule Rule, v string, err error, yield bool) (bool, error) {
	if err != nil {
		return false, fmt.Errorf("limiter: release %s: %w", k.site, err)
	}
	n, ids, err := releaseReply(v)
	if err != nil {
		return false, fmt.Errorf("limiter: release %s: %w", k.site, err)
	}
	if l.adaptive {
		l.views.note(k.site, int64(rule.Limit), n[3], n[4], n[5], n[6], l.opts.now()())
	}
	if len(ids) > 0 {
		g := grant{limit: int(n[2]), wait: time.Duration(n[1]) * time.Millisecond}
		if l.hub.deliver(g, ids) > 0 && yield && g.wait == 0 {
			runtime.Gosched()
		}
	}
	return n[0] == 1, nil
}

// releaseReply reads release.lua's reply v: its 12 numbers (packed) and
// the ids it published.
func releaseReply(v string) ([]int64, []string, error) {
	const head = 12 * 8
	if len(v) < head {
		return nil, nil, fmt.Errorf("script returned %d bytes, want %d and more", len(v), head)
	}
	n, err := luanums.Ints(v[:head])
	if err != nil {
		return nil, nil, err
	}
	return n, strings.Fields(v[head:]), nil
}

// scriptInts reads a reply of numbers packed by the script (luanums).
func scriptInts(s string, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	return luanums.Ints(s)
}

// keyTTL is how long a site's keys outlive their last write: long enough for
// every live entry to heartbeat (each heartbeat renews it), short enough that
// an idle site leaves nothing behind for long.
func (l *Limiter) keyTTL(rule Rule) time.Duration {
	return 3*l.opts.lease() + rule.Delay
}

// parseOutcome reads the reply of acquire.lua or check.lua for an entry
// under rule: {state, server ms, rank, wait ms} and, when the script applied
// a rule, {limit, delay ms}, which replace rule's, and the health's
// {cap, extra delay ms}, which tighten it.
func parseOutcome(v []int64, sent time.Time, rule Rule) (outcome, error) {
	if len(v) != 4 && len(v) != 8 {
		return outcome{}, fmt.Errorf("limiter: script returned %d values, want 4 or 8", len(v))
	}
	eff := rule
	if len(v) == 8 {
		rule.Limit, rule.Delay = int(v[4]), time.Duration(v[5])*time.Millisecond
		eff = rule.tightened(v[6], v[7])
	}
	return outcome{state: int(v[0]), rank: int(v[2]), wait: time.Duration(v[3]) * time.Millisecond, sent: sent, rule: rule, eff: eff}, nil
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// msn is d in whole ms, as a number for luanums.Pack.
func msn(d time.Duration) float64 { return float64(ms(d)) }

// bit is b as a number for luanums.Pack: 1 or 0.
func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
