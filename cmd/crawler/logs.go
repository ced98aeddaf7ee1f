package main

import (
	"io"
	"log/slog"
	"os"

	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/internal/logging"
)

// newLogger is a command's logger: cfg's --log-level and --log-format
// (auto: text when tty, JSON otherwise), durations as "1.5s". go-redis's
// own lines go to it too, at warn level with component=redis (a failed
// dial at debug: logging.RouteRedis). cfg has
// been validated, so the settings parse.
func newLogger(cfg *config.Config, w io.Writer, tty bool) *slog.Logger {
	log, err := logging.New(w, cfg.LogLevel, cfg.LogFormat, tty)
	if err != nil { // not after Validate; still, never log nowhere
		log, _ = logging.New(w, "info", logging.FormatAuto, tty)
	}
	logging.RouteRedis(log)
	return log
}

// isTerminal reports whether w is a terminal: a character device other
// than the null device (a command started with no stdout has it there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}
