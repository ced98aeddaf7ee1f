package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Exit codes of a command a signal stopped: 128 plus the signal's number,
// as shells report a process a signal ended, whether the command then
// stopped cleanly or not.
const (
	exitInterrupted = 128 + int(syscall.SIGINT)  // 130
	exitTerminated  = 128 + int(syscall.SIGTERM) // 143
)

// stopHint is what a command says when the first SIGINT stops it.
const stopHint = "stopping; press Ctrl-C again to quit at once"

// stopSignal is the cause of a context a signal stopped.
type stopSignal struct{ sig syscall.Signal }

func (s stopSignal) Error() string { return "stopped by " + s.sig.String() }

// signalled is the signal that stopped ctx, or 0.
func signalled(ctx context.Context) syscall.Signal {
	var s stopSignal
	if errors.As(context.Cause(ctx), &s) {
		return s.sig
	}
	return 0
}

// signalExit is code, or, when a signal stopped ctx before the command's
// work was done (finished), exitInterrupted or exitTerminated.
func signalExit(ctx context.Context, code int) int {
	if n, ok := ctx.Value(noticeKey{}).(*stopNotice); ok {
		n.mu.Lock()
		late := n.late
		n.mu.Unlock()
		if late {
			return code
		}
	}
	switch signalled(ctx) {
	case syscall.SIGINT:
		return exitInterrupted
	case syscall.SIGTERM:
		return exitTerminated
	}
	return code
}

// stopNotice is how the running command tells that it is stopping (see
// onStop); without one, a line on stderr.
type stopNotice struct {
	mu  sync.Mutex
	say func(hint string)
	// over is set when the command's work is done (finished); late, when
	// the first signal came after that: it then ends a wait, not the work,
	// and the exit code stays the command's.
	over, late bool
}

// finished tells that the command's work under ctx is done: a signal from
// now on does not change its exit code (signalExit).
func finished(ctx context.Context) {
	if n, ok := ctx.Value(noticeKey{}).(*stopNotice); ok {
		n.mu.Lock()
		n.over = true
		n.mu.Unlock()
	}
}

type noticeKey struct{}

// onStop makes say the way the command running under ctx tells that a
// signal stops it (through its logger, so that the line does not land on
// a progress line); hint is stopHint for SIGINT, "stopping" for SIGTERM.
// Outside notifyStop's context it does nothing.
func onStop(ctx context.Context, say func(hint string)) {
	if n, ok := ctx.Value(noticeKey{}).(*stopNotice); ok {
		n.mu.Lock()
		n.say = say
		n.mu.Unlock()
	}
}

// stop acts on the first signal: it notes whether the command's work was
// already over (the signal then ends a wait, see signalExit), cancels the
// command's context with sig as the cause, and tells the user.
func (n *stopNotice) stop(sig syscall.Signal, cancel context.CancelCauseFunc) {
	n.mu.Lock()
	n.late = n.over
	n.mu.Unlock()
	cancel(stopSignal{sig})
	hint := "stopping"
	if sig == syscall.SIGINT {
		hint = stopHint
	}
	n.mu.Lock()
	say := n.say
	n.mu.Unlock()
	say(hint)
}

// notifyStop returns a context that the first SIGINT or SIGTERM cancels,
// with a stopSignal as its cause, and then tells the user (see onStop): the
// command stops gracefully. A second SIGINT (Ctrl-C pressed again) calls
// quit(exitInterrupted) at once; SIGTERM never does (send SIGKILL for
// that), so a process group interrupted from a terminal and then sent
// SIGTERM by its parent still stops gracefully. stop ends the watch and
// restores the signals' default handling.
func notifyStop(parent context.Context, stderr io.Writer, quit func(code int)) (ctx context.Context, stop func()) {
	n := &stopNotice{say: func(hint string) { fmt.Fprintln(stderr, "crawler: "+hint) }}
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, noticeKey{}, n))
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done, ended := make(chan struct{}), make(chan struct{})
	go func() { // owned by stop
		defer close(ended)
		for stopped := false; ; {
			var sig os.Signal
			select {
			case <-done:
				return
			case sig = <-sigs:
			}
			switch {
			case !stopped:
				stopped = true
				n.stop(sig.(syscall.Signal), cancel)
			case sig == syscall.SIGINT:
				fmt.Fprintln(stderr, "crawler: interrupted again: quitting at once")
				quit(exitInterrupted)
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		<-ended
		cancel(nil)
	}
}
