package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A crawl's Redis CPU per page (CrawlRow.RedisCPU) is measured at the
// crawl's own rate (the bench's: some 1,100 pages/s), where Redis is idle
// most of the time:
// it sleeps in epoll_wait between pages and wakes for a page or two, and
// every wake costs it CPU besides the page's commands (the system calls,
// and on this VM far more: see WakeCost). A Redis that is busy does not
// sleep between them: each crawler process's combiner (frontier) sends
// the settlements that wait while its round trips are on their way as
// one, so the busier Redis is the more pages each wake serves. What one
// Redis core serves is that busy Redis's cost per page, which the bench
// bounds by replaying one crawl's commands back to back (BusyRow): on one
// connection, where a busy Redis serving many would read and write each
// of theirs, so the replay's cost is a low bound.

// BusyRow is what one crawl's commands cost Redis, captured with MONITOR
// and replayed in order against the bench's Redis, busyDepth to a round
// trip.
type BusyRow struct {
	Mode        string
	Commands    int // commands the captured crawl sent (replayed)
	Depth       int // commands a round trip in the replay
	Errors      int // replayed commands answered with an error (as in the crawl: a NOSCRIPT)
	FirstError  string
	Crawl       CrawlRow      // the captured crawl, as the sites saw it (its pages, its safety)
	NotMeasured string        // why the figure is missing (MONITOR or FUNCTION FLUSH refused, the crawl failed), or ""
	CPU         time.Duration // Redis CPU per page in the replay (the least of busyReplays)
	HostSteal   float64       // the share of the machine's CPU its host took over the replays (-1: unknown)
	Calls       float64       // commands Redis ran per page, those inside scripts included
}

// PagesSec is what one Redis core serves at the row's cost per page.
func (b BusyRow) PagesSec() float64 { return coreRate(b.CPU) }

// busyDepth is the replay's commands a round trip: some pages' (BusyRow's
// Commands ÷ its crawl's Pages says how many a page), as when a busy Redis finds a
// process's combined round trip of that many settlements waiting at
// each wake.
const busyDepth = 50

// busyReplays is how many times the capture is replayed, the least kept.
const busyReplays = 5

// maxCapture bounds a MONITOR capture in memory (a 6,000-page crawl's is
// some 26 MB); past it the capture is cut and the row not measured. A
// variable for its test.
var maxCapture = 256 << 20

// monitor records what the Redis at addr runs, in redis-cli monitor's
// text, until stop.
type monitor struct {
	conn   net.Conn
	marker string // the ECHO that stop sends: the capture ends with it
	done   chan struct{}
	buf    bytes.Buffer
	err    error // the reader's
	cut    bool  // past maxCapture
}

// startMonitor connects to addr and issues MONITOR; its reader goroutine
// runs until it reads stop's marker, or stop closes the connection.
func startMonitor(ctx context.Context, addr string) (*monitor, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bench: monitor: %w", err)
	}
	r := bufio.NewReaderSize(conn, 1<<16)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("bench: monitor: %w", err)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("bench: monitor: %w", err)
	}
	if line != "+OK\r\n" {
		conn.Close()
		return nil, fmt.Errorf("bench: monitor: Redis replied %q", strings.TrimSpace(line))
	}
	_ = conn.SetDeadline(time.Time{})
	m := &monitor{conn: conn, marker: fmt.Sprintf("bench-capture-end-%d", time.Now().UnixNano()), done: make(chan struct{})}
	end := fmt.Sprintf(`"echo" %q`, m.marker)
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n') // each a status reply, "+…\r\n"
			if err != nil {
				m.err = err
				return
			}
			line = strings.TrimSuffix(strings.TrimPrefix(line, "+"), "\r\n")
			if strings.HasSuffix(line, end) {
				return
			}
			if m.buf.Len()+len(line)+1 > maxCapture {
				m.cut = true
				continue
			}
			m.buf.WriteString(line)
			m.buf.WriteByte('\n')
		}
	}()
	return m, nil
}

// stop ends the capture after everything Redis ran before it (it sends
// its marker on a connection of its own and reads up to it, for up to
// 30 s, or until ctx ends), and returns it, without the marker. Every
// monitor must be stopped: until then its reader goroutine runs.
func (m *monitor) stop(ctx context.Context, addr string) (*bytes.Buffer, error) {
	defer m.conn.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.Echo(ctx, m.marker).Err(); err != nil {
		return nil, fmt.Errorf("bench: monitor: %w", err)
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-m.done:
	case <-ctx.Done():
		m.conn.Close()
		<-m.done
		return nil, fmt.Errorf("bench: monitor: %w", ctx.Err())
	case <-t.C:
		m.conn.Close()
		<-m.done
		return nil, errors.New("bench: monitor: no end marker in 30 s")
	}
	switch {
	case m.err != nil:
		return nil, fmt.Errorf("bench: monitor: %w", m.err)
	case m.cut:
		return nil, fmt.Errorf("bench: monitor: the capture passed %d MB", maxCapture>>20)
	}
	return &m.buf, nil
}

