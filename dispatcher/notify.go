package dispatcher

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/backoff"
)

// hub wakes callers that long-poll for a task when tasks become claimable in
// their categories: n tasks wake the n oldest idle waiters, one each, not
// the whole category, and at most wakeBusyMax of a category's waiters are
// woken and looking at once: the rest of the wake-ups wait for looks to
// end, so that thousands of waiters woken together do not all queue for the
// stores at once. A wake-up is a hint, not a hand-off: the woken caller runs
// the claim path again and may find nothing.
//
// A waiter is idle (waiting, in its categories' queues, oldest first) or
// busy (looking for a task: it has just subscribed, or was woken). A
// wake-up that finds no idle waiter is owed to the busy ones: a busy waiter
// whose look comes back empty takes it and looks again instead of going
// idle, since its look may have begun before the task arrived. A waiter that
// leaves with a wake-up it did not act on passes it on, and a candidate a
// claim took but gave back (see hub.give) counts as an arrival. So every task
// that arrives is looked for, after it arrived, by some waiter of its
// category while any waits.
//
// Tasks can also become claimable with nobody told (a retry's backoff or a
// lease running out, a task added by a process that shares no wake-up
// channel): for them the hub polls, once per poll interval for the whole
// process, not once per waiter. Each poll wakes the oldest idle waiter of
// each category that has one and is not crowded (see waitQueue.crowded), and a
// look woken by a poll that claimed something passes two polls on (see
// hub.pollOn), so that a backlog found this way is taken at once. So a
// parked waiter costs no timer and no look of its own, and thousands of
// them cost a process one look per category per poll interval.
type hub struct {
	mu     sync.Mutex
	queues map[string]*waitQueue
	seq    uint64 // orders waiters by age
	n      int    // waiters subscribed now
	// arrived is told of each wake-up's category before any waiter wakes.
	arrived func(cat string)

	// every is the poll interval (see Config.PollInterval), spread; 0: no
	// polls (unit tests poll by hand). poller runs the next poll while
	// some waiter is idle, nil otherwise.
	every  time.Duration
	poller *time.Timer
	// polls counts the polls made, for tests.
	polls uint64
}

// pollPassOn is how many polls a look woken by a poll passes on when it
// claimed something: a backlog that arrived unannounced is then taken by
// twice as many looks each round, and the rounds end with the first looks
// that find nothing.
const pollPassOn = 2

// wakeBusyMax is how many waiters of a category may be woken and looking at
// once; more wake-ups wait until some of them are done. It is well above
// what the stores serve at once (a connection pool's worth of claims),
// so that claims arriving together can still be sent together.
const wakeBusyMax = 256

// waitQueue is one category's waiters.
type waitQueue struct {
	cat        string
	head, tail *waitLink // idle waiters, oldest first
	idle       int       // length of the idle list
	busy       int       // waiters of the category looking for a task
	// pending counts wake-ups for idle waiters not sent yet (wakeBusyMax
	// were busy), at most idle; owed counts those owed to busy waiters, at
	// most busy. polls counts the pending wake-ups that are polls (see
	// hub.poll), at most pending, and pollLooks the busy waiters a poll
	// woke, at most busy.
	pending, owed, polls, pollLooks int
}

// waitLink is a waiter's place in one category's queue.
type waitLink struct {
	w          *waiter
	q          *waitQueue
	prev, next *waitLink
}

// waiter is one long-polling caller.
type waiter struct {
	// c holds a wake-up the waiter has not acted on yet: buffered 1, only
	// sent to by the hub under its lock, to an idle waiter it makes busy,
	// so it never blocks.
	c     chan wakeUp
	seq   uint64
	idle  bool
	links []waitLink // one per category
	// again is why rest told the waiter to look again; only its own
	// goroutine reads it.
	again wakeUp
	// polled: a poll woke the look the waiter is making, not an arrival
	// (see waitQueue.pollLooks).
	polled bool
}

// wakeUp is what wakes a waiter: its category, and whether it is a poll
// (see hub.poll) rather than an arrival.
type wakeUp struct {
	cat  string
	poll bool
}

