package frontier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// SiteRule is what a worker applied to a site: the frontier hands out at
// most Cap of its items at once and, with Delay, the next one only Delay
// after one settles.
type SiteRule struct {
	Cap   int           // 0: keep what the frontier knows
	Delay time.Duration // 0: none
}

// Outcome is how an item ends (or not) in Settle.
type Outcome int

const (
	Fetched  Outcome = iota + 1 // done: counted in done
	Skipped                     // done without a usable page (robots.txt, 4xx): counted in done and in skipped
	Retry                       // failed: back to the tail after Delay; past MaxAttempts settled as failed (Result.Failed)
	Deferred                    // not fetched (site full at the semaphore): back to the head, its site not handed out for Delay
	Released                    // not fetched (worker stopping): back to the head at once
)

// Settlement is the end of one turn of an item.
type Settlement struct {
	Item    Item
	Outcome Outcome
	Delay   time.Duration // Retry and Deferred
	Links   []string      // found on the page: admitted at Item.Depth+1 (like Add)
	// External are links found on the page to sites out of the crawl's
	// scope, admitted like Links but at Item.Hops+1 hops
	// (ScopeRules.FollowExternal); Links are at 0.
	External []string
	// Rule is the site's rule as the worker applied it. A zero Rule keeps
	// what the frontier knows; otherwise Cap (0: keep) and Delay replace it.
	Rule SiteRule
	// Also, when set, queues commands that go to Redis in the same round
	// trip, before the settlement (a permit's release). The function it
	// returns runs after that round trip; its error joins Result.Settled.
	// The pipeline may carry other callers' commands of the process too
	// (the frontier combines them), so Also queues no blocking command,
	// no MULTI and nothing that changes the connection's state.
	Also func(pipe redis.Pipeliner) (after func() error)
	// Next takes the next item in the same round trip (its site's shard
	// first).
	Next bool
	// Prefer, with Next, is a site of the item's shard to take the next
	// item from, if the site is ready, rather than the first ready site in
	// the shard's round robin: a worker that asked for the site's next
	// permit in the same round trip (fetch.Reservation.ReleaseSpareOn).
	Prefer string
}

// Result is what Settle did.
type Result struct {
	Failed  bool  // Retry past MaxAttempts: settled as failed
	Settled error // the settlement's failures (ErrLost among them), links' admission and Also's
	// Unsettled means the item's own settlement did not take: it had been
	// handed to another worker (ErrLost), Redis refused its call, or it
	// was never sent (Settled says why). The item is, or will be, handed
	// out again, so the turn did not finish it. A call that got no answer
	// is sent once more (Frontier.again), and its answer decides; when
	// that gets none either, or answers ErrLost afresh (the first send may
	// have settled it and its answer be forgotten), the item is taken as
	// settled: Unsettled is false, and Settled carries the error. An
	// ErrLost the first send's remembered answer gives is Unsettled.
	Unsettled bool
	// SiteFull is how many of the settlement's links were dropped because
	// their site's queue was at its bound (Options.MaxQueuedPerSite).
	SiteFull int64
	Next     Item  // with Settlement.Next and NextErr nil
	NextErr  error // ErrDone, *EmptyError, or a Redis error
}

var outcomes = map[Outcome]string{Fetched: "fetched", Skipped: "skipped", Retry: "retry", Deferred: "deferred", Released: "released"}

