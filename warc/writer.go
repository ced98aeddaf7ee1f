// Package warc keeps what a crawl fetched as WARC 1.1 files (ISO 28500):
// a Writer owns the files of one process, a Transport records every
// request and response that goes through it.
//
// Files are gzip-compressed per record, begin with a warcinfo record, are
// named <prefix>-<timestamp>-<serial>-<pid>~<host>.warc.gz (the WARC 1.1
// recommendation, in Heritrix's form) and carry the suffix .open while
// they are written (<timestamp> is UTC to the millisecond, <serial> counts
// the process's files from 00001). An exchange is a response record and
// its request record, written one after the other in the same file; the
// request names the response in WARC-Concurrent-To, and every record names
// its file's warcinfo in WARC-Warcinfo-ID. Digests are sha1 in base32.
// Revisit records (WARC-Refers-To) are not written: every response is kept
// whole.
//
// The writer is this package's own (see the README for why); the tests
// read every file back with github.com/nlnwa/gowarc, an independent
// implementation, and check it.
package warc

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// ErrClosed is counted (Stats.Errors) for an exchange finished after its
// Writer was closed.
var ErrClosed = errors.New("warc: writer closed")

// Stats are a Writer's counts so far.
type Stats struct {
	Exchanges int64 // request/response pairs written
	Truncated int64 // of which the response body was cut (WARC-Truncated)
	Bytes     int64 // uncompressed bytes of the exchanges' records written
	Files     int64 // files started
	Errors    int64 // exchanges lost to an error (see Writer.Err)
}

// Writer writes the WARC files of one process into one directory. It is
// safe for concurrent use. Finished exchanges are handed to one goroutine,
// owned by the Writer and stopped by Close, that writes them, so neither
// gzip nor the disk holds up a caller that has its response. A nil
// *Writer records nothing.
type Writer struct {
	dir    string
	o      *Options
	stem   string // file name after the serial: <pid>~<host>.warc.gz
	max    int64
	maxMem int64
	tmp    string

	mu     sync.RWMutex // held to send on queue; held to close it
	closed bool
	queue  chan *exchange
	done   chan struct{} // closed when run has closed the last file

	// Owned by run's goroutine (and read by Close after done).
	f        *os.File
	path     string // of the file being written, without .open
	size     int64  // bytes in it
	infoID   string // its warcinfo record's id
	serial   int
	zw       *gzip.Writer
	closeErr error

	exchanges, truncated, bytes, nfiles, nerrs atomic.Int64

	errMu   sync.Mutex
	lastErr error
}

// Open creates dir if needed, checks that files can be created in it, and
// returns a Writer writing there. The first file is created by the first
// exchange. Close it once the requests it records are done.
func Open(dir string, o *Options) (*Writer, error) {
	if dir == "" {
		return nil, errors.New("warc: no directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("warc: %w", err)
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("warc: directory not writable: %w", err)
	}
	probe.Close()
	os.Remove(probe.Name())
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	w := &Writer{
		dir: dir, o: o, max: o.maxFileSize(), maxMem: o.maxMemBytes(), tmp: o.tempDir(),
		stem:  fmt.Sprintf("%d~%s.warc.gz", os.Getpid(), sanitize(host)),
		queue: make(chan *exchange, o.queue()),
		done:  make(chan struct{}),
		zw:    gzip.NewWriter(nil),
	}
	go w.run()
	return w, nil
}

// Dir is the directory the Writer writes to.
func (w *Writer) Dir() string {
	if w == nil {
		return ""
	}
	return w.dir
}

// Stats returns the counts so far (zero for a nil Writer).
func (w *Writer) Stats() Stats {
	if w == nil {
		return Stats{}
	}
	return Stats{
		Exchanges: w.exchanges.Load(), Truncated: w.truncated.Load(), Bytes: w.bytes.Load(),
		Files: w.nfiles.Load(), Errors: w.nerrs.Load(),
	}
}

// Err returns the last error that lost an exchange or failed to finish a
// file, or nil. Errors never reach the requests being recorded: the caller
// logs them from here (and Stats.Errors counts them).
func (w *Writer) Err() error {
	if w == nil {
		return nil
	}
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.lastErr
}

func (w *Writer) fail(err error) {
	w.nerrs.Add(1)
	w.errMu.Lock()
	w.lastErr = err
	w.errMu.Unlock()
}

// Close writes the exchanges already finished, closes the current file
// (syncs it and drops its .open suffix) and stops the Writer's goroutine.
// Exchanges finished after Close are counted as errors (ErrClosed). It
// returns the error of finishing the last file, or nil; it is safe to call
// twice and on a nil Writer.
func (w *Writer) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.done
	return w.closeErr
}

// submit hands a finished exchange to the writer goroutine, waiting while
// the queue is full.
func (w *Writer) submit(x *exchange) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		x.discard()
		w.fail(fmt.Errorf("%w: %s not recorded", ErrClosed, x.uri))
		return
	}
	w.queue <- x
}

// run writes queued exchanges until Close closes the queue, then closes
// the last file.
func (w *Writer) run() {
	defer close(w.done)
	for x := range w.queue {
		if err := w.write(x); err != nil {
			w.fail(fmt.Errorf("warc: %s: %w", x.uri, err))
		}
	}
	if err := w.closeFile(); err != nil {
		w.closeErr = fmt.Errorf("warc: %w", err)
		w.fail(w.closeErr)
	}
}

