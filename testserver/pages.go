package testserver

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serve serves one request of the site and records it; done is called
// once, just after the site counts the request ended.
func (s *site) serve(w http.ResponseWriter, r *http.Request, done func()) {
	path := r.URL.Path
	robotsFile := path == "/robots.txt" || strings.HasPrefix(path, "/robots-hop/")
	fragile := !robotsFile && s.spec.Fragile.On()
	inFlight := 0 // governed requests in flight, this one included
	if fragile {
		inFlight = int(s.busy.Add(1))
	}
	req := s.rec.begin(path, !robotsFile && s.rules.disallowed(path), path == "/robots.txt")
	var cw *countingWriter
	cw = &countingWriter{ResponseWriter: w, status: http.StatusOK, req: req, size: -1,
		end: func(status int, bytes int64) {
			s.rec.end(req, status, bytes, cw.wroteHeader)
			if fragile {
				s.busy.Add(-1)
			}
			done()
		}}
	defer cw.finish()
	if robotsFile {
		s.serveRobots(cw, r)
		return
	}
	wait := s.latency()
	if fragile {
		var refuse bool
		if wait, refuse = s.spec.Fragile.latency(inFlight); refuse {
			s.rec.overloaded()
			http.Error(cw, "overloaded: too many requests in flight (on purpose)", http.StatusServiceUnavailable)
			return
		}
	}
	if !s.wait(r, wait) {
		return
	}
	s.servePage(cw, r)
}

func (s *site) serveRobots(w http.ResponseWriter, r *http.Request) {
	rb := s.spec.Robots
	hop := 0
	if h, ok := strings.CutPrefix(r.URL.Path, "/robots-hop/"); ok {
		hop, _ = strconv.Atoi(strings.TrimSuffix(h, ".txt"))
	} else if !s.wait(r, time.Duration(rb.Delay)) {
		return
	}
	if hop < rb.RedirectHops {
		http.Redirect(w, r, fmt.Sprintf("/robots-hop/%d.txt", hop+1), http.StatusMovedPermanently)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if rb.Status != 0 && rb.Status != http.StatusOK {
		if rb.Status == http.StatusTooManyRequests || rb.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(rb.Status)
		io.WriteString(w, http.StatusText(rb.Status)+"\n")
		return
	}
	io.WriteString(w, s.robots)
}

func (s *site) servePage(w http.ResponseWriter, r *http.Request) {
	kind, num := splitPath(r.URL.Path)
	if kind == "" && num < 0 {
		s.writePage(w, 0, "/")
		return
	}
	if num < 0 || num >= s.spec.Pages {
		http.NotFound(w, r)
		return
	}
	switch kind {
	case "p", "private", "archive":
		s.writePage(w, num, r.URL.Path)
	case "slow":
		s.stream(w, r, s.spec.PageBytes, time.Duration(s.spec.SlowFor), "text/html; charset=utf-8")
	case "retry":
		if s.firstRetry(num) {
			// 429 says "1" (seconds); 503 names the instant 2 s on as an HTTP
			// date, which a client must count from this Date, its own clock
			// may be wrong. Either way the site holds the client to it.
			code, now := http.StatusServiceUnavailable, time.Now()
			until := now.Add(2 * time.Second).Truncate(time.Second)
			w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
			w.Header().Set("Retry-After", until.UTC().Format(http.TimeFormat))
			if num%2 == 1 {
				code, until = http.StatusTooManyRequests, now.Add(time.Second)
				w.Header().Set("Retry-After", "1")
			}
			s.rec.holdOff(until)
			http.Error(w, http.StatusText(code), code)
			return
		}
		s.writePage(w, num, r.URL.Path)
	case "error":
		http.Error(w, "internal error (on purpose)", http.StatusInternalServerError)
	case "redirect":
		http.Redirect(w, r, fmt.Sprintf("/p/%d", (num*7+3)%s.spec.Pages), http.StatusMovedPermanently)
	case "redirect-private":
		http.Redirect(w, r, s.privatePath(num), http.StatusFound)
	case "away":
		other := s.srv.sites[(s.index+1+num)%len(s.srv.sites)]
		http.Redirect(w, r, fmt.Sprintf("%s/p/%d", other.url, num%other.spec.Pages), http.StatusFound)
	case "loop":
		http.Redirect(w, r, fmt.Sprintf("/loop/%d", (num+1)%3), http.StatusFound)
	case "huge":
		s.stream(w, r, s.spec.HugeBytes, 0, "text/html; charset=utf-8")
	case "data":
		s.stream(w, r, s.spec.PageBytes, 0, "application/octet-stream")
	default:
		http.NotFound(w, r)
	}
}

// splitPath reads "/kind/N" (and "/data/N.bin"); "/" gives ("", -1).
func splitPath(path string) (string, int) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) != 2 {
		return parts[0], -1
	}
	n, err := strconv.Atoi(strings.TrimSuffix(parts[1], ".bin"))
	if err != nil {
		return parts[0], -2
	}
	return parts[0], n
}

func (s *site) privatePath(n int) string {
	if len(s.rules.disallow) == 0 {
		return fmt.Sprintf("/private/%d", n)
	}
	return fmt.Sprintf("%s%d", s.rules.disallow[n%len(s.rules.disallow)], n)
}

