package warc

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxHead bounds the request header fields kept for one request record.
const maxHead = 64 << 10

// Transport is an http.RoundTripper that records every exchange that goes
// out on Base in W: a request record (the request line and the header
// fields as the transport wrote them, Host and User-Agent included, and a
// body if the request can replay it with GetBody) and a response record
// (status line, headers, body as received), linked by WARC-Concurrent-To.
// It is safe for concurrent use; per-request state travels with the
// request and its body.
//
// The response record is finished when the caller reads the body to its end
// or closes it, whichever comes first. A body closed before its end (the
// caller's size limit) is recorded as far as it was read, with
// WARC-Truncated: length; one cut by a read error with "time" (a timeout)
// or "disconnect". Bodies beyond Options.MaxMemBytes are spooled to a
// temporary file, never kept whole in memory. A body never closed nor read
// to its end is never recorded.
//
// Recording never changes an exchange's outcome: RoundTrip returns what
// Base returned, and the body reads as it would without W (errors of
// recording are counted in W, see Writer.Err). A request that got no
// response is not recorded. Recording costs the caller a copy of what it
// reads; records are written by the Writer's goroutine, and closing a body
// waits only while the Writer's queue (Options.Queue) is full.
//
// Compression: like http.Transport (without DisableCompression),
// Transport asks for gzip when the request names no Accept-Encoding, has
// no Range and is not HEAD; it does
// so itself so that the response record keeps the gzip bytes the server
// sent, and decompresses for the caller as http.Transport would
// (Content-Encoding and Content-Length removed, Uncompressed set). Bodies
// are recorded de-chunked (Go removes the chunk framing and the
// Transfer-Encoding header). Header fields of the response are in Go's
// canonical form and sorted order.
type Transport struct {
	Base http.RoundTripper // nil: http.DefaultTransport
	W    *Writer           // nil: records nothing
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

// CloseIdleConnections closes Base's idle connections, if it can.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends req on Base and records the exchange in W.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.W == nil {
		return t.base().RoundTrip(req)
	}
	x := t.W.newExchange(req)
	out := req.Clone(httptrace.WithClientTrace(req.Context(), x.trace()))
	gz := req.Header.Get("Accept-Encoding") == "" && req.Header.Get("Range") == "" && req.Method != http.MethodHead
	if gz {
		out.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := t.base().RoundTrip(out)
	if err != nil {
		x.discard()
		return resp, err
	}
	resp.Request = req
	x.head(resp)
	if resp.Body == nil || resp.Body == http.NoBody {
		x.finish(true, nil)
		return resp, nil
	}
	b := &body{rc: resp.Body, x: x}
	resp.Body = b
	if gz && strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		resp.Body = &gunzip{raw: b}
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Uncompressed = true
	}
	return resp, nil
}

// exchange is one request and its response on their way to a Writer.
type exchange struct {
	w       *Writer
	uri     string
	date    time.Time
	method  string
	path    string
	host    string
	header  http.Header // the request's, for a Base that does not trace
	getBody func() (io.ReadCloser, error)
	hasBody bool

	mu           sync.Mutex // the fields below: trace hooks, Read and Close race
	ip           string
	fields       [][2]string // header fields as written, in order
	fieldSize    int
	proto        string
	cl           int64 // response Content-Length as received, -1 unknown
	req, resp    *spool
	n            int64 // response body bytes recorded
	done         bool
	truncated    string // WARC-Truncated of the response record
	reqTruncated string // of the request record
	err          error
}

func (w *Writer) newExchange(req *http.Request) *exchange {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	return &exchange{
		w: w, uri: req.URL.String(), date: time.Now(),
		method: req.Method, path: req.URL.RequestURI(), host: host,
		header: req.Header, getBody: req.GetBody,
		hasBody: req.Body != nil && req.Body != http.NoBody,
		cl:      -1, proto: "HTTP/1.1",
		req:  newSpool(w.maxMem, w.tmp),
		resp: newSpool(w.maxMem, w.tmp),
	}
}

// trace collects the remote address and the header fields the transport
// writes. A new connection (a retry) starts the fields again.
func (x *exchange) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(ci httptrace.GotConnInfo) {
			x.mu.Lock()
			defer x.mu.Unlock()
			if ci.Conn != nil {
				if h, _, err := net.SplitHostPort(ci.Conn.RemoteAddr().String()); err == nil {
					x.ip = h
				}
			}
			x.fields, x.fieldSize = x.fields[:0], 0
		},
		WroteHeaderField: func(k string, v []string) {
			x.mu.Lock()
			defer x.mu.Unlock()
			for _, s := range v {
				if x.fieldSize += len(k) + len(s) + 4; x.fieldSize <= maxHead {
					x.fields = append(x.fields, [2]string{k, s})
				}
			}
		},
	}
}

