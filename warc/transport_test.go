package warc

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// noise returns n incompressible bytes, the same for the same seed.
func noise(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

var (
	bigBody  = noise(1, 3<<20) // > 1 MiB: spooled
	gzPlain  = bytes.Repeat([]byte("compressible text "), 2000)
	gzBytes  = gzipped(gzPlain)
	chunkOne = []byte("first chunk;")
	chunkTwo = []byte("second chunk")
)

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// server is a site with each kind of response a crawl meets.
func server(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>hello</html>")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(bigBody)))
		w.Write(bigBody)
	})
	mux.HandleFunc("/gz", func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Write(gzPlain)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gzBytes)
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Write(chunkOne)
		w.(http.Flusher).Flush()
		w.Write(chunkTwo)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/page", http.StatusFound)
	})
	mux.HandleFunc("/n/", func(w http.ResponseWriter, r *http.Request) {
		w.Write(noise(int64(len(r.URL.Path)*7919+int(r.URL.Path[len(r.URL.Path)-1])), 16<<10))
	})
	mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly this!")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, r.Body)
	})
	srv := httptest.NewServer(mux) // NotFound for the rest
	t.Cleanup(srv.Close)
	return srv
}

func open(t *testing.T, o *Options) (*Writer, string) {
	t.Helper()
	dir := t.TempDir()
	w, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, dir
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("User-Agent", "test-agent/1.0")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestExchanges fetches a page, a large body, a gzip body, a chunked body,
// a 404 and a redirect through a Transport and reads the files back: one
// response record per response, the body as the server sent it, the
// caller's body unchanged, the request as sent, linked by Concurrent-To.
func TestExchanges(t *testing.T) {
	srv := server(t)
	spool := t.TempDir()
	w, dir := open(t, &Options{MaxMemBytes: 64 << 10, TempDir: spool, Prefix: "test crawl"})
	c := &http.Client{Transport: &Transport{Base: srv.Client().Transport, W: w}}

	want := map[string][]byte{ // what the caller must read
		"/page": []byte("<html>hello</html>"), "/gz": gzPlain,
		"/chunked": append(append([]byte{}, chunkOne...), chunkTwo...),
		"/missing": []byte("404 page not found\n"), "/redirect": []byte("<html>hello</html>"),
	}
	for _, path := range []string{"/page", "/gz", "/chunked", "/missing", "/redirect"} {
		if _, b := get(t, c, srv.URL+path); !bytes.Equal(b, want[path]) {
			t.Errorf("%s: caller read %q, want %q", path, b, want[path])
		}
	}
	// The large body: read through, checked spooled while still open.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/big", nil)
	req.Header.Set("User-Agent", "test-agent/1.0")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.LimitReader(resp.Body, int64(len(bigBody)-1)))
	if err != nil || !bytes.Equal(got, bigBody[:len(bigBody)-1]) {
		t.Fatalf("/big: caller read %d bytes (%v)", len(got), err)
	}
	if spooled, _ := os.ReadDir(spool); len(spooled) == 0 {
		t.Error("a 3 MiB body in flight left nothing in TempDir: not spooled")
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Errorf("spool files left after Close: %d", len(left))
	}
	if s := w.Stats(); s.Exchanges != 7 || s.Errors != 0 || s.Truncated != 0 || s.Files != 1 {
		t.Errorf("stats %+v, want 7 exchanges in 1 file, no errors or truncation (%v)", s, w.Err())
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	pattern := regexp.MustCompile(fmt.Sprintf(`^test_crawl-\d{17}-00001-%d~[A-Za-z0-9._-]+\.warc\.gz$`, os.Getpid()))
	if len(names) != 1 || !pattern.MatchString(filepath.Base(names[0])) {
		t.Errorf("files %v, want one named like %s", names, pattern)
	}

	recs := readDir(t, dir)
	if !strings.Contains(recs[0].fields, "software: "+DefaultSoftware) || !strings.Contains(recs[0].fields, "format: WARC File Format 1.1") {
		t.Errorf("warcinfo block %q", recs[0].fields)
	}
	byURI := exchanges(t, recs)
	stored := map[string]struct {
		status int
		body   []byte
	}{
		"/page": {200, want["/page"]}, "/gz": {200, gzBytes}, "/chunked": {200, want["/chunked"]},
		"/missing": {404, want["/missing"]}, "/redirect": {302, nil}, "/big": {200, bigBody},
	}
	for path, s := range stored {
		ps := byURI[srv.URL+path]
		if path == "/page" && len(ps) != 2 || path != "/page" && len(ps) != 1 {
			t.Errorf("%s: %d exchanges recorded", path, len(ps))
			continue
		}
		p := ps[0]
		if p.resp.status != s.status {
			t.Errorf("%s: status %d recorded, want %d", path, p.resp.status, s.status)
		}
		if s.body != nil && !bytes.Equal(p.resp.payload, s.body) {
			t.Errorf("%s: payload of %d bytes recorded, want the %d the server sent", path, len(p.resp.payload), len(s.body))
		}
		if p.resp.truncated != "" || p.resp.ip != "127.0.0.1" {
			t.Errorf("%s: truncated %q, ip %q", path, p.resp.truncated, p.resp.ip)
		}
		if !strings.HasPrefix(p.req.head, "GET "+path+" HTTP/1.1\r\n") ||
			!strings.Contains(p.req.head, "\r\nHost: "+strings.TrimPrefix(srv.URL, "http://")+"\r\n") ||
			!strings.Contains(p.req.head, "\r\nUser-Agent: test-agent/1.0\r\n") ||
			!strings.Contains(p.req.head, "\r\nAccept-Encoding: gzip\r\n") {
			t.Errorf("%s: request head %q", path, p.req.head)
		}
	}
}

// TestTruncated closes a body after reading part of it: the record holds
// what was read, marked WARC-Truncated: length; the caller is unaffected.
func TestTruncated(t *testing.T) {
	srv := server(t)
	w, dir := open(t, nil)
	c := &http.Client{Transport: &Transport{Base: srv.Client().Transport, W: w}}
	resp, err := c.Get(srv.URL + "/big")
	if err != nil {
		t.Fatal(err)
	}
	const n = 100 << 10
	got, err := io.ReadAll(io.LimitReader(resp.Body, n))
	if err != nil || !bytes.Equal(got, bigBody[:n]) {
		t.Fatalf("caller read %d bytes (%v)", len(got), err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if s := w.Stats(); s.Exchanges != 1 || s.Truncated != 1 {
		t.Errorf("stats %+v, want 1 exchange, truncated", s)
	}
	p := exchanges(t, readDir(t, dir))[srv.URL+"/big"]
	if len(p) != 1 {
		t.Fatalf("%d exchanges recorded for /big", len(p))
	}
	if p[0].resp.truncated != "length" || !bytes.Equal(p[0].resp.payload, bigBody[:n]) {
		t.Errorf("truncated %q, %d bytes recorded; want length, the %d read", p[0].resp.truncated, len(p[0].resp.payload), n)
	}
}

// TestOddExchanges: a body cut by the server (disconnect), a HEAD (no
// body at all) and a POST (its body in the request record).
func TestOddExchanges(t *testing.T) {
	srv := server(t)
	w, dir := open(t, nil)
	c := &http.Client{Transport: &Transport{Base: srv.Client().Transport, W: w}}
	resp, err := c.Get(srv.URL + "/cut")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); string(b) != "only this!" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("/cut: read %q, %v; want the 10 bytes sent and io.ErrUnexpectedEOF", b, err)
	}
	resp.Body.Close()
	if resp, err = c.Head(srv.URL + "/page"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD: %v", err)
	}
	resp.Body.Close()
	if resp, err = c.Post(srv.URL+"/echo", "text/plain", strings.NewReader("a=b&c=d")); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "a=b&c=d" {
		t.Fatalf("POST echoed %q", b)
	}
	resp.Body.Close()
	w.Close()

	byURI := exchanges(t, readDir(t, dir))
	if p := byURI[srv.URL+"/cut"]; len(p) != 1 || p[0].resp.truncated != "disconnect" || string(p[0].resp.payload) != "only this!" {
		t.Errorf("/cut: %+v, want one response truncated by disconnect with the 10 bytes", p)
	}
	if p := byURI[srv.URL+"/page"]; len(p) != 1 || p[0].resp.status != 200 || len(p[0].resp.payload) != 0 ||
		p[0].resp.truncated != "" || !strings.HasPrefix(p[0].req.head, "HEAD /page ") {
		t.Errorf("HEAD /page: %+v", p)
	}
	if p := byURI[srv.URL+"/echo"]; len(p) != 1 || string(p[0].req.payload) != "a=b&c=d" || string(p[0].resp.payload) != "a=b&c=d" ||
		!strings.HasPrefix(p[0].req.head, "POST /echo ") {
		t.Errorf("POST /echo: %+v", p)
	}
}

// TestConcurrent records requests from many goroutines at once (run with
// -race): each response is in the files once, with its own body.
func TestConcurrent(t *testing.T) {
	srv := server(t)
	w, dir := open(t, &Options{Queue: 2, MaxMemBytes: 4 << 10})
	c := &http.Client{Transport: &Transport{Base: srv.Client().Transport, W: w}}
	const workers, each = 8, 6
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for j := range each {
				get(t, c, fmt.Sprintf("%s/n/%d-%d", srv.URL, i, j))
			}
		})
	}
	wg.Wait()
	w.Close()
	byURI := exchanges(t, readDir(t, dir))
	for i := range workers {
		for j := range each {
			u := fmt.Sprintf("%s/n/%d-%d", srv.URL, i, j)
			path := strings.TrimPrefix(u, srv.URL)
			want := noise(int64(len(path)*7919+int(path[len(path)-1])), 16<<10)
			if ps := byURI[u]; len(ps) != 1 || !bytes.Equal(ps[0].resp.payload, want) {
				t.Errorf("%s: %d exchanges recorded, or not its body", u, len(ps))
			}
		}
	}
	if len(byURI) != workers*each {
		t.Errorf("%d URLs recorded, want %d", len(byURI), workers*each)
	}
}

