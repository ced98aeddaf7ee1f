package limiter

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxChannels bounds how many site channels one process subscribes to. Past
// it, new sites' waiters poll (Options.Poll) until idle channels are dropped.
const maxChannels = 4096

// hub is a process's one pub/sub connection, shared by all its waiters. It
// subscribes to a site's wake-up channel when the site first has a local
// waiter and unsubscribes once the channel has been unused for a while, and
// hands each message to the waiters it names.
type hub struct {
	rdb  redis.UniversalClient
	idle time.Duration // how long an unused channel stays subscribed
	done chan struct{} // closed by close, under mu

	mu       sync.Mutex
	ps       *redis.PubSub
	loopDone chan struct{}
	chans    map[string]*channel
}

type channel struct {
	waiters   map[string]chan grant
	idleSince time.Time
}

func newHub(rdb redis.UniversalClient, lease time.Duration) *hub {
	return &hub{rdb: rdb, idle: max(lease, time.Second), done: make(chan struct{}), chans: map[string]*channel{}}
}

// join registers waiter id on ch. fresh reports that the subscription was
// just made (a message published just before may have been missed).
func (h *hub) join(ch, id string) (grants <-chan grant, fresh bool) {
	c := make(chan grant, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.isClosed() {
		return c, false
	}
	s := h.chans[ch]
	if s == nil {
		if len(h.chans) >= maxChannels {
			h.dropIdle(0)
		}
		s = &channel{waiters: map[string]chan grant{}}
		if len(h.chans) < maxChannels {
			h.chans[ch] = s
			fresh = h.subscribe(ch)
		}
	}
	s.waiters[id] = c
	return c, fresh
}

// subscribe adds ch to the shared connection, starting it on first use. On
// failure waiters still poll; the next join on ch tries again.
func (h *hub) subscribe(ch string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(ctx)
		h.loopDone = make(chan struct{})
		go h.loop(h.ps, h.loopDone)
	}
	if err := h.ps.Subscribe(ctx, ch); err != nil {
		delete(h.chans, ch)
		return false
	}
	return true
}

func (h *hub) leave(ch, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.chans[ch]; s != nil {
		delete(s.waiters, id)
		if len(s.waiters) == 0 {
			s.idleSince = time.Now()
		}
	}
}

// loop reads the pub/sub connection and delivers messages until close. It is
// the hub's only goroutine, and reads the connection itself (not through
// go-redis's Channel, which adds a goroutine hop to every wake-up). Between
// messages it drops idle channels. After a connection error go-redis
// reconnects and subscribes again on the next read; the loop waits a little
// first, so a dead Redis does not make it spin.
func (h *hub) loop(ps *redis.PubSub, end chan struct{}) {
	defer close(end)
	ctx := context.Background()
	for {
		msg, err := ps.ReceiveTimeout(ctx, h.idle)
		if h.isClosed() {
			return
		}
		var ne net.Error
		switch {
		case err == nil:
			if m, ok := msg.(*redis.Message); ok {
				if g, ids, ok := parseGrant(m.Payload); ok {
					h.deliver(m.Channel, g, ids)
				}
			}
			continue
		case errors.As(err, &ne) && ne.Timeout():
		default:
			select {
			case <-h.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		h.mu.Lock()
		h.dropIdle(h.idle)
		h.mu.Unlock()
	}
}

// deliver hands g to the local waiters named in ids that wait on ch.
func (h *hub) deliver(ch string, g grant, ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.chans[ch]
	if s == nil {
		return
	}
	for _, id := range ids {
		if c := s.waiters[id]; c != nil {
			select {
			case c <- g:
			default: // already told (by the releaser and by pub/sub)
			}
		}
	}
}

// dropIdle unsubscribes channels without waiters for at least idle. h.mu held.
func (h *hub) dropIdle(idle time.Duration) {
	var drop []string
	for ch, s := range h.chans {
		if len(s.waiters) == 0 && time.Since(s.idleSince) >= idle {
			drop = append(drop, ch)
			delete(h.chans, ch)
		}
	}
	if len(drop) > 0 && h.ps != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		h.ps.Unsubscribe(ctx, drop...)
	}
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