func newHub(arrived func(cat string)) *hub {
	return &hub{queues: make(map[string]*waitQueue), arrived: arrived}
}

// subscribe registers a waiter for cats, busy: subscribe before looking for
// a task, so that a task arriving between the look and the wait is not
// missed. Then call rest after each empty-handed look, and leave at the end.
func (h *hub) subscribe(cats []string) *waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	h.n++
	w := &waiter{c: make(chan wakeUp, 1), seq: h.seq, links: make([]waitLink, len(cats))}
	for i, cat := range cats {
		q := h.queues[cat]
		if q == nil {
			q = &waitQueue{cat: cat}
			h.queues[cat] = q
		}
		q.busy++
		w.links[i] = waitLink{w: w, q: q}
	}
	return w
}

// rest is called when w's look came back empty-handed. It reports whether w
// should look again at once: it has a wake-up it did not act on, or one owed
// to the busy waiters of its categories (w.again says which). Otherwise w is
// idle in its queues again, at the place its age gives it, until a wake-up
// (an arrival or a poll).
func (h *hub) rest(w *waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.endPoll()
	select {
	case w.again = <-w.c:
		return true // woken during the look (see hub.wake): look again
	default:
	}
	if w.idle {
		return false // a look of its own poll; it stayed idle meanwhile
	}
	for i := range w.links {
		if q := w.links[i].q; q.owed > 0 {
			q.owed--
			w.again = wakeUp{cat: q.cat}
			return true
		}
	}
	w.idle = true
	for i := range w.links {
		l := &w.links[i]
		l.q.busy--
		l.q.insert(l)
	}
	for i := range w.links {
		h.dispatch(w.links[i].q)
	}
	h.armPoll()
	return false
}

// leave unregisters w. A wake-up it did not act on goes to another waiter.
func (h *hub) leave(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n--
	w.endPoll()
	var pass wakeUp
	select {
	case pass = <-w.c:
	default:
	}
	for i := range w.links {
		q := w.links[i].q
		if w.idle {
			q.remove(&w.links[i])
			q.settle()
		} else {
			q.busy--
			q.owed = min(q.owed, q.busy)
		}
	}
	w.idle = false
	if q := h.queues[pass.cat]; q != nil {
		q.pending++
		if pass.poll {
			q.polls++
		}
	}
	for i := range w.links {
		q := w.links[i].q
		h.dispatch(q)
		if q.idle == 0 && q.busy == 0 && h.queues[q.cat] == q {
			delete(h.queues, q.cat)
		}
	}
}

// crowded reports whether a poll of q would only add to a crowd: it has
// wake-ups waiting for idle waiters, or wakeBusyMax waiters looking
// already. The looks of those find whatever the poll's would.
func (q *waitQueue) crowded() bool {
	return q.pending > 0 || q.busy >= wakeBusyMax
}

// armPoll makes sure the next poll is due while some waiter is idle. h.mu is
// held.
func (h *hub) armPoll() {
	if h.every <= 0 || h.poller != nil {
		return
	}
	h.poller = time.AfterFunc(backoff.Spread(h.every), h.poll)
}

// poll wakes the oldest idle waiter of each category that has one and is
// not crowded, to look for tasks that became claimable with nobody told,
// and arms the next poll while any waiter stays idle.
func (h *hub) poll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.poller = nil
	h.polls++
	idle := false
	for _, q := range h.queues {
		if q.idle > 0 && !q.crowded() {
			q.pending++
			q.polls++
			h.dispatch(q)
		}
		idle = idle || q.idle > 0
	}
	if idle {
		h.armPoll()
	}
}

// pollOn is called when a look that a poll of cat woke claimed something:
// more may have become claimable unannounced, so pollPassOn more of cat's
// waiters look, as polls. Not while arrivals keep the category's waiters
// looking (woken, or waking): their looks find what the polls' would, and
// polls passed on among thousands woken by arrivals would double at each
// claim into a herd.
func (h *hub) pollOn(cat string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[cat]
	if q == nil || q.busy > q.pollLooks || q.pending > q.polls {
		return
	}
	q.pending += pollPassOn
	q.polls += pollPassOn
	h.dispatch(q)
}

