package dispatcher

import (
	"sync"
	"time"
)

// skipMemoryFor is how long this process remembers that an editor skipped
// a task. The store decides (store.Config.SkipFor); past this, a claim may
// take the task once more and have the store refuse it, which renews the
// memory.
const skipMemoryFor = 30 * time.Second

// skipMemory remembers the tasks editors skipped or released (both kept from
// the editor for a while: tasks.Ended.Withheld), so that their claims leave
// those out of the shared candidates instead of spending a claim the store
// refuses on them, one per claim while a skipped task stays the best
// candidate.
type skipMemory struct {
	mu    sync.Mutex
	tasks map[int64]map[int64]time.Time // editor -> task -> remembered until
	adds  int
}

func newSkipMemory() *skipMemory {
	return &skipMemory{tasks: make(map[int64]map[int64]time.Time)}
}

// add remembers that editor skipped task, from now for skipMemoryFor or d,
// whichever is shorter.
func (m *skipMemory) add(editor, task int64, now time.Time, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.adds++; m.adds%256 == 0 {
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
	}
	ts := m.tasks[editor]
	if ts == nil {
		ts = make(map[int64]time.Time)
		m.tasks[editor] = ts
	}
	ts[task] = now.Add(min(skipMemoryFor, d))
}

// fill adds to into the tasks editor skipped that are still remembered.
func (m *skipMemory) fill(editor int64, now time.Time, into map[int64]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, until := range m.tasks[editor] {
		if now.Before(until) {
			into[id] = true
		}
	}
}
