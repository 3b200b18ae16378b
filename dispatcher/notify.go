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
// their categories. A wake-up is a hint, not a hand-off: the woken caller
// runs the claim path again and may find nothing.
type hub struct {
	mu      sync.Mutex
	waiters map[string][]*waiter // by category, oldest first
	// arrived is told of each wake-up's category before any waiter wakes.
	arrived func(cat string)
}

// waiter is one long-polling caller.
type waiter struct {
	c    chan struct{} // buffered 1: a wake-up is never lost, never blocks
	cats []string
}

func newHub(arrived func(cat string)) *hub {
	return &hub{waiters: make(map[string][]*waiter), arrived: arrived}
}

// subscribe registers a waiter for cats. Subscribe before looking for a task,
// so that a task arriving between the look and the wait is not missed.
func (h *hub) subscribe(cats []string) *waiter {
	w := &waiter{c: make(chan struct{}, 1), cats: cats}
	h.mu.Lock()
	for _, cat := range cats {
		h.waiters[cat] = append(h.waiters[cat], w)
	}
	h.mu.Unlock()
	return w
}

func (h *hub) unsubscribe(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cat := range w.cats {
		ws := h.waiters[cat]
		for i, x := range ws {
			if x == w {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(h.waiters, cat)
		} else {
			h.waiters[cat] = ws
		}
	}
}

// waiting reports whether anyone long-polls at all.
func (h *hub) waiting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiters) > 0
}

// wake wakes up to n waiters of cat, oldest first: n tasks can satisfy at
// most n callers, so waking everyone would only make a herd.
func (h *hub) wake(cat string, n int) {
	if h.arrived != nil {
		h.arrived(cat)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.waiters[cat] {
		if n <= 0 {
			return
		}
		select {
		case w.c <- struct{}{}:
			n--
		default: // already woken, not yet back
		}
	}
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
