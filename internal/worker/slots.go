package worker

import (
	"context"
	"sync"
	"time"
)

// gather waits while fewer than half of the slots one claim may take are
// free and others are busy, until that many are free or gatherFor
// (workerClaimGather) passed: a claim's round trips and commit cost about the same for a few
// tasks as for many, so a claim for the slots that free up together is
// worth a moment's wait. Handlers that return at once (a claim's tasks all
// done within the wait) then share one claim instead of each starting one
// for the few slots free at that instant; a slot held by a long handler
// delays nothing but this wait.
func (w *Worker) gather(ctx context.Context) {
	slots := w.slots
	want := (min(w.cfg.BatchSize, w.cfg.Concurrency) + 1) / 2
	// With SlotsUntilWritten, the slots of the outcomes waiting are free
	// to a claim that carries them.
	avail := func() int {
		if w.cfg.SlotsUntilWritten && !w.apart {
			return slots.len() + w.out.len()
		}
		return slots.len()
	}
	free := avail()
	if free >= want || free == 0 || free == w.cfg.Concurrency {
		return
	}
	t := time.NewTimer(w.gatherFor)
	defer t.Stop()
	for avail() < want {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-slots.freed:
		}
	}
}

// slotSet is the set of free slots, shared by the claim loops: a slot taken
// is one loop's until it is put back.
type slotSet struct {
	mu    sync.Mutex
	free  []int
	batch int // a full batch of slots, for full
	// freed has a value once a slot was freed since the last take, or a take
	// left free slots; full once batch slots or more are free: the wake-up
	// of the first claim loop and of the others.
	freed, full chan struct{}
}

// newSlotSet returns a set of n slots, all free, whose full batch is batch
// slots.
func newSlotSet(n, batch int) *slotSet {
	s := &slotSet{batch: batch, freed: make(chan struct{}, 1), full: make(chan struct{}, 1)}
	for i := n - 1; i >= 0; i-- {
		s.free = append(s.free, i)
	}
	return s
}

// len returns the number of free slots.
func (s *slotSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.free)
}

// take takes up to n free slots, lowest first, or none when fewer than
// atLeast are free. Slots it leaves free wake another loop.
func (s *slotSet) take(n, atLeast int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) < atLeast {
		return nil
	}
	n = min(n, len(s.free))
	out := make([]int, n)
	for i := range out {
		out[i] = s.free[len(s.free)-1-i]
	}
	s.free = s.free[:len(s.free)-n]
	if len(s.free) > 0 {
		signal(s.freed)
	}
	if len(s.free) >= s.batch {
		signal(s.full)
	}
	return out
}

// put frees slot i.
func (s *slotSet) put(i int) {
	s.mu.Lock()
	s.free = append(s.free, i)
	full := len(s.free) >= s.batch
	s.mu.Unlock()
	signal(s.freed)
	if full {
		signal(s.full)
	}
}