// Settle ends one turn of an item in one round trip (two on a Cluster when
// links go to other shards, see send): Also's commands, then
// one script call on the item's shard that settles it, admits the links of
// that shard and (with Next) takes the next item there, and an add call for
// each other shard the links belong to. When the item's shard has nothing
// ready, Next looks at the other shards as Next does (one or two more round
// trips). The links are admitted (as Add does, within their sites' queue
// bound, Options.MaxQueuedPerSite) even when the item was no longer held
// (ErrLost in Settled). A call that gets no answer is sent again once
// (see Result.Unsettled). On a Cluster, when links for another node's shard
// could not be queued for a while (its node timed out, was down or
// migrating), the item is not settled: Settled says so, and the item is
// handed out again after the visibility timeout (see send).
func (f *Frontier) Settle(ctx context.Context, s Settlement) Result {
	lay, err := f.layout(ctx)
	if err != nil {
		return f.unsent(ctx, s, err, err)
	}
	how, ok := outcomes[s.Outcome]
	if !ok {
		err := fmt.Errorf("frontier: settle %s: unknown outcome %d", s.Item.URL, s.Outcome)
		return f.unsent(ctx, s, err, nil)
	}
	var r Result
	it := s.Item
	var retried string
	if s.Outcome == Retry {
		it.Attempts++
		if it.Attempts >= f.o.MaxAttempts {
			how, r.Failed = "failed", true
		} else {
			raw, _ := json.Marshal(it)
			retried = string(raw)
		}
	}
	sh := lay.of(it.Site)
	links := f.links(lay, it, s)
	nums, args := f.settleArgs(sh, it, s, how, retried)
	own := f.newCall(settleScript, sh, nums, append(args, links[sh].args()...)...)
	// Other shards' links first: on one node, they are queued before the
	// item stops counting as in flight (see elsewhere's second look).
	var calls []*call
	var batches []*batch
	for o, bt := range links {
		if o != sh {
			calls, batches = append(calls, f.addCall(o, 0, f.siteBound(), bt)), append(batches, bt)
		}
	}
	after := f.send(ctx, s.Also, calls, own)
	errs := f.addAnswers(calls, batches)
	a, err := f.answer(own)
	ran := mayHaveRun(own.cmd.Err())
	if unanswered(own.cmd.Err()) {
		a, err = f.again(ctx, own)
		ran = ran || mayHaveRun(own.cmd.Err())
	}
	f.sent(links[sh], own, err)
	r.SiteFull = own.full
	for _, c := range calls {
		r.SiteFull += c.full
	}
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("frontier: %s %s: %w", how, it.URL, err))
		if s.Next {
			r.NextErr = fmt.Errorf("frontier: next: %w", err)
		}
		// Withheld, refused by Redis or never sent: not settled. A send
		// that got no answer may have run: the item is taken as settled.
		r.Unsettled = !ran
	case !a.settled:
		errs = append(errs, fmt.Errorf("%w: %s", ErrLost, it.URL))
		f.lookSoon()
		// Sent again, "not held" may be the first send's settlement, its
		// answer no longer remembered (common.lua answered); a
		// remembered answer (a.repeat) is what the first send found.
		r.Unsettled = !ran || a.repeat
	}
	if after != nil {
		if err := after(); err != nil {
			errs = append(errs, err)
		}
	}
	r.Settled = errors.Join(errs...)
	if s.Next && r.NextErr == nil {
		r.Next, r.NextErr = f.nextOf(ctx, lay, sh, a)
	}
	return r
}

// unsent is Settle's result when nothing could be sent for the item: err
// (and, with Next, nextErr, or err when nextErr is nil), with Also's
// commands sent on their own (a permit must still be released).
func (f *Frontier) unsent(ctx context.Context, s Settlement, err, nextErr error) Result {
	r := Result{Settled: errors.Join(err, f.alone(ctx, s.Also)), Unsettled: true}
	if s.Next {
		r.NextErr = nextErr
		if nextErr == nil {
			r.NextErr = r.Settled
		}
	}
	return r
}

// lookSoon has the process's next round trip refresh the crawl's meta
// (keepCrawl), which finds a crawl deleted under it: called when an item
// it held was not in flight any more, as every item is after a delete
// --force. (Its visibility timeout running out, the other cause, is rare:
// the look then costs a round trip, and the refreshes it carries are due
// soon anyway.) At most once a second: many items lost at once (a process
// that stalled) cost one look.
func (f *Frontier) lookSoon() {
	now, last := time.Now().UnixMilli(), f.lookedAt.Load()
	if now-last >= time.Second.Milliseconds() && f.lookedAt.CompareAndSwap(last, now) {
		f.keptAt.Store(0)
	}
}

// settleArgs are settle.lua's own numbers and ARGV (3 to 7) for it, on its
// shard sh, settled as how (retried: its JSON for a retry).
func (f *Frontier) settleArgs(sh *shard, it Item, s Settlement, how, retried string) ([]float64, []any) {
	rcap, rdelay := 0, int64(-1)
	if s.Rule != (SiteRule{}) {
		rcap, rdelay = s.Rule.Cap, s.Rule.Delay.Milliseconds()
	}
	take, id := "0", ""
	if s.Next {
		take, id = "1"+s.Prefer, f.takeID(sh)
	}
	return []float64{float64(s.Delay.Milliseconds()), float64(rcap), float64(rdelay), float64(f.siteBound())},
		[]any{it.ID, how, retried, take, id}
}