// TestRotation writes past a small MaxFileSize: several files, each whole
// (warcinfo first, exchanges never split), every exchange once.
func TestRotation(t *testing.T) {
	srv := server(t)
	w, dir := open(t, &Options{MaxFileSize: 64 << 10})
	c := &http.Client{Transport: &Transport{Base: srv.Client().Transport, W: w}}
	const n = 20 // 16 KiB each: about 5 files
	for i := range n {
		get(t, c, fmt.Sprintf("%s/n/r%d", srv.URL, i))
	}
	w.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(names) < 2 || w.Stats().Files != int64(len(names)) {
		t.Fatalf("%d files (stats %+v), want several", len(names), w.Stats())
	}
	for _, name := range names {
		if fi, _ := os.Stat(name); fi.Size() > 64<<10+32<<10 {
			t.Errorf("%s: %d bytes, far past MaxFileSize", name, fi.Size())
		}
	}
	if got := exchanges(t, readDir(t, dir)); len(got) != n {
		t.Errorf("%d exchanges read back, want %d", len(got), n)
	}
}

// TestOpenWhileWriting: the file being written is named .open until Close.
func TestOpenWhileWriting(t *testing.T) {
	srv := server(t)
	w, dir := open(t, nil)
	c := &http.Client{Transport: &Transport{Base: srv.Client().Transport, W: w}}
	get(t, c, srv.URL+"/page")
	// The exchange is written by the Writer's goroutine; Close waits for it.
	for range 200 {
		if open, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz.open")); len(open) == 1 {
			break
		}
		waitABit()
	}
	if open, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz.open")); len(open) != 1 {
		t.Fatalf("open files %v while writing, want one", open)
	}
	if done, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz")); len(done) != 0 {
		t.Fatalf("finished files %v before Close", done)
	}
	w.Close()
	if got := exchanges(t, readDir(t, dir)); len(got) != 1 {
		t.Errorf("%d exchanges after Close", len(got))
	}
}

