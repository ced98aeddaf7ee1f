package limiter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// hub is a process's one pub/sub connection, shared by all its waiters. Each
// Limiter has a tag of its own, which starts every entry id it makes
// ("<tag>.<n>"), and a wake-up channel of its own, wakeBase + tag: a release
// that lets a waiter in publishes the ids in the site's first limit places
// on the channels their tags name (release.lua), so a hand-off wakes the
// processes with an entry there, not every process with a waiter on the
// site. The hub subscribes to the channel on the first wait and hands each
// message to the waiters it names.
type hub struct {
	rdb  redis.UniversalClient
	tag  string        // starts every entry id of this Limiter
	base string        // wakeBase(prefix): release.lua's ARGV[3]
	ch   string        // the process's wake-up channel: base + tag
	done chan struct{} // closed by close, under mu
	seq  atomic.Uint64 // entry ids made

	// idle is how long the connection may be quiet before the hub pings
	// it, and pong how long it then waits for any answer before it takes
	// the connection for dead and has go-redis make a new one (hubIdle,
	// hubPong; tests shorten them before the first wait).
	idle, pong time.Duration

	mu       sync.Mutex
	ps       *redis.PubSub
	loopDone chan struct{}
	waiters  map[string]chan grant
}

// wakeBase starts every process's wake-up channel; release.lua appends the
// tag of the entry it lets in.
func wakeBase(prefix string) string { return prefix + ":wake:" }

func newHub(rdb redis.UniversalClient, prefix string) *hub {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	tag, base := hex.EncodeToString(b[:]), wakeBase(prefix)
	return &hub{rdb: rdb, tag: tag, base: base, ch: base + tag, idle: hubIdle, pong: hubPong, done: make(chan struct{}), waiters: map[string]chan grant{}}
}

// hubIdle and hubPong are the hub's defaults for idle and pong: a
// subscription whose host vanished without closing it (a dead VM, a
// partition that never heals) is noticed within about 35 s, at a PING a
// quiet half-minute.
const (
	hubIdle = 30 * time.Second
	hubPong = 5 * time.Second
)

// newID returns an entry id no other entry of any process has: the
// process's random 64-bit tag, a dot, and a count.
func (h *hub) newID() string {
	return h.tag + "." + strconv.FormatUint(h.seq.Add(1), 36)
}

// register makes id a waiter of this process before its entry is written,
// so that a wake-up published the moment after is kept for it (the
// channel holds one). Every register is paired with a leave.
func (h *hub) register(id string) <-chan grant {
	c := make(chan grant, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiters[id] = c
	return c
}

// listen starts the hub's subscription to the process's channel unless it
// is started, and returns at once: the hub's loop subscribes (go-redis
// subscribes again on every new connection), so no waiter waits for Redis
// to answer, nor holds h.mu while it does. A message published before the
// subscription was live is made up for by the nudge its confirmation
// brings (handle).
// Where rdb carries no wake-ups (carriesWakeups) it does nothing: waiters poll.
func (h *hub) listen() {
	if !carriesWakeups(h.rdb) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ps != nil || h.isClosed() {
		return
	}
	h.ps = h.rdb.Subscribe(context.Background()) // no channel yet: sends nothing
	h.loopDone = make(chan struct{})
	go h.loop(h.ps, h.loopDone)
}

// carriesWakeups reports whether rdb can carry wake-ups: not a Ring, whose
// PUBLISH reaches only the shard that ran the release while a
// subscriber's connection goes to the channel's shard.
func carriesWakeups(rdb redis.UniversalClient) bool {
	_, ring := rdb.(*redis.Ring)
	return !ring
}

func (h *hub) leave(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.waiters, id)
}

// loop reads the pub/sub connection and delivers messages until close. It is
// the hub's only goroutine, and reads the connection itself (not through
// go-redis's Channel, which adds a goroutine hop to every wake-up). After a
// connection error go-redis reconnects and subscribes again on the next
// read; the loop waits a little first, so a dead Redis does not make it
// spin. A connection quiet for idle is pinged, and one that then says
// nothing for pong is dropped (a read past a hard deadline: go-redis
// reconnects), so a host that vanished without closing it is noticed.
// Each (re)subscription nudges the waiters, who may have missed wake-ups
// meanwhile, to look again at once.
func (h *hub) loop(ps *redis.PubSub, end chan struct{}) {
	defer close(end)
	ctx := context.Background()
	// SUBSCRIBE until one is sent: go-redis then subscribes every new
	// connection to the channel. One that fails may leave a connection
	// subscribed to nothing (go-redis replaces a broken connection before it
	// notes the channel), which the read below would keep.
	for {
		sctx, cancel := context.WithTimeout(ctx, h.pong)
		err := ps.Subscribe(sctx, h.ch)
		cancel()
		if err == nil {
			break
		}
		if !h.rest() {
			return
		}
	}
	for {
		msg, err := ps.ReceiveTimeout(ctx, h.idle) // a timeout keeps the connection
		if h.isClosed() {
			return
		}
		if isTimeout(err) {
			msg, err = h.check(ctx, ps)
			if h.isClosed() {
				return
			}
		}
		if err == nil {
			h.handle(msg)
			continue
		}
		if !h.rest() {
			return
		}
	}
}

// rest waits 100 ms before the loop tries Redis again, so that a dead Redis
// does not make it spin; false if the hub closes meanwhile.
func (h *hub) rest() bool {
	select {
	case <-h.done:
		return false
	case <-time.After(100 * time.Millisecond):
		return true
	}
}

// check pings a connection that has been quiet for idle and reads its next
// message with a hard deadline of pong: past it, go-redis drops the
// connection and makes a new one on the next read.
func (h *hub) check(ctx context.Context, ps *redis.PubSub) (any, error) {
	pctx, cancel := context.WithTimeout(ctx, h.pong)
	defer cancel()
	if err := ps.Ping(pctx); err != nil {
		return nil, err
	}
	return ps.Receive(pctx)
}

// handle acts on one message of the connection: a wake-up is delivered,
// a subscription (the first, or again after a reconnect) nudges every
// waiter, a pong is nothing.
func (h *hub) handle(msg any) {
	switch m := msg.(type) {
	case *redis.Message:
		if g, ids, ok := parseGrant(m.Payload); ok {
			h.deliver(g, ids)
		}
	case *redis.Subscription:
		if m.Kind == "subscribe" {
			h.nudge()
		}
	}
}

// isTimeout reports whether err is a read that timed out.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// nudge has every waiter of the process look at its place now: wake-ups
// published while the subscription was down were lost.
func (h *hub) nudge() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.waiters {
		select {
		case c <- grant{wait: time.Millisecond}: // look again in a millisecond (wait)
		default: // a grant is already waiting for it
		}
	}
}

// deliver hands g to the local waiters named in ids and returns how many
// it handed it to (a waiter already told, or gone, is not counted).
func (h *hub) deliver(g grant, ids []string) int {
	n := 0
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		if c := h.waiters[id]; c != nil {
			select {
			case c <- g:
				n++
			default: // already told (by the releaser and by pub/sub)
			}
		}
	}
	return n
}

func (h *hub) isClosed() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

func (h *hub) close() error {
	h.mu.Lock()
	if h.isClosed() {
		h.mu.Unlock()
		return nil
	}
	close(h.done)
	ps, end := h.ps, h.loopDone
	h.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-end
	return err
}