// endPoll ends the count of w's look as a poll's in its categories, if it
// was one. h.mu is held.
func (w *waiter) endPoll() {
	if w.polled {
		for i := range w.links {
			w.links[i].q.pollLooks--
		}
		w.polled = false
	}
}

// waiting reports whether anyone long-polls at all.
func (h *hub) waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// wake wakes up to n waiters of cat, oldest idle ones first, and owes the
// rest to its busy waiters: n tasks can satisfy at most n callers, so waking
// everyone would only make a herd.
func (h *hub) wake(cat string, n int) {
	if h.arrived != nil {
		h.arrived(cat)
	}
	h.give(cat, n)
}

// give wakes up to n waiters of cat as wake does, for n candidates a claim
// gave back to the pool: they are there to take, so the category's
// candidates need no new read (wake's arrived).
func (h *hub) give(cat string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.queues[cat]; q != nil && n > 0 {
		q.pending += n
		h.dispatch(q)
	}
}

// dispatch sends q's pending wake-ups to its oldest idle waiters while fewer
// than wakeBusyMax are busy. Wake-ups beyond the idle waiters are owed to
// the busy ones.
func (h *hub) dispatch(q *waitQueue) {
	for q.pending > 0 && q.head != nil && q.busy < wakeBusyMax {
		w := q.head.w
		q.pending--
		wu := wakeUp{cat: q.cat}
		if q.polls > 0 {
			q.polls--
			wu.poll = true
			w.polled = true
			for i := range w.links {
				w.links[i].q.pollLooks++
			}
		}
		for i := range w.links {
			l := &w.links[i]
			l.q.remove(l)
			l.q.busy++
			l.q.settle()
		}
		w.idle = false
		w.c <- wu
	}
	q.settle()
}

// settle owes the busy waiters the pending wake-ups there are no idle waiters
// for.
func (q *waitQueue) settle() {
	if extra := q.pending - q.idle; extra > 0 {
		q.pending = q.idle
		q.owed = min(q.owed+extra, q.busy)
	}
	q.polls = min(q.polls, q.pending)
}

// insert puts l in q's idle list by its waiter's age, looking from the end
// it is nearer to.
func (q *waitQueue) insert(l *waitLink) {
	q.idle++
	seq := l.w.seq
	switch {
	case q.head == nil:
		q.head, q.tail = l, l
	case seq > q.tail.w.seq:
		l.prev, q.tail.next, q.tail = q.tail, l, l
	case seq < q.head.w.seq:
		q.before(l, q.head)
	case seq-q.head.w.seq < q.tail.w.seq-seq:
		at := q.head // before the oldest one younger; the tail is
		for at.w.seq < seq {
			at = at.next
		}
		q.before(l, at)
	default:
		at := q.tail // after the youngest one older; the head is
		for at.w.seq > seq {
			at = at.prev
		}
		q.before(l, at.next)
	}
}

// before puts l before at in q's idle list.
func (q *waitQueue) before(l, at *waitLink) {
	l.next, l.prev = at, at.prev
	if at.prev == nil {
		q.head = l
	} else {
		at.prev.next = l
	}
	at.prev = l
}

func (q *waitQueue) remove(l *waitLink) {
	q.idle--
	if l.prev == nil {
		q.head = l.next
	} else {
		l.prev.next = l.next
	}
	if l.next == nil {
		q.tail = l.prev
	} else {
		l.next.prev = l.prev
	}
	l.prev, l.next = nil, nil
}

// notifier announces that tasks became claimable: to this process's waiters
// directly, or through Redis pub/sub to every process's when a client is
// configured.
type notifier struct {
	hub     *hub
	pubsub  redis.UniversalClient
	channel string
	log     *slog.Logger

	// The watchers of cancelled claims (see Dispatcher.WatchCancels), by
	// the number watchCancels gave them.
	mu       sync.Mutex
	watchers map[uint64]func(ClaimRef)
	watchSeq uint64
}

