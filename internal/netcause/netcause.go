// Package netcause names why a request failed below HTTP, in the few words
// a crawl's records, logs and summaries share: "connection refused", "no
// such host", "tls: ...", "timeout", "connection reset". One rule, one
// place: robots.txt's unreachable policy and a page's failure name their
// causes here.
package netcause

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
)

// maxLen bounds a cause taken from an error's own text (Of's fallback).
const maxLen = 120

// Of names err's cause: one of the fixed names below when err wraps what
// it names, else the text of err's innermost error (at most maxLen bytes),
// and "" for a nil err.
//
//   - "no such host": DNS says the name does not exist
//   - "connection refused", "connection reset", "host unreachable",
//     "network unreachable"
//   - "timeout": a deadline or dial, read or DNS timeout
//   - "connection closed": the server hung up before a whole response
//   - "tls: ...": the TLS handshake or certificate failed, as crypto/tls
//     says it from "tls: " on
func Of(err error) string {
	if err == nil {
		return ""
	}
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case timeout(err):
		return "timeout"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "connection closed"
	}
	msg := err.Error()
	if i := strings.Index(msg, "tls: "); i >= 0 {
		return cut(msg[i:])
	}
	return cut(innermost(err).Error())
}

// timeout reports a deadline that ran out: a context's, a connection's, or
// one a net.Error reports.
func timeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// innermost follows err's single-error wrapping to its end.
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func cut(s string) string {
	if len(s) > maxLen {
		return s[:maxLen]
	}
	return s
}