// links are the batches of the links found on it's page, by shard: Links
// at its hops, External one hop further off the scope.
func (f *Frontier) links(lay *layout, it Item, s Settlement) map[*shard]*batch {
	from := ""
	if f.o.Referrers && len(it.URL) <= MaxReferrer {
		from = it.URL
	}
	links := f.admission(lay, nil, it.Depth+1, 0, from, s.Links)
	return f.admission(lay, links, it.Depth+1, it.Hops+1, from, s.External)
}

// addAnswers reads the add calls' answers, remembering each answered
// batch as seen, and returns their errors.
func (f *Frontier) addAnswers(calls []*call, batches []*batch) []error {
	var errs []error
	for i, c := range calls {
		_, err := f.answer(c)
		f.sent(batches[i], c, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("frontier: add: %w", err))
		}
	}
	return errs
}

// nextOf is the next item settle.lua's answer a took on sh, or, when sh had
// nothing ready, one from elsewhere.
func (f *Frontier) nextOf(ctx context.Context, lay *layout, sh *shard, a answer) (Item, error) {
	switch {
	case a.took == 1:
		return a.it, nil
	case a.empty != nil:
		return f.elsewhere(ctx, lay, sh, a.empty)
	}
	return Item{}, fmt.Errorf("frontier: next: no answer")
}

// send runs also's commands, the other shards' add calls and then the
// item's own call, in one round trip. On a Cluster, where the other shards'
// nodes would get their part beside the item's node and not before it, the
// adds go one round trip earlier: otherwise a worker could see the whole
// crawl empty between the settlement and the links' arrival, and stop.
// There, when an add fails for a while only (its node timed out, was cut
// off, failed over, or answered TRYAGAIN, CLUSTERDOWN, LOADING), the item's
// own call is not sent, and fails with errLinksLost: the item stays in
// flight and is handed out again after the visibility timeout, its page
// fetched again and its links with it, where a settlement would have lost
// them. An add its node refused for good (out of memory, an ACL) would
// refuse the next time too: the item is settled, and the error says what
// was lost.
func (f *Frontier) send(ctx context.Context, also func(redis.Pipeliner) func() error, adds []*call, own *call) (after func() error) {
	if _, cluster := f.rdb.(*redis.ClusterClient); !cluster || len(adds) == 0 {
		return f.pipelined(ctx, also, append(adds, own)...)
	}
	first := f.pipelined(ctx, also, adds...)
	for _, c := range adds {
		if err := c.cmd.Err(); err != nil && passing(err) {
			own.withhold(ctx, fmt.Errorf("%w: %w", errLinksLost, err))
			f.failed(own) // its refresh, if it asked for one, is still to do
			return first
		}
	}
	f.pipelined(ctx, nil, own)
	return first
}

