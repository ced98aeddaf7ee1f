package testserver

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maxPaths bounds the distinct paths remembered per site; past it,
	// requests to new paths are counted in UntrackedPaths.
	maxPaths = 100_000
	// seriesStep and seriesLen bound the in-flight history per site: the
	// maximum in flight per 100 ms, for the last 2 minutes.
	seriesStep = 100 * time.Millisecond
	seriesLen  = 1200
)

// gapBounds are the upper bounds of the gap histogram buckets; the last
// bucket counts everything above.
var gapBounds = []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second}

// SiteStats is what one site has seen. Counts are exact: every request is
// recorded under the site's lock as it starts and as it ends.
type SiteStats struct {
	Host         string `json:"host"` // as in URL: IP or VHost, and port
	Addr         string `json:"addr"` // the listener's IP:port
	URL          string `json:"url"`
	Cap          int    `json:"cap"`            // concurrency the site tolerates
	Rules        string `json:"rules"`          // what its robots.txt asks, in words
	CrawlDelayMs int64  `json:"crawl_delay_ms"` // minimum gap it asks for (0 = none)
	Requests     int64  `json:"requests"`
	// InFlight counts requests from their arrival until the last of the
	// body is handed to the connection (with a Content-Length; else until
	// the handler returns): from then the client may have it all.
	InFlight    int `json:"inflight"`
	MaxInFlight int `json:"max_inflight"`
	// OverCap counts requests that started while Cap requests were already
	// in flight; OverCapSamples describes the first few: what was in flight
	// then, how long each had run and how much of its body it had sent.
	OverCap        int64    `json:"over_cap"`
	OverCapSamples []string `json:"over_cap_samples,omitempty"`
	DisallowedHits int64    `json:"disallowed_hits"`
	// EarlyAfterRetry counts requests that started before a Retry-After the
	// site had sent ran out. Where Cap > 1, a request already granted when
	// the answer went out may start before the client hears of it.
	EarlyAfterRetry int64 `json:"early_after_retry"`
	// Connections counts TCP connections opened to the site.
	Connections int64 `json:"connections"`
	// CutShort counts streamed responses (slow, huge and binary pages) whose
	// client went away before the end.
	CutShort       int64 `json:"cut_short"`
	RobotsFetches  int64 `json:"robots_fetches"`
	DistinctPaths  int   `json:"distinct_paths"`
	UntrackedPaths int64 `json:"untracked_paths"`
	// DuplicateFetches counts requests for a path already answered 200.
	DuplicateFetches int64 `json:"duplicate_fetches"`
	// MinGapMs is the smallest gap between the end of one request and the
	// start of the next; a request that starts while another is in flight has
	// gap 0. -1 when fewer than two requests were seen.
	MinGapMs float64 `json:"min_gap_ms"`
	// GapHistogram counts gaps by upper bound in ms ("+Inf" for the rest).
	GapHistogram map[string]int64 `json:"gap_histogram"`
	Status       map[string]int64 `json:"status"`
	// Pages counts 200 answers other than robots.txt.
	Pages     int64 `json:"pages"`
	BytesSent int64 `json:"bytes_sent"`
	// Latency is how long the answers Pages counts took, as the site saw
	// them: from arrival to the end of the body (see InFlight). A request
	// whose client left before it was answered has no latency.
	Latency Latency `json:"latency"`
	// Status2xx and Status5xx count the answers by class, robots.txt's
	// included, as Status does by code.
	Status2xx int64 `json:"status_2xx"`
	Status5xx int64 `json:"status_5xx"`
	// Overloaded counts the 503s, without Retry-After, a fragile site
	// answered because too many requests were in flight (SiteSpec.Fragile);
	// they are in Status5xx too.
	Overloaded int64 `json:"overloaded"`
	// Fragile says how the site suffers load, in words ("" for a sturdy
	// site).
	Fragile string `json:"fragile,omitempty"`
	// Series is the maximum in flight in each 100 ms step, oldest first,
	// ending at SeriesEndMs (ms since the server started).
	Series      []int `json:"series"`
	SeriesEndMs int64 `json:"series_end_ms"`
}

// recorder keeps one site's measurements.
type recorder struct {
	cap   int
	start time.Time // the server's start: origin of the series

	mu        sync.Mutex
	requests  int64
	inflight  int
	maxIn     int
	overCap   int64
	samples   []string          // the first maxSamples over-cap starts, described
	live      map[*request]bool // requests in flight
	disHits   int64
	holdUntil time.Time // a Retry-After sent runs out
	early     int64
	conns     int64
	cut       int64
	robots    int64
	paths     map[string]bool // path -> answered 200 at least once
	untracked int64
	dups      int64
	lastEnd   time.Time
	minGap    time.Duration
	gaps      []int64 // per gapBounds bucket, plus +Inf
	status    map[int]int64
	bytes     int64
	pages     int64
	latency   latencies // of the answers pages counts
	overload  int64
	hist      series
}

func newRecorder(cap int, start time.Time) *recorder {
	r := &recorder{cap: cap, start: start, live: map[*request]bool{}, hist: series{start: start}}
	r.reset()
	return r
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests, r.maxIn, r.overCap, r.disHits, r.robots, r.early, r.conns, r.cut = 0, r.inflight, 0, 0, 0, 0, 0, 0
	r.paths = map[string]bool{}
	r.samples = nil
	r.untracked, r.dups, r.bytes, r.pages, r.overload = 0, 0, 0, 0, 0
	r.latency.reset()
	r.lastEnd, r.minGap = time.Time{}, -1
	r.gaps = make([]int64, len(gapBounds)+1)
	r.status = map[int]int64{}
	r.hist.reset(time.Now(), r.inflight)
}