// write writes an exchange's response record and then its request record
// to the current file, starting one if needed, and closes the file once it
// has reached MaxFileSize. An exchange that fails is taken back out of the
// file, so a file holds whole exchanges only.
func (w *Writer) write(x *exchange) (err error) {
	defer x.discard()
	if x.err != nil {
		return x.err
	}
	if w.f == nil {
		if err := w.openFile(); err != nil {
			return err
		}
	}
	start := w.size
	defer func() {
		if err != nil {
			w.undo(start)
		}
	}()
	x.mu.Lock() // the trace hooks could still fire on a server that answered early
	ip, truncated, reqTruncated := x.ip, x.truncated, x.reqTruncated
	x.mu.Unlock()
	respID, reqID := urn(), urn()
	date := x.date.UTC().Format(time.RFC3339)
	fields := func(typ, id, ct string) [][2]string {
		f := [][2]string{{"WARC-Type", typ}, {"WARC-Record-ID", id}, {"WARC-Date", date}, {"WARC-Target-URI", x.uri}}
		if ip != "" {
			f = append(f, [2]string{"WARC-IP-Address", ip})
		}
		return append(f, [2]string{"WARC-Warcinfo-ID", w.infoID}, [2]string{"Content-Type", ct})
	}
	resp := fields("response", respID, "application/http; msgtype=response")
	if truncated != "" {
		resp = append(resp, [2]string{"WARC-Truncated", truncated})
	}
	resp = append(resp, [2]string{"WARC-Payload-Digest", digest(x.resp.payload)})
	if err := w.record(resp, x.resp); err != nil {
		return err
	}
	req := fields("request", reqID, "application/http; msgtype=request")
	req = append(req, [2]string{"WARC-Concurrent-To", respID})
	if reqTruncated != "" {
		req = append(req, [2]string{"WARC-Truncated", reqTruncated})
	}
	if err := w.record(req, x.req); err != nil {
		return err
	}
	w.exchanges.Add(1)
	if truncated != "" {
		w.truncated.Add(1)
	}
	if w.size >= w.max {
		return w.closeFile()
	}
	return nil
}

// record writes one record, as one gzip member: the fields given, then
// WARC-Block-Digest and Content-Length from the block.
func (w *Writer) record(fields [][2]string, block *spool) error {
	var h bytes.Buffer
	h.WriteString("WARC/1.1\r\n")
	for _, f := range fields {
		fmt.Fprintf(&h, "%s: %s\r\n", f[0], f[1])
	}
	fmt.Fprintf(&h, "WARC-Block-Digest: %s\r\nContent-Length: %d\r\n\r\n", digest(block.block), block.n)
	body, err := block.reader()
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	out := &counter{w: w.f}
	w.zw.Reset(out)
	_, err = w.zw.Write(h.Bytes())
	if err == nil {
		var n int64
		if n, err = io.Copy(w.zw, body); err == nil && n != block.n {
			err = fmt.Errorf("spool: %d of %d bytes", n, block.n)
		}
	}
	if err == nil {
		_, err = io.WriteString(w.zw, "\r\n\r\n")
	}
	if err == nil {
		err = w.zw.Close()
	}
	w.size += out.n
	if err != nil {
		return err
	}
	w.bytes.Add(int64(h.Len()) + block.n + 4)
	return nil
}

// openFile starts a file: <prefix>-<timestamp>-<serial>-<pid>~<host>.warc.gz,
// named .open until closed, with its warcinfo record.
func (w *Writer) openFile() error {
	w.serial++
	t := time.Now().UTC()
	ts := t.Format("20060102150405") + fmt.Sprintf("%03d", t.Nanosecond()/1e6)
	name := fmt.Sprintf("%s-%s-%05d-%s", w.o.prefix(), ts, w.serial, w.stem)
	path := filepath.Join(w.dir, name)
	f, err := os.OpenFile(path+".open", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w.f, w.path, w.size, w.infoID = f, path, 0, urn()
	w.nfiles.Add(1)
	info := newSpool(w.maxMem, w.tmp)
	defer info.close()
	host, _ := os.Hostname()
	for _, kv := range [][2]string{
		{"software", w.o.software()},
		{"format", "WARC File Format 1.1"},
		{"conformsTo", "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"},
		{"hostname", host},
		{"robots", "obey"},
		{"operator", w.o.get(func(o *Options) string { return o.Operator })},
		{"isPartOf", w.o.get(func(o *Options) string { return o.IsPartOf })},
		{"description", w.o.get(func(o *Options) string { return o.Description })},
	} {
		if kv[1] != "" {
			info.write([]byte(kv[0]+": "+kv[1]+"\r\n"), false)
		}
	}
	err = w.record([][2]string{
		{"WARC-Type", "warcinfo"}, {"WARC-Record-ID", w.infoID},
		{"WARC-Date", t.Format(time.RFC3339)}, {"WARC-Filename", name},
		{"Content-Type", "application/warc-fields"},
	}, info)
	if err != nil {
		f.Close()
		os.Remove(path + ".open")
		w.f = nil
		return err
	}
	return nil
}

// undo takes a failed exchange back out of the file; a file that cannot
// be cut back is closed as it is.
func (w *Writer) undo(size int64) {
	if w.f == nil {
		return
	}
	if err := w.f.Truncate(size); err == nil {
		if _, err := w.f.Seek(size, io.SeekStart); err == nil {
			w.size = size
			return
		}
	}
	if err := w.closeFile(); err != nil {
		w.fail(fmt.Errorf("warc: %w", err))
	}
}

// closeFile syncs and closes the current file and drops its .open suffix.
func (w *Writer) closeFile() error {
	if w.f == nil {
		return nil
	}
	f := w.f
	w.f = nil
	err := errors.Join(f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(w.path+".open", w.path)
	}
	if err != nil {
		return fmt.Errorf("close %s: %w", filepath.Base(w.path), err)
	}
	return nil
}

// counter counts the bytes written through it.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// urn is a new record id.
func urn() string { return "<" + uuid.New().URN() + ">" }