// head writes the response's status line and header into its record.
func (x *exchange) head(resp *http.Response) {
	var b bytes.Buffer
	status := resp.Status
	if status == "" {
		status = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	}
	proto := resp.Proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	fmt.Fprintf(&b, "%s %s\r\n", proto, status)
	resp.Header.Write(&b)
	b.WriteString("\r\n")
	x.mu.Lock()
	defer x.mu.Unlock()
	if resp.ProtoMajor == 2 {
		x.proto = "HTTP/2"
	}
	x.cl = resp.ContentLength
	if err := x.resp.write(b.Bytes(), false); err != nil {
		x.err = fmt.Errorf("spool: %w", err)
	}
}

// tee records body bytes the caller read.
func (x *exchange) tee(p []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done || x.err != nil {
		return
	}
	if err := x.resp.write(p, true); err != nil {
		x.err = fmt.Errorf("spool: %w", err)
		return
	}
	x.n += int64(len(p))
}

// finish completes the exchange once: eof when the body ended, readErr
// when a read failed, neither when the caller closed the body. It hands
// the exchange to the Writer.
func (x *exchange) finish(eof bool, readErr error) {
	x.mu.Lock()
	if x.done {
		x.mu.Unlock()
		return
	}
	x.done = true
	switch {
	case eof:
	case readErr != nil:
		x.truncated = "disconnect"
		var ne net.Error
		if errors.Is(readErr, context.DeadlineExceeded) || errors.Is(readErr, os.ErrDeadlineExceeded) ||
			errors.As(readErr, &ne) && ne.Timeout() {
			x.truncated = "time"
		}
	case x.cl < 0 || x.n < x.cl:
		x.truncated = "length"
	}
	if x.err == nil {
		x.err = x.request()
	}
	x.mu.Unlock()
	x.w.submit(x)
}

// request writes the request record's block: the request line, the
// header fields as written, and the body if the request can replay it.
func (x *exchange) request() error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s %s\r\n", x.method, x.path, x.proto)
	if len(x.fields) == 0 { // a Base that is not net/http's: what was asked
		fmt.Fprintf(&b, "Host: %s\r\n", x.host)
		x.header.Write(&b)
	}
	for _, f := range x.fields {
		switch {
		case f[0] == ":authority":
			fmt.Fprintf(&b, "Host: %s\r\n", f[1])
		case strings.HasPrefix(f[0], ":"): // HTTP/2 pseudo-headers: in the request line
		default:
			fmt.Fprintf(&b, "%s: %s\r\n", f[0], f[1])
		}
	}
	b.WriteString("\r\n")
	if err := x.req.write(b.Bytes(), false); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if !x.hasBody {
		return nil
	}
	if x.getBody == nil {
		x.reqTruncated = "unspecified"
		return nil
	}
	rc, err := x.getBody()
	if err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	defer rc.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := rc.Read(buf)
		if n > 0 {
			if err := x.req.write(buf[:n], true); err != nil {
				return fmt.Errorf("spool: %w", err)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("request body: %w", err)
		}
	}
}

// discard releases the spool of an exchange that will not be written.
func (x *exchange) discard() {
	x.req.close()
	x.resp.close()
}

// body tees a response body into its exchange.
type body struct {
	rc io.ReadCloser
	x  *exchange
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.x.tee(p[:n])
	}
	if err == io.EOF {
		b.x.finish(true, nil)
	} else if err != nil {
		b.x.finish(false, err)
	}
	return n, err
}

func (b *body) Close() error {
	err := b.rc.Close()
	b.x.finish(false, nil)
	return err
}

// gunzip decompresses a recorded gzip body for the caller, as
// http.Transport does when it asked for gzip itself.
type gunzip struct {
	raw *body
	zr  *gzip.Reader
	err error
}

func (g *gunzip) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.zr == nil {
		if g.zr, g.err = gzip.NewReader(g.raw); g.err != nil {
			return 0, g.err
		}
	}
	return g.zr.Read(p)
}

func (g *gunzip) Close() error { return g.raw.Close() }
