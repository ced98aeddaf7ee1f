// Package logging builds the crawler's loggers: a level and a format chosen
// by name (--log-level, --log-format), durations written as "1.5s" in every
// format, and go-redis's own lines routed through the same logger.
package logging

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// The formats --log-format takes.
const (
	FormatAuto = "auto" // text on a terminal, JSON otherwise
	FormatText = "text"
	FormatJSON = "json"
)

// Levels and Formats name the values allowed, for messages.
const (
	Levels  = "debug, info, warn or error"
	Formats = "auto, text or json"
)

// ErrInvalid wraps a level or format name that is not one of those allowed.
var ErrInvalid = errors.New("logging: invalid setting")

// ParseLevel reads debug, info, warn or error (any case).
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%w: level %q: want %s", ErrInvalid, s, Levels)
}

// CheckLevel accepts what ParseLevel reads.
func CheckLevel(s string) error {
	_, err := ParseLevel(s)
	return err
}

// CheckFormat accepts auto, text or json.
func CheckFormat(s string) error {
	switch s {
	case FormatAuto, FormatText, FormatJSON:
		return nil
	}
	return fmt.Errorf("%w: format %q: want %s", ErrInvalid, s, Formats)
}

// New is a logger writing to w at level and above, in format: text, json,
// or auto (text when tty, which says whether w is a terminal; JSON
// otherwise). Durations are written as time.Duration.String gives them
// ("1.5s"), in either format. Errors wrap ErrInvalid.
func New(w io.Writer, level, format string, tty bool) (*slog.Logger, error) {
	lv, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	if err := CheckFormat(format); err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: ReplaceAttr}
	if format == FormatText || (format == FormatAuto && tty) {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that writes a
// time.Duration as a string such as "1.5s" (JSON would write nanoseconds).
func ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}
