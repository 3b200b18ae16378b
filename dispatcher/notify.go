package dispatcher

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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
// category while any waits. A waiter's own poll (its poll interval passed)
// does not look while its categories are crowded (see hub.crowded).
type hub struct {
	mu     sync.Mutex
	queues map[string]*waitQueue
	seq    uint64 // orders waiters by age
	n      int    // waiters subscribed now
	// arrived is told of each wake-up's category before any waiter wakes.
	arrived func(cat string)
}

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
	// most busy.
	pending, owed int
}

// waitLink is a waiter's place in one category's queue.
type waitLink struct {
	w          *waiter
	q          *waitQueue
	prev, next *waitLink
}

// waiter is one long-polling caller.
type waiter struct {
	// c holds the category of a wake-up the waiter has not acted on yet:
	// buffered 1, only sent to by the hub under its lock, to an idle waiter
	// it makes busy, so it never blocks.
	c     chan string
	seq   uint64
	idle  bool
	links []waitLink // one per category
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
	w := &waiter{c: make(chan string, 1), seq: h.seq, links: make([]waitLink, len(cats))}
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
// to the busy waiters of its categories. Otherwise w is idle in its queues
// again, at the place its age gives it, until a wake-up or its own poll.
func (h *hub) rest(w *waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-w.c:
		return true // woken during the look (see hub.wake): look again
	default:
	}
	if w.idle {
		return false // a look of its own poll; it stayed idle meanwhile
	}
	for i := range w.links {
		if q := w.links[i].q; q.owed > 0 {
			q.owed--
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
	return false
}

// leave unregisters w. A wake-up it did not act on goes to another waiter.
func (h *hub) leave(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n--
	var pass string
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
	if q := h.queues[pass]; q != nil {
		q.pending++
	}
	for i := range w.links {
		q := w.links[i].q
		h.dispatch(q)
		if q.idle == 0 && q.busy == 0 && h.queues[q.cat] == q {
			delete(h.queues, q.cat)
		}
	}
}

// crowded reports whether a look of w's own (its poll interval passed) would
// only add to a crowd: each of its categories has wake-ups waiting for idle
// waiters, w among them in its turn, or wakeBusyMax waiters looking already.
// Such a look finds nothing the woken ones do not, and with thousands
// waiting, every one's poll comes round within a poll interval: their looks
// would queue for the stores ahead of the woken ones' and hold on to the
// memory a look takes, all at once.
func (h *hub) crowded(w *waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range w.links {
		if q := w.links[i].q; q.pending == 0 && q.busy < wakeBusyMax {
			return false
		}
	}
	return len(w.links) > 0
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
		for i := range w.links {
			l := &w.links[i]
			l.q.remove(l)
			l.q.busy++
			l.q.settle()
		}
		w.idle = false
		w.c <- q.cat
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

// run relays wake-ups from Redis pub/sub to the hub until ctx ends,
// resubscribing after errors.
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