// busy crawls once in mode with one process while MONITOR captures what
// Redis runs, then replays the capture against the bench's Redis (which
// the replay FLUSHALLs: the crawl section's rows are measured by then).
// The libraries are flushed before the crawl, so that the capture holds
// their FUNCTION LOAD and the replay runs them.
func (s CrawlSpec) busy(ctx context.Context, rdb *redis.Client, mode string) (BusyRow, error) {
	row := BusyRow{Mode: mode, Depth: busyDepth}
	if err := rdb.Do(ctx, "function", "flush").Err(); err != nil {
		return row, fmt.Errorf("bench: busy: %w", err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		return row, fmt.Errorf("bench: busy: %w", err)
	}
	m, err := startMonitor(ctx, s.RedisAddr)
	if err != nil {
		return row, err
	}
	crawl, err := s.polite(ctx, "busy "+mode, mode, 1, s.workers()) // the monitor stops first
	text, merr := m.stop(ctx, s.RedisAddr)
	if err = errors.Join(err, merr); err != nil {
		return row, err
	}
	crawl.Mode = mode
	row.Crawl = crawl
	capt, err := ReadCapture(text)
	if err != nil {
		return row, err
	}
	if len(capt.Missing) > 0 {
		return row, fmt.Errorf("bench: busy %s: the capture calls scripts it never loads: %s", mode, strings.Join(capt.Missing, ", "))
	}
	// The bench's own INFO before and after the crawl is no page's.
	capt.Commands = slices.DeleteFunc(capt.Commands, func(c []any) bool { return strings.EqualFold(c[0].(string), "info") })
	// A replay takes under a second, and a moment when this VM's host
	// takes the CPU moves it (the median of three read 58-67 µs a page in
	// one run, 103-108 in the next): the least of busyReplays, the low
	// bound the figure is, and the host's share over them.
	var cpus []time.Duration
	t0 := machineCPU()
	for range busyReplays {
		res, err := Replay(ctx, rdb, capt, busyDepth, nil)
		if err != nil {
			return row, err
		}
		cpus = append(cpus, res.CPU)
		row.Commands, row.Errors, row.FirstError = res.Commands, res.Errors, res.FirstError
		row.Calls = res.Calls
	}
	row.HostSteal = machineCPU().stealSince(t0)
	if pages := crawl.Pages; pages > 0 {
		row.CPU = slices.Min(cpus) / time.Duration(pages)
		row.Calls /= float64(pages)
	}
	return row, nil
}

// WakeCost is the CPU a PING costs Redis from one client at a time, which
// Redis sleeps and wakes for, against many clients at once, whose PINGs a
// wake serves together. One − Many is a low bound on what a sleep and a
// wake cost this Redis: Many still wakes it now and then.
type WakeCost struct {
	One, Many time.Duration // Redis CPU per PING
	Clients   int           // Many's clients
}

// Wake is One − Many (0 when Many is the larger).
func (w WakeCost) Wake() time.Duration { return max(0, w.One-w.Many) }

// wakeClients is WakeCost's many clients.
const wakeClients = 50

// wakeCost measures WakeCost with n PINGs each way, on clients connections
// opened (and greeted) before either is timed.
func wakeCost(ctx context.Context, addr string, n, clients int) (WakeCost, error) {
	w := WakeCost{Clients: clients}
	if n < clients || clients < 1 {
		return w, fmt.Errorf("bench: wake cost: %d PINGs over %d clients", n, clients)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: clients + 1}) // one more for INFO
	defer rdb.Close()
	conns := make([]*redis.Conn, clients)
	for i := range conns {
		conns[i] = rdb.Conn()
		defer conns[i].Close()
		if err := conns[i].Ping(ctx).Err(); err != nil {
			return w, fmt.Errorf("bench: wake cost: %w", err)
		}
	}
	measure := func(pings int, f func() error) (time.Duration, error) {
		c0, err := redisCPU(ctx, rdb)
		if err != nil {
			return 0, err
		}
		if err := f(); err != nil {
			return 0, fmt.Errorf("bench: wake cost: %w", err)
		}
		c1, err := redisCPU(ctx, rdb)
		if err != nil {
			return 0, err
		}
		return (c1 - c0) / time.Duration(pings), nil
	}
	var err error
	if w.One, err = measure(n, func() error {
		for range n {
			if err := conns[0].Ping(ctx).Err(); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return w, err
	}
	per := n / clients
	w.Many, err = measure(per*clients, func() error {
		var wg sync.WaitGroup
		errs := make([]error, clients)
		for i, c := range conns {
			wg.Go(func() {
				for range per {
					if errs[i] = c.Ping(ctx).Err(); errs[i] != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	return w, err
}
