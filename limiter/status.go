package limiter

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polite-crawler/polite/internal/redisinfo"
)

// Backoff holds every worker of the fleet off site for d (a 429 or 503 with
// Retry-After): no permit is granted before then, waiters included. It never
// shortens a backoff already in place. A d longer than MaxDelay counts as
// MaxDelay.
func (l *Limiter) Backoff(ctx context.Context, site string, d time.Duration) error {
	k, _, err := l.prepare(site, Rule{Limit: 1})
	if err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	if err := backoffScript.Run(ctx, l.fn, l.keyArgs(k), ms(min(d, MaxDelay)), ms(l.opts.lease())).Err(); err != nil {
		return fmt.Errorf("limiter: backoff %s: %w", site, err)
	}
	return nil
}

// SiteStatus is a snapshot of one site's semaphore and health.
type SiteStatus struct {
	Site    string
	Holders int           // permits out (at most the limit asked about)
	Waiting int           // entries in line behind them
	NextIn  time.Duration // until a crawl delay or backoff ends (0 if none)

	// The site's health (adaptive politeness; zero when it has no record).
	Cap         int           // effective cap: the limit asked about, or lower
	Reduced     bool          // Cap is below the limit asked about
	ExtraDelay  time.Duration // added after each release (0: none)
	TTFB, TTLB  time.Duration // smoothed times to first and last byte (0: no sample)
	BestTTFB    time.Duration // the best recent smoothed time to first byte
	BackoffLeft time.Duration // until the backoff after a headerless 429/503 ends
	Backoffs    int           // its level: hold-offs in a row, each twice the last
	Window      Outcomes      // outcomes counted in the current window
}

// Outcomes count a site's recent fetches by class.
type Outcomes struct {
	OK, Throttled, ServerErrors, Timeouts, ConnErrors int
}

// Status reads site's semaphore and health without changing them; limit is
// the cap to count holders against.
func (l *Limiter) Status(ctx context.Context, site string, limit int) (SiteStatus, error) {
	k, rule, err := l.prepare(site, Rule{Limit: limit})
	if err != nil {
		return SiteStatus{}, err
	}
	v, err := statusScript.Run(ctx, l.fn, l.keyArgs(k), ms(l.opts.lease())).Slice()
	if err == nil && len(v) != 4 {
		err = fmt.Errorf("script returned %d values", len(v))
	}
	if err != nil {
		return SiteStatus{}, fmt.Errorf("limiter: status %s: %w", site, err)
	}
	live, _ := v[0].(int64)
	next, _ := v[1].(int64)
	raw, _ := v[2].(string)
	now, _ := v[3].(int64)
	st := SiteStatus{Site: site, Cap: rule.Limit, NextIn: time.Duration(next) * time.Millisecond}
	st.health(raw, now, rule.Limit)
	held := min(int(live), rule.Limit)
	st.Holders, st.Waiting = held, int(live)-held
	return st, nil
}

// healthVersion and healthLen tell a health record of adaptive.lua's
// layout (HEALTH_PACK: a version byte, then 20 little-endian doubles).
const healthVersion, healthLen = 2, 1 + 20*8

// health fills s from a health record (adaptive.lua's layout) read at
// server ms now under limit; another version's record, or none, leaves
// s as it is.
func (s *SiteStatus) health(raw string, now int64, limit int) {
	if len(raw) != healthLen || raw[0] != healthVersion {
		return
	}
	var n [20]float64
	for i := range n {
		n[i] = math.Float64frombits(binary.LittleEndian.Uint64([]byte(raw[1+8*i : 9+8*i])))
	}
	dur := func(v float64) time.Duration {
		return time.Duration(max(v, 0) * float64(time.Millisecond))
	}
	r := Rule{Limit: limit}.tightened(int64(n[0]), int64(n[1]))
	s.Cap, s.Reduced, s.ExtraDelay = r.Limit, r.Limit < limit, dur(n[1])
	s.TTFB, s.TTLB, s.BestTTFB = dur(n[2]), dur(n[3]), dur(n[4])
	s.Backoffs = int(n[17])
	if left := n[18] - float64(now); left > 0 && s.Backoffs > 0 {
		s.BackoffLeft = dur(left)
	}
	s.Window = Outcomes{OK: int(n[8]), Throttled: int(n[9]), ServerErrors: int(n[10]), Timeouts: int(n[11]), ConnErrors: int(n[12])}
}

// CheckWakeups reports whether Redis carries this Limiter's wake-up
// messages: nil when the user may publish on its channel (an empty message,
// which its waiters ignore) and subscribe to it, Redis's refusal (an ACL
// without the channels under Options.Prefix, or without PUBLISH or
// SUBSCRIBE, answers NOPERM: redisacl) or another error otherwise. Without
// wake-ups nothing fails, but a waiter learns that a permit freed only at
// its next poll (Options.Poll) instead of at once. A Ring carries none
// (its waiters always poll): nil. It takes two round trips and a
// connection for the subscription, closed before it returns; at most 5 s.
func (l *Limiter) CheckWakeups(ctx context.Context) error {
	if !carriesWakeups(l.rdb) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := l.rdb.Publish(ctx, l.hub.ch, "").Err(); err != nil {
		return fmt.Errorf("limiter: PUBLISH on the wake-up channel %s: %w", l.hub.ch, err)
	}
	ps := l.rdb.Subscribe(ctx, l.hub.ch)
	defer ps.Close()
	for {
		msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			return fmt.Errorf("limiter: SUBSCRIBE to the wake-up channel %s: %w", l.hub.ch, err)
		}
		if _, ok := msg.(*redis.Subscription); ok {
			return nil
		}
	}
}

// GuardLeft is how long Redis will still grant nothing for a site it has no
// state for, under a rule without a crawl delay, because it started less
// than a lease ago (the restart guard; see Options.NoRestartGuard). It is 0
// once every node may grant. On Redis Cluster it asks every master.
func (l *Limiter) GuardLeft(ctx context.Context) (time.Duration, error) {
	need := time.Duration(l.opts.restartGuard(Rule{})) * time.Millisecond
	if need == 0 {
		return 0, nil
	}
	var mu sync.Mutex // ForEachMaster asks the masters at once
	var left time.Duration
	ask := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("limiter: INFO server: %w", err)
		}
		up, ok, err := redisinfo.Uptime(info)
		if err != nil {
			return fmt.Errorf("limiter: %w", err)
		}
		if ok {
			mu.Lock()
			left = max(left, need-up)
			mu.Unlock()
		}
		return nil
	}
	var err error
	switch c := l.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, ask)
	case *redis.Client:
		err = ask(ctx, c)
	default:
		return 0, fmt.Errorf("limiter: GuardLeft: unsupported client %T", l.rdb)
	}
	return left, err
}