// cancelPrefix starts a pub/sub message that announces a claim a cancel
// ended, "cancel:<task id>:<fence>", on the wake-ups' channel: a wake-up is a
// JSON object, which such a message cannot be mistaken for, and which a
// process that does not know the message ignores it as.
const cancelPrefix = "cancel:"

// watchCancels adds fn to the watchers of cancelled claims and returns the
// function that removes it.
func (n *notifier) watchCancels(fn func(ClaimRef)) (stop func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.watchers == nil {
		n.watchers = make(map[uint64]func(ClaimRef))
	}
	n.watchSeq++
	id := n.watchSeq
	n.watchers[id] = fn
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.watchers, id)
	}
}

// cancelled announces a claim a cancel ended: to this process's watchers
// directly, or through Redis pub/sub to every process's.
func (n *notifier) cancelled(ctx context.Context, ref ClaimRef) {
	if n.pubsub == nil {
		n.tellCancelled(ref)
		return
	}
	msg := cancelPrefix + strconv.FormatInt(ref.TaskID, 10) + ":" + strconv.FormatInt(ref.Fence, 10)
	if err := n.pubsub.Publish(ctx, n.channel, msg).Err(); err != nil {
		// The holder's next renewal learns of the cancel; this process's
		// need not wait for it.
		n.log.WarnContext(ctx, "publish cancel", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
		n.tellCancelled(ref)
	}
}

// tellCancelled calls the watchers of cancelled claims with ref.
func (n *notifier) tellCancelled(ref ClaimRef) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, fn := range n.watchers {
		fn(ref)
	}
}

// decodeCancel reads a message of cancelled, and reports whether it is one.
func decodeCancel(s string) (ClaimRef, bool) {
	rest, ok := strings.CutPrefix(s, cancelPrefix)
	if !ok {
		return ClaimRef{}, false
	}
	id, fence, ok := strings.Cut(rest, ":")
	if !ok {
		return ClaimRef{}, false
	}
	taskID, err1 := strconv.ParseInt(id, 10, 64)
	f, err2 := strconv.ParseInt(fence, 10, 64)
	if err1 != nil || err2 != nil {
		return ClaimRef{}, false
	}
	return ClaimRef{TaskID: taskID, Fence: f}, true
}

// notify announces counts of claimable tasks by category.
func (n *notifier) notify(ctx context.Context, counts map[string]int) {
	if len(counts) == 0 {
		return
	}
	if n.pubsub == nil {
		for cat, k := range counts {
			n.hub.wake(cat, k)
		}
		return
	}
	msg := encodeCounts(counts)
	if err := n.pubsub.Publish(ctx, n.channel, msg).Err(); err != nil {
		// Other processes fall back on their poll interval; this one need not.
		n.log.WarnContext(ctx, "publish wake-up", "err", err)
		for cat, k := range counts {
			n.hub.wake(cat, k)
		}
	}
}

// run relays wake-ups from Redis pub/sub to the hub, and cancelled claims to
// their watchers, until ctx ends, resubscribing after errors.
func (n *notifier) run(ctx context.Context) {
	for ctx.Err() == nil {
		sub := n.pubsub.Subscribe(ctx, n.channel)
		ch := sub.Channel()
	recv:
		for {
			select {
			case <-ctx.Done():
				break recv
			case m, ok := <-ch:
				if !ok {
					break recv
				}
				if ref, ok := decodeCancel(m.Payload); ok {
					n.tellCancelled(ref)
					continue
				}
				for cat, k := range decodeCounts(m.Payload) {
					n.hub.wake(cat, k)
				}
			}
		}
		_ = sub.Close()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// encodeCounts and decodeCounts carry a wake-up over pub/sub as a JSON
// object of counts by category.
func encodeCounts(counts map[string]int) string {
	b, _ := json.Marshal(counts) // a map[string]int always marshals
	return string(b)
}

func decodeCounts(s string) map[string]int {
	var counts map[string]int
	if err := json.Unmarshal([]byte(s), &counts); err != nil {
		return nil
	}
	return counts
}
