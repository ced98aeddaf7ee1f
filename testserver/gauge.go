package testserver

import (
	"sync"
	"time"
)

// series is the history of a count in flight: its maximum in each
// seriesStep, in a ring of seriesLen steps. Its owner's lock guards it.
type series struct {
	start time.Time // the server's start: step 0
	ring  []int
	step  int64 // index of the newest step
	first int64 // step of the last reset
}

func (s *series) stepAt(t time.Time) int64 { return int64(t.Sub(s.start) / seriesStep) }

// reset forgets the history; the current step starts at cur.
func (s *series) reset(now time.Time, cur int) {
	s.ring = make([]int, seriesLen)
	s.step = s.stepAt(now)
	s.first = s.step
	s.ring[s.step%seriesLen] = cur
}

// advance moves to t's step, carrying cur through the steps in between.
func (s *series) advance(t time.Time, cur int) {
	to := s.stepAt(t)
	for s.step < to {
		s.step++
		s.ring[s.step%seriesLen] = cur
		if to-s.step > seriesLen { // a long idle stretch: skip ahead
			s.step = to - seriesLen
		}
	}
}

// note raises the current step's maximum to cur.
func (s *series) note(cur int) {
	if i := s.step % seriesLen; cur > s.ring[i] {
		s.ring[i] = cur
	}
}

// values returns the steps since the last reset (at most seriesLen), oldest
// first, and the end of the newest in ms since the start.
func (s *series) values() ([]int, int64) {
	var out []int
	for i := max(s.first, s.step-seriesLen+1); i <= s.step; i++ {
		out = append(out, s.ring[i%seriesLen])
	}
	return out, (s.step + 1) * seriesStep.Milliseconds()
}

// AddrStats is what one listening address has seen, over all the sites it
// serves: an IP (Stats.Addresses) or one host:port on it (Stats.Listeners).
// A request is in flight from its arrival until its site counts it ended
// (see SiteStats.InFlight); answers 421 count too.
type AddrStats struct {
	Addr string `json:"addr"` // "127.0.0.2", or "127.0.0.2:40123" for a listener
	// Sites lists the Host (host:port) of each site served here.
	Sites []string `json:"sites"`
	// Cap is Profile.AddressCap for an IP (0: none, and always for a
	// listener); OverCap counts requests that started with Cap already in
	// flight here.
	Cap         int   `json:"cap"`
	OverCap     int64 `json:"over_cap"`
	Requests    int64 `json:"requests"`
	InFlight    int   `json:"inflight"`
	MaxInFlight int   `json:"max_inflight"`
	// Misdirected counts requests answered 421 because their Host named no
	// site of the listener they reached.
	Misdirected int64 `json:"misdirected"`
	Connections int64 `json:"connections"`
	// Series is the maximum in flight in each 100 ms step, oldest first,
	// ending at SeriesEndMs (ms since the server started).
	Series      []int `json:"series"`
	SeriesEndMs int64 `json:"series_end_ms"`
}

// gauge counts the requests of one address: exact, under its lock.
type gauge struct {
	cap         int // 0: none
	mu          sync.Mutex
	overCap     int64
	requests    int64
	inflight    int
	maxIn       int
	misdirected int64
	conns       int64
	hist        series
}

func newGauge(cap int, start time.Time) *gauge {
	g := &gauge{cap: cap, hist: series{start: start}}
	g.reset()
	return g
}

// reset zeroes the counts; requests in flight stay counted.
func (g *gauge) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.requests, g.maxIn, g.misdirected, g.conns, g.overCap = 0, g.inflight, 0, 0, 0
	g.hist.reset(time.Now(), g.inflight)
}

// begin counts a request's arrival; end must follow.
func (g *gauge) begin() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hist.advance(time.Now(), g.inflight)
	g.requests++
	if g.cap > 0 && g.inflight >= g.cap {
		g.overCap++
	}
	g.inflight++
	g.maxIn = max(g.maxIn, g.inflight)
	g.hist.note(g.inflight)
}

// end counts a request's end; misdirected when it was answered 421.
func (g *gauge) end(misdirected bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hist.advance(time.Now(), g.inflight)
	g.inflight--
	if misdirected {
		g.misdirected++
	}
}

func (g *gauge) connected() {
	g.mu.Lock()
	g.conns++
	g.mu.Unlock()
}

func (g *gauge) snapshot(addr string, sites []string) AddrStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hist.advance(time.Now(), g.inflight)
	st := AddrStats{Addr: addr, Sites: append([]string(nil), sites...), Cap: g.cap, OverCap: g.overCap, Requests: g.requests, InFlight: g.inflight,
		MaxInFlight: g.maxIn, Misdirected: g.misdirected, Connections: g.conns}
	st.Series, st.SeriesEndMs = g.hist.values()
	return st
}