// TestWriteErrors: when files cannot be written, requests still succeed
// with their bodies, and the errors are counted and reported.
func TestWriteErrors(t *testing.T) {
	srv := server(t)
	w, dir := open(t, nil)
	c := &http.Client{Transport: &Transport{Base: srv.Client().Transport, W: w}}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if resp, b := get(t, c, srv.URL+"/page"); resp.StatusCode != 200 || string(b) != "<html>hello</html>" {
			t.Fatalf("with an unwritable directory: %d %q", resp.StatusCode, b)
		}
	}
	w.Close()
	if s := w.Stats(); s.Errors != 3 || s.Exchanges != 0 || w.Err() == nil {
		t.Errorf("stats %+v, err %v: want 3 errors", s, w.Err())
	}

	// After Close: still fetched, counted as ErrClosed.
	if resp, b := get(t, c, srv.URL+"/page"); resp.StatusCode != 200 || string(b) != "<html>hello</html>" {
		t.Fatalf("after Close: %d %q", resp.StatusCode, b)
	}
	if s := w.Stats(); s.Errors != 4 || !errors.Is(w.Err(), ErrClosed) {
		t.Errorf("after Close: stats %+v, err %v", s, w.Err())
	}
}

// TestUndo: an exchange that fails half-way through its records (here its
// spool file lost bytes) is cut back out of the file; the exchanges before
// and after it are whole.
func TestUndo(t *testing.T) {
	srv := server(t)
	w, dir := open(t, &Options{MaxMemBytes: 1 << 10})
	c := &http.Client{Transport: &Transport{Base: srv.Client().Transport, W: w}}
	get(t, c, srv.URL+"/page")

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/big", nil)
	x := w.newExchange(req)
	x.head(&http.Response{StatusCode: 200, Proto: "HTTP/1.1", Header: http.Header{}, ContentLength: -1})
	x.tee(bigBody[:64<<10])
	if x.resp.f == nil {
		t.Fatal("64 KiB not spooled to a file")
	}
	if err := x.resp.f.Truncate(10 << 10); err != nil {
		t.Fatal(err)
	}
	x.finish(true, nil)

	get(t, c, srv.URL+"/page")
	w.Close()
	if s := w.Stats(); s.Errors != 1 || s.Exchanges != 2 || !strings.Contains(fmt.Sprint(w.Err()), "spool") {
		t.Errorf("stats %+v, err %v: want 2 exchanges and the spool error", s, w.Err())
	}
	byURI := exchanges(t, readDir(t, dir))
	if len(byURI[srv.URL+"/page"]) != 2 || len(byURI[srv.URL+"/big"]) != 0 {
		t.Errorf("exchanges read back: %d of /page, %d of /big; want 2 and 0", len(byURI[srv.URL+"/page"]), len(byURI[srv.URL+"/big"]))
	}
}

// TestNilWriter: a Transport without a Writer only passes requests on.
func TestNilWriter(t *testing.T) {
	srv := server(t)
	c := &http.Client{Transport: &Transport{Base: srv.Client().Transport}}
	if _, b := get(t, c, srv.URL+"/gz"); !bytes.Equal(b, gzPlain) {
		t.Errorf("read %d bytes", len(b))
	}
	var w *Writer
	if w.Close() != nil || w.Stats() != (Stats{}) || w.Err() != nil {
		t.Error("nil Writer is not inert")
	}
}

func waitABit() { time.Sleep(10 * time.Millisecond) }
