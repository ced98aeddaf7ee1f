package fetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/polite-crawler/polite/limiter"
)

// timing measures one request for the site's health (limiter.Outcome): from
// the request written to the first byte of the response (time to first
// byte: the site's own time, not our wait for a connection or an address
// permit) and to the body's end (time to last byte). Its hooks run on the
// transport's goroutines.
type timing struct {
	start time.Time    // before the round trip (monotonic)
	wrote atomic.Int64 // ns from start to the request written, 0 if not yet
	first atomic.Int64 // ns from start to the first response byte, 0 if not yet
	heads time.Duration
}

// trace returns ctx with hooks that time the request into a new timing.
// Hooks the request's context already has still run (httptrace composes
// them).
func trace(ctx context.Context) (context.Context, *timing) {
	m := &timing{start: time.Now()}
	since := func() int64 { return max(int64(time.Since(m.start)), 1) }
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest:         func(httptrace.WroteRequestInfo) { m.wrote.Store(since()) },
		GotFirstResponseByte: func() { m.first.Store(since()) },
	}), m
}

// gotHeaders marks the response's headers read.
func (m *timing) gotHeaders() { m.heads = time.Since(m.start) }

// from is when the site's time began: the request written, or the round
// trip's start when the transport told us nothing.
func (m *timing) from() time.Duration { return time.Duration(m.wrote.Load()) }

// ttfb is the time to first byte; without trace hooks, to the headers.
func (m *timing) ttfb() time.Duration {
	end := time.Duration(m.first.Load())
	if end == 0 {
		end = m.heads
	}
	return max(end-m.from(), time.Microsecond)
}

// ttlb is the time to the last byte, the body having ended now.
func (m *timing) ttlb() time.Duration { return max(time.Since(m.start)-m.from(), time.Microsecond) }

// classify is a response's class for the site's health: a 429 or 503
// without Retry-After is throttling (the fleet backs off, doubling), with
// Retry-After an error (the site has said how long to wait: Backoff).
func classify(resp *http.Response, retryAfter time.Duration) limiter.OutcomeClass {
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		if retryAfter > 0 {
			return limiter.OutcomeRetryAfter
		}
		return limiter.OutcomeThrottled
	case resp.StatusCode >= 500 && resp.StatusCode <= 599:
		return limiter.OutcomeServerError
	}
	return limiter.OutcomeOK
}

// failure is a failed request's (or body read's) class: a timeout, a
// connection error, or none when it was our doing (the caller cancelled,
// the permit was lost): not the site's health.
func failure(ctx context.Context, p *limiter.Permit, err error) limiter.OutcomeClass {
	var ne net.Error
	switch {
	case p.Err() != nil:
		return limiter.OutcomeNone
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return limiter.OutcomeTimeout
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return limiter.OutcomeNone
	}
	return limiter.OutcomeConnError
}
