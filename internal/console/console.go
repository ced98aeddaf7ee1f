// Package console shares one terminal between a progress line, redrawn in
// place, and log records, so that no record is ever written onto the
// progress line's text.
package console

import (
	"bytes"
	"io"
	"sync"
)

// clearLine moves the cursor to the start of the line and erases it.
const clearLine = "\r\033[K"

// Console owns the progress line. Progress draws it; the writers from
// Writer clear it before each write and draw it again after a write that
// ends a line. All of them write under one lock, so they may be used from
// any number of goroutines.
type Console struct {
	// Width is the columns a progress line is cut to, so that it never
	// wraps (a wrapped line could not be cleared in place); 0: the
	// terminal's width when out is one, else no limit. Set it before use.
	Width int

	mu    sync.Mutex
	out   io.Writer // where the progress line is drawn
	tty   bool
	last  string // the progress line, "" before the first
	shown bool   // the progress line is on screen, the cursor after it
}

// New is a console drawing progress on out. isTerminal says whether out is
// a terminal (the same one the log writers write to, if they write to
// one): only then is the progress line drawn in place.
func New(out io.Writer, isTerminal bool) *Console {
	return &Console{out: out, tty: isTerminal}
}

// Terminal reports whether the progress line is drawn in place.
func (c *Console) Terminal() bool { return c.tty }

// Progress shows line. On a terminal it replaces the progress line on
// screen (line must not hold a newline); otherwise it writes line and a
// newline. On a terminal, a line longer than Width is cut.
func (c *Console) Progress(line string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tty {
		_, err := io.WriteString(c.out, line+"\n")
		return err
	}
	if w := c.width(); w > 1 {
		if r := []rune(line); len(r) > w-1 { // the last column would wrap on some terminals
			line = string(r[:w-1])
		}
	}
	c.last, c.shown = line, true
	_, err := io.WriteString(c.out, clearLine+line)
	return err
}

func (c *Console) width() int {
	if c.Width > 0 {
		return c.Width
	}
	return columns(c.out)
}

// End ends the progress line on screen with a newline, leaving its last
// state in view, so that what is written next starts on a line of its own.
// Progress may draw a new line afterwards.
func (c *Console) End() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shown {
		io.WriteString(c.out, "\n")
	}
	c.last, c.shown = "", false
}

// Writer is w behind the console: on a terminal, each Write first clears
// the progress line, writes p whole, and, when p ends a line (as every
// slog record does), draws the progress line again below it. Elsewhere it
// writes to w as is, under the console's lock.
func (c *Console) Writer(w io.Writer) io.Writer { return &writer{c: c, w: w} }

type writer struct {
	c *Console
	w io.Writer
}

func (x *writer) Write(p []byte) (int, error) {
	c := x.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shown {
		io.WriteString(c.out, clearLine)
		c.shown = false
	}
	n, err := x.w.Write(p)
	if err == nil && c.tty && c.last != "" && bytes.HasSuffix(p, []byte("\n")) {
		io.WriteString(c.out, c.last)
		c.shown = true
	}
	return n, err
}