// links returns the links of page n, the same every time for one seed.
func (s *site) links(n int) []string {
	sp := s.spec
	rng := rand.New(rand.NewPCG(uint64(s.srv.profile.Seed), uint64(s.index)<<32|uint64(n)))
	var out []string
	count := sp.Links
	if n == 0 { // the home page links to the first pages, so the site is reachable
		for i := 0; i < min(sp.Pages, max(count, 4)); i++ {
			out = append(out, fmt.Sprintf("/p/%d", i))
		}
	}
	for i := 0; i < count; i++ {
		m := rng.IntN(sp.Pages)
		out = append(out, s.linkKind(rng.Float64(), rng.Float64(), m))
	}
	for i := 0; i < sp.CrossLinks && len(s.srv.sites) > 1; i++ {
		other := s.srv.sites[(s.index+1+rng.IntN(len(s.srv.sites)-1))%len(s.srv.sites)]
		out = append(out, fmt.Sprintf("%s/p/%d", other.url, rng.IntN(other.spec.Pages)))
	}
	if sp.Hostile {
		out = append(out, "javascript:alert(1)", "mailto:webmaster@example.invalid", "file:///etc/passwd",
			"ftp://127.0.0.1/x", "/loop/0", "//[::1", "http://%zz/")
	}
	return out
}

// linkKind picks what a link to page m points at, from two uniform draws:
// x picks a behaviour by the site's shares (else a redirect, else a plain
// page); bait sends one link in ten of a plain page into a disallowed path.
func (s *site) linkKind(x, bait float64, m int) string {
	sp := s.spec
	for _, k := range []struct {
		share float64
		path  string
	}{{sp.Slow, "/slow/%d"}, {sp.Retry, "/retry/%d"}, {sp.Errors, "/error/%d"}, {sp.Huge, "/huge/%d"}, {sp.NonHTML, "/data/%d.bin"}} {
		if x < k.share {
			return fmt.Sprintf(k.path, m)
		}
		x -= k.share
	}
	if x < sp.Redirects {
		return fmt.Sprintf("/%s/%d", []string{"redirect", "redirect-private", "away"}[m%3], m)
	}
	if bait < 0.1 && (len(s.rules.disallow) > 0 || s.rules.closedSite) {
		return s.privatePath(m)
	}
	return fmt.Sprintf("/p/%d", m)
}

func (s *site) writePage(w http.ResponseWriter, n int, path string) {
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>site %d page %d</title></head><body>\n<h1>%s</h1>\n<ul>\n", s.index, n, path)
	for _, l := range s.links(n) {
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", l, l)
	}
	b.WriteString("</ul>\n")
	if s.spec.Hostile {
		b.WriteString("<p>invalid UTF-8: \xff\xfe\xc3\x28</p>\n")
	}
	for b.Len() < s.spec.PageBytes {
		b.WriteString("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.</p>\n")
	}
	b.WriteString("</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	io.WriteString(w, b.String())
}

// filler is the body text streamed by slow, huge and data pages.
var filler = []byte(strings.Repeat("<p>streamed body text</p>\n", 32<<10/26))

// stream writes size bytes, in 20 chunks spread over d when d > 0, stopping
// if the client goes away.
func (s *site) stream(w http.ResponseWriter, r *http.Request, size int, d time.Duration, ctype string) {
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(size))
	const chunks = 20
	step := len(filler)
	if d > 0 {
		step = min(step, max(1, size/chunks))
	}
	f, _ := w.(http.Flusher)
	for sent := 0; sent < size; {
		n, err := w.Write(filler[:min(step, size-sent)])
		if err != nil {
			s.rec.cutShort()
			return
		}
		sent += n
		if f != nil {
			f.Flush()
		}
		if d > 0 && sent < size && !s.wait(r, d/chunks) {
			s.rec.cutShort()
			return
		}
	}
}

func (s *site) latency() time.Duration {
	l, j := time.Duration(s.spec.Latency), time.Duration(s.spec.Jitter)
	if j > 0 {
		l += time.Duration(rand.Int64N(int64(2*j)+1)) - j
	}
	return l
}

// wait sleeps d unless the client goes away or the server closes first.
func (s *site) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.srv.closing:
		return false
	}
}

// firstRetry reports whether /retry/n is asked for the first time (it then
// answers 429/503 once).
func (s *site) firstRetry(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retried[n] {
		return false
	}
	s.retried[n] = true
	return true
}

type countingWriter struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
	req         *request // what an over-cap sample reads, atomically
	size        int64    // Content-Length, -1 if not set
	end         func(status int, bytes int64)
	ended       bool
}

// finish records the request's end, once: as the last of its body goes
// out, or when the handler returns.
func (c *countingWriter) finish() {
	if !c.ended {
		c.ended = true
		c.end(c.status, c.bytes)
	}
}

func (c *countingWriter) WriteHeader(code int) {
	if !c.wroteHeader {
		c.status, c.wroteHeader = code, true
		c.sized()
	}
	c.ResponseWriter.WriteHeader(code)
}

// sized notes the response's Content-Length, once its header goes out.
func (c *countingWriter) sized() {
	if n, err := strconv.ParseInt(c.Header().Get("Content-Length"), 10, 64); err == nil {
		c.size = n
		c.req.size.Store(n)
	}
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if !c.wroteHeader {
		c.wroteHeader = true
		c.sized()
	}
	if c.size >= 0 && c.bytes+int64(len(b)) >= c.size {
		// The last of the body: the request ends as it goes out. Once the
		// client has it all it may release its permit and send the next
		// request before this handler gets to return.
		c.bytes += int64(len(b))
		c.req.sent.Add(int64(len(b)))
		c.finish()
		return c.ResponseWriter.Write(b)
	}
	n, err := c.ResponseWriter.Write(b)
	c.bytes += int64(n)
	c.req.sent.Add(int64(n))
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
