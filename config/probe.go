package config

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// probeTimeout bounds each step of a probe: the dial, and the wait for an
// answer to PING.
const probeTimeout = 1500 * time.Millisecond

// probe finds out what listens at addr when a client's PING failed after
// connecting (a timeout, a reply that is not Redis's protocol, a closed
// connection): it sends an inline PING over plain TCP and reads what comes
// back. A Redis answer to a client that wanted TLS means the server does
// not speak TLS; an HTTP answer or other bytes, or silence, mean it is not
// a Redis server; a connection closed without a word is tried with TLS. It
// returns ErrUnreachable (retry) when it learns nothing that will not go
// away, such as a failed dial.
func probe(ctx context.Context, addr string, wantTLS *tls.Config) (kind error, why string) {
	answer, err := askPlain(ctx, addr)
	switch {
	case len(answer) > 0 && bytes.ContainsAny(answer[:1], "+-"):
		if wantTLS != nil {
			return ErrNotTLS, "does not speak TLS (use redis:// rather than rediss://)"
		}
		return ErrUnreachable, "" // Redis, answering now
	case bytes.HasPrefix(answer, []byte("HTTP/")):
		line, _, _ := bytes.Cut(answer, []byte("\r\n"))
		return ErrNotRedis, fmt.Sprintf("is not a Redis server (it answered like HTTP: %q; is this the port of a web server?)", line)
	case len(answer) > 0:
		return ErrNotRedis, fmt.Sprintf("is not a Redis server (it answered PING with %q)", answer)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ErrNotRedis, fmt.Sprintf("is not a Redis server, or is stuck: it accepts connections but did not answer PING within %s", probeTimeout)
	case err != nil && !isDial(err) && wantTLS == nil && speaksTLS(ctx, addr):
		return ErrOnlyTLS, "speaks only TLS (use rediss:// rather than redis://)"
	case err != nil && !isDial(err) && wantTLS == nil:
		return ErrNotRedis, "is not a Redis server (it closed the connection without answering PING)"
	}
	return ErrUnreachable, ""
}

// askPlain sends an inline PING over a fresh TCP connection and returns
// the first bytes of the answer (up to 256), or the error that ended the
// wait for them.
func askPlain(ctx context.Context, addr string) ([]byte, error) {
	d := net.Dialer{Timeout: probeTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return nil, err
	}
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	return buf[:n], err
}

// speaksTLS says whether a TLS handshake with addr completes (whatever
// its certificate: this only tells TLS from not).
func speaksTLS(ctx context.Context, addr string) bool {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: probeTimeout}, Config: &tls.Config{InsecureSkipVerify: true}}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
