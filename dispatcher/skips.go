package dispatcher

import (
	"sync"
	"time"
)

// skipMemoryFor is how long this process remembers that an editor skipped
// a task, or that a task is barred to it by a rule no time ends. The store
// decides (store.Config.SkipFor, the workflow's rules); past this, a claim may
// take the task once more and have the store refuse it, which renews the
// memory.
const skipMemoryFor = 30 * time.Second

// skipMemory remembers the tasks editors skipped or released (both kept from
// the editor for a while: tasks.Ended.Withheld), and those barred to them
// (tasks.ErrBarred), so that their claims leave those out of the shared
// candidates instead of spending a claim the store refuses on them, one per
// claim while such a task stays the best candidate.
//
// A bar is remembered at the task's fence, which any claim of the task
// raises: a task that moved on (claimed, submitted to another stage, taken
// back) is tried again at once. And for no longer than the store says the
// bar lasts (tasks.BarredError.For, a send-back hold's end), or
// skipMemoryFor when no time ends it.
type skipMemory struct {
	mu     sync.Mutex
	tasks  map[int64]map[int64]time.Time // editor -> task -> remembered until
	barred map[int64]map[int64]bar       // editor -> task -> bar
	adds   int
}

// bar is a task barred to an editor at a fence, until a time.
type bar struct {
	fence int64
	until time.Time
}

func newSkipMemory() *skipMemory {
	return &skipMemory{tasks: make(map[int64]map[int64]time.Time), barred: make(map[int64]map[int64]bar)}
}

// add remembers that editor skipped task, from now for skipMemoryFor or d,
// whichever is shorter.
func (m *skipMemory) add(editor, task int64, now time.Time, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune(now)
	ts := m.tasks[editor]
	if ts == nil {
		ts = make(map[int64]time.Time)
		m.tasks[editor] = ts
	}
	ts[task] = now.Add(min(skipMemoryFor, d))
}

// bar remembers that task, at fence, is barred to editor from now for
// skipMemoryFor or d, whichever is shorter.
func (m *skipMemory) bar(editor, task, fence int64, now time.Time, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune(now)
	bs := m.barred[editor]
	if bs == nil {
		bs = make(map[int64]bar)
		m.barred[editor] = bs
	}
	bs[task] = bar{fence: fence, until: now.Add(min(skipMemoryFor, d))}
}

// prune forgets, every 256 adds, what is no longer remembered. m.mu is held.
func (m *skipMemory) prune(now time.Time) {
	if m.adds++; m.adds%256 != 0 {
		return
	}
	for ed, ts := range m.tasks {
		for id, until := range ts {
			if !now.Before(until) {
				delete(ts, id)
			}
		}
		if len(ts) == 0 {
			delete(m.tasks, ed)
		}
	}
	for ed, bs := range m.barred {
		for id, b := range bs {
			if !now.Before(b.until) {
				delete(bs, id)
			}
		}
		if len(bs) == 0 {
			delete(m.barred, ed)
		}
	}
}

// fill adds to into the tasks editor skipped that are still remembered, and
// returns the tasks barred to it, each with the fence it is barred at.
func (m *skipMemory) fill(editor int64, now time.Time, into map[int64]bool) (barred map[int64]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, until := range m.tasks[editor] {
		if now.Before(until) {
			into[id] = true
		}
	}
	for id, b := range m.barred[editor] {
		if now.Before(b.until) {
			if barred == nil {
				barred = make(map[int64]int64)
			}
			barred[id] = b.fence
		}
	}
	return barred
}