// passing reports whether err may not come again: anything but an error
// reply of Redis, or one that says the node or slot is busy, moving or
// full for a while (go-redis strips a reply's leading "ERR ").
func passing(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true // a timeout, a connection cut or refused: no answer
	}
	for _, p := range []string{"TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN", "READONLY", "BUSY", "MOVED", "ASK", "NOREPLICAS", "max number of clients"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// againTimeout bounds a call sent again (Frontier.again).
const againTimeout = 5 * time.Second

// unanswered reports whether err, a call's command's error, is a failure
// without an answer from Redis (a timeout, a cut or refused connection),
// after which the call may be sent again: not a reply of Redis's, nor a
// settlement the frontier withheld (errLinksLost), nor a call to a crawl
// found gone (ErrCrawlGone), which was not sent.
func unanswered(err error) bool {
	var reply redis.Error
	return err != nil && !errors.Is(err, errLinksLost) && !errors.Is(err, ErrCrawlGone) && !errors.As(err, &reply)
}

// mayHaveRun reports whether a call that failed with err, its command's
// error, may have run in Redis all the same: it got no answer (unanswered)
// but was sent, as far as the client knows: not a connection that could
// not be made (a refused dial), a pool with no connection to give, a
// closed client, or a context that had ended before the call was made.
func mayHaveRun(err error) bool {
	var op *net.OpError
	switch {
	case !unanswered(err):
		return false
	case errors.As(err, &op) && op.Op == "dial",
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed),
		errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// again sends c, which failed without an answer (unanswered), once more on
// its own, and returns its answer: a take or settlement Redis ran the first
// time answers as it did then (common.lua answered), so that what became of
// it is known, and an item is not taken twice. A caller that cancelled ctx
// is not sent again; one whose deadline passed is, within againTimeout.
func (f *Frontier) again(ctx context.Context, c *call) (answer, error) {
	if errors.Is(ctx.Err(), context.Canceled) {
		return f.answer(c)
	}
	f.sending.RLock() // as pipelined: expireLeftovers waits for it
	defer f.sending.RUnlock()
	if err := f.goneErr(); err != nil {
		c.withhold(ctx, err)
		return f.answer(c)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), againTimeout)
	defer cancel()
	c.run(actx, f.fn)
	return f.answer(c)
}

// errLinksLost: a settlement was not sent because its links to other
// shards could not be queued (send).
var errLinksLost = errors.New("links to other shards not queued; the item comes back after the visibility timeout")

// alone runs also's commands in a round trip of their own (a settlement
// that failed before its own round trip must still release its permit).
func (f *Frontier) alone(ctx context.Context, also func(redis.Pipeliner) func() error) error {
	if after := f.pipelined(ctx, also); after != nil {
		return after()
	}
	return nil
}

// addCall is an add.lua call on sh of bt (nil: none), noting scope.
func (f *Frontier) addCall(sh *shard, scope int64, bound int, bt *batch) *call {
	return f.newCall(addScript, sh, []float64{float64(scope), float64(bound)}, bt.args()...)
}

// Add admits the URLs found at depth (0 for seeds), each once per crawl:
// they are normalised (see Normalize), and those deeper than MaxDepth, past
// MaxPages, already seen, or not http(s) are dropped. It returns how many
// were admitted. It is one round trip, one script call per shard (none
// when the process knows every URL seen already: see the package doc).
func (f *Frontier) Add(ctx context.Context, depth int, urls ...string) (int, error) {
	lay, err := f.layout(ctx)
	if err != nil {
		return 0, err
	}
	var calls []*call
	var batches []*batch
	for sh, bt := range f.admission(lay, nil, depth, 0, "", urls) {
		calls, batches = append(calls, f.addCall(sh, 0, 0, bt)), append(batches, bt)
	}
	if len(calls) == 0 {
		return 0, nil
	}
	f.pipelined(ctx, nil, calls...)
	return f.added(calls, batches)
}

// added is how many URLs calls admitted; each answered call's batch is
// remembered as seen.
func (f *Frontier) added(calls []*call, batches []*batch) (int, error) {
	n := 0
	var errs []error
	for i, c := range calls {
		a, err := f.answer(c)
		f.sent(batches[i], c, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("frontier: add: %w", err))
		}
		n += a.added
	}
	return n, errors.Join(errs...)
}

// Done settles an item as fetched. Its fetch has given a slot of its site
// back, so a site at its cap, or deferred as full, takes its turn again at
// once. It returns ErrLost if the item had been handed to another worker
// meanwhile.
func (f *Frontier) Done(ctx context.Context, it Item) error {
	return f.Settle(ctx, Settlement{Item: it, Outcome: Fetched}).Settled
}

// Retry puts a failed item back for another try after delay, or, past
// MaxAttempts, settles it as failed. It reports whether it was put back.
func (f *Frontier) Retry(ctx context.Context, it Item, delay time.Duration) (bool, error) {
	r := f.Settle(ctx, Settlement{Item: it, Outcome: Retry, Delay: delay})
	if r.Settled != nil {
		return false, r.Settled
	}
	return !r.Failed, nil
}

// Defer puts an item back at the head of its site's queue and keeps the
// whole site out of Next for delay: the site is full, or asks to wait.
func (f *Frontier) Defer(ctx context.Context, it Item, delay time.Duration) error {
	return f.Settle(ctx, Settlement{Item: it, Outcome: Deferred, Delay: delay}).Settled
}

// Release gives an item back untouched, for another worker to take at once
// (a worker shutting down).
func (f *Frontier) Release(ctx context.Context, it Item) error {
	return f.Settle(ctx, Settlement{Item: it, Outcome: Released}).Settled
}

// DoneNext is what a worker does after a fetch, in one round trip: it
// admits the links found on it (Add, at it.Depth+1), settles it as fetched
// (Done), and takes the next item (Next): Settle with Fetched and Next.
// settled reports Add's and Done's failures (ErrLost among them); next and
// err are Next's answer.
func (f *Frontier) DoneNext(ctx context.Context, it Item, links []string) (next Item, settled, err error) {
	r := f.Settle(ctx, Settlement{Item: it, Outcome: Fetched, Links: links, Next: true})
	return r.Next, r.Settled, r.NextErr
}
