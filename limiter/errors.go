package limiter

import (
	"errors"
	"fmt"
	"time"

	"github.com/polite-crawler/polite/internal/luafn"
)

var (
	// ErrBusy is returned by TryAcquire when the site has no free permit (or its
	// crawl delay has not passed). The error is a *BusyError that says how long
	// to wait before trying again.
	ErrBusy = errors.New("limiter: site busy")
	// ErrPermitLost means a permit's lease ran out before it was refreshed (the
	// holder stalled, Redis was unreachable, or Redis lost its data): another
	// worker may already hold the slot, so work under the permit must stop.
	ErrPermitLost = errors.New("limiter: permit lost")
	// ErrClosed is returned by calls on a Limiter after Close.
	ErrClosed = errors.New("limiter: closed")
	// ErrInvalid wraps bad arguments: an empty or unusable site name, a limit
	// below 1, a negative delay.
	ErrInvalid = errors.New("limiter: invalid argument")
)

// BusyError is the error TryAcquire returns when a site is full. It matches
// ErrBusy with errors.Is.
type BusyError struct {
	Site string
	// Full is true when every permit is out; false when a crawl delay, a
	// backoff or a recent Redis restart (see Options.NoRestartGuard) is all
	// that stands in the way.
	Full bool
	// Wait is a hint from Redis. Not Full: exactly how long the delay has
	// left. Full: when the oldest lease could run out if its holder died;
	// permits are usually released much sooner.
	Wait time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("limiter: site %s busy (retry in %s)", e.Site, e.Wait)
}

// Unwrap makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Unwrap() error { return ErrBusy }

// ScriptMissing reports whether err, a pipeline's error (ReleaseOn,
// KeepOn, TryAcquireRuleOn), means a node did not have a script or
// function the pipeline called: if it was the limiter's, that call did
// nothing there and its after runs it again (the pipeline's first error
// is all Exec reports: another command's may hide it, or be it).
func ScriptMissing(err error) bool {
	return luafn.Missing(err)
}