// advance moves the series to t's step, carrying the current in-flight count
// through the steps in between. r.mu held.
func (r *recorder) advance(t time.Time) { r.hist.advance(t, r.inflight) }

// maxSamples bounds OverCapSamples.
const maxSamples = 5

// request is one request in flight, as an over-cap sample describes it.
type request struct {
	path  string
	start time.Time
	sent  atomic.Int64 // body bytes written so far
	size  atomic.Int64 // Content-Length, -1 until known
}

// begin records a request's start; end must be given what it returns.
func (r *recorder) begin(path string, disallowed, robots bool) *request {
	now := time.Now()
	req := &request{path: path, start: now}
	req.size.Store(-1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance(now)
	r.requests++
	if r.inflight >= r.cap {
		r.overCap++
		if len(r.samples) < maxSamples {
			r.samples = append(r.samples, r.describe(path, now))
		}
	}
	r.live[req] = true
	if now.Before(r.holdUntil) {
		r.early++
	}
	gap := time.Duration(0)
	if r.inflight == 0 && !r.lastEnd.IsZero() {
		gap = now.Sub(r.lastEnd)
	}
	if r.inflight > 0 || !r.lastEnd.IsZero() {
		if r.minGap < 0 || gap < r.minGap {
			r.minGap = gap
		}
		i := 0
		for i < len(gapBounds) && gap > gapBounds[i] {
			i++
		}
		r.gaps[i]++
	}
	r.inflight++
	r.maxIn = max(r.maxIn, r.inflight)
	r.hist.note(r.inflight)
	if disallowed {
		r.disHits++
	}
	if robots {
		r.robots++
	}
	if seen, ok := r.paths[path]; ok {
		if seen && !robots {
			r.dups++
		}
	} else if len(r.paths) < maxPaths {
		r.paths[path] = false
	} else {
		r.untracked++
	}
	return req
}

// connected records a new connection.
func (r *recorder) connected() {
	r.mu.Lock()
	r.conns++
	r.mu.Unlock()
}

// cutShort records a streamed response its client left before the end.
func (r *recorder) cutShort() {
	r.mu.Lock()
	r.cut++
	r.mu.Unlock()
}

// overloaded records a 503 a fragile site answered for too many in flight.
func (r *recorder) overloaded() {
	r.mu.Lock()
	r.overload++
	r.mu.Unlock()
}

// holdOff records that the site asked clients, with Retry-After, to send
// nothing before until.
func (r *recorder) holdOff(until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if until.After(r.holdUntil) {
		r.holdUntil = until
	}
}

// describe says what was in flight when a request for path started at now
// over the cap. r.mu held.
func (r *recorder) describe(path string, now time.Time) string {
	var in []string
	for q := range r.live {
		body := fmt.Sprintf("%d bytes sent", q.sent.Load())
		if n := q.size.Load(); n >= 0 {
			body = fmt.Sprintf("%d of %d bytes sent", q.sent.Load(), n)
		}
		in = append(in, fmt.Sprintf("%s (for %.1f ms, %s)", q.path, float64(now.Sub(q.start).Microseconds())/1000, body))
	}
	sort.Strings(in)
	return fmt.Sprintf("%s started at +%d ms with %d in flight: %s", path, now.Sub(r.start).Milliseconds(), len(in), strings.Join(in, "; "))
}

// end records the end of req (from begin) with its status and body bytes;
// answered is false when the handler wrote nothing (its client left while
// it waited), and then the request has no latency to record.
func (r *recorder) end(req *request, status int, bytes int64, answered bool) {
	path := req.path
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, req)
	r.advance(now)
	r.inflight--
	r.lastEnd = now
	r.status[status]++
	r.bytes += bytes
	if status == 200 {
		if path != "/robots.txt" && !strings.HasPrefix(path, "/robots-hop/") {
			r.pages++
			if answered {
				r.latency.add(now.Sub(req.start))
			}
		}
		if _, ok := r.paths[path]; ok {
			r.paths[path] = true
		}
	}
}

func (r *recorder) snapshot(host, addr, url, rules string, gap time.Duration) SiteStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance(time.Now())
	st := SiteStats{
		Host: host, Addr: addr, URL: url, Rules: rules, Cap: r.cap, CrawlDelayMs: gap.Milliseconds(),
		Requests: r.requests, InFlight: r.inflight, MaxInFlight: r.maxIn, OverCap: r.overCap, OverCapSamples: append([]string(nil), r.samples...),
		DisallowedHits: r.disHits, EarlyAfterRetry: r.early, Connections: r.conns, CutShort: r.cut, RobotsFetches: r.robots, DistinctPaths: len(r.paths),
		UntrackedPaths: r.untracked, DuplicateFetches: r.dups, MinGapMs: -1,
		GapHistogram: map[string]int64{}, Status: map[string]int64{}, BytesSent: r.bytes, Pages: r.pages,
		Latency: r.latency.summary(), Overloaded: r.overload,
	}
	if r.minGap >= 0 {
		st.MinGapMs = float64(r.minGap.Microseconds()) / 1000
	}
	for i, n := range r.gaps {
		key := "+Inf"
		if i < len(gapBounds) {
			key = strconv.FormatInt(gapBounds[i].Milliseconds(), 10)
		}
		st.GapHistogram[key] = n
	}
	for code, n := range r.status {
		st.Status[strconv.Itoa(code)] = n
		switch code / 100 {
		case 2:
			st.Status2xx += n
		case 5:
			st.Status5xx += n
		}
	}
	st.Series, st.SeriesEndMs = r.hist.values()
	return st
}
