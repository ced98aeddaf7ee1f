package console_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/polite-crawler/polite/internal/console"
)

// screen plays bytes written to a terminal: \r returns to the start of
// the line, ESC [ K erases to its end, \n starts a new line. It returns
// the lines as they end up on screen.
func screen(t *testing.T, b []byte) []string {
	t.Helper()
	var lines []string
	var cur []rune
	col := 0
	s := []rune(string(b))
	for i := 0; i < len(s); i++ {
		switch r := s[i]; {
		case r == '\r':
			col = 0
		case r == '\n':
			lines, cur, col = append(lines, string(cur)), nil, 0
		case r == '\033':
			if i+2 >= len(s) || s[i+1] != '[' || s[i+2] != 'K' {
				t.Fatalf("unexpected escape at %d: %q", i, string(s[i:min(i+6, len(s))]))
			}
			cur, i = cur[:col], i+2
		default:
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
		}
	}
	return append(lines, string(cur))
}

// Progress ticks and log records from several goroutines, progress on
// "stdout" and logs on "stderr" of one terminal: every record is on a
// line of its own, whole, and the last progress line is on screen at the
// end.
func TestLogsNeverShareTheProgressLine(t *testing.T) {
	var term bytes.Buffer // stdout and stderr of one terminal
	c := console.New(&term, true)
	log := slog.New(slog.NewTextHandler(c.Writer(&term), nil))
	var wg sync.WaitGroup
	const n = 200
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := range n {
			c.Progress(fmt.Sprintf("PROGRESS %d pages   ", i))
		}
	}()
	for g := range 2 {
		go func() {
			defer wg.Done()
			for i := range n {
				log.Info("record", "g", g, "i", i)
			}
		}()
	}
	wg.Wait()
	c.Progress("PROGRESS last")
	lines := screen(t, term.Bytes())
	records := 0
	for _, l := range lines {
		hasLog, hasProgress := strings.Contains(l, "msg=record"), strings.Contains(l, "PROGRESS")
		if hasLog && hasProgress {
			t.Fatalf("a log record shares a line with progress: %q", l)
		}
		if hasLog {
			records++
			if !strings.HasPrefix(l, "time=") || !strings.Contains(l, " i=") {
				t.Errorf("a record is cut: %q", l)
			}
		}
		if hasProgress && l != "PROGRESS last" {
			t.Errorf("a progress line stayed on screen: %q", l)
		}
	}
	if records != 2*n {
		t.Errorf("%d records on screen, want %d", records, 2*n)
	}
	if lines[len(lines)-1] != "PROGRESS last" {
		t.Errorf("the screen ends with %q, want the progress line", lines[len(lines)-1])
	}
}

// After End the progress line stays on screen, and what follows is on
// lines of its own.
func TestEndKeepsTheLastProgressLine(t *testing.T) {
	var term bytes.Buffer
	c := console.New(&term, true)
	w := c.Writer(&term)
	c.Progress("PROGRESS 1")
	c.Progress("PROGRESS 2")
	c.End()
	fmt.Fprintln(w, "summary")
	got := screen(t, term.Bytes())
	want := []string{"PROGRESS 2", "summary", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("screen %q, want %q", got, want)
	}
}

// Not on a terminal: no escapes, each progress line ends with a newline.
func TestNotATerminal(t *testing.T) {
	var out, errs bytes.Buffer
	c := console.New(&out, false)
	c.Progress("p1")
	fmt.Fprintln(c.Writer(&errs), "log")
	c.Progress("p2")
	c.End()
	if out.String() != "p1\np2\n" || errs.String() != "log\n" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errs.String())
	}
}

// A progress line wider than the terminal is cut short of its last
// column, so that it never wraps onto a second row, which \r could not
// clear.
func TestProgressIsCutToTheWidth(t *testing.T) {
	var term bytes.Buffer
	c := console.New(&term, true)
	c.Width = 10
	c.Progress("0123456789abcdef")
	fmt.Fprintln(c.Writer(&term), "log")
	got := screen(t, term.Bytes())
	if strings.Join(got, "|") != "log|012345678" {
		t.Fatalf("screen %q", got)
	}
}
