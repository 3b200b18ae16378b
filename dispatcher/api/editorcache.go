package api

import (
	"sync"
	"time"

	"github.com/taskd/taskd/tasks"
)

// editorCache remembers editors found by token hash for a short time, so
// that an editor's requests do not each read MySQL to authenticate. Editors
// do not change through the API; an edit made in the database directly is
// seen once the entry's time is up. Unknown tokens are not remembered, so
// garbage cannot fill the cache.
type editorCache struct {
	ttl   time.Duration
	max   int
	clock func() time.Time

	mu      sync.Mutex
	entries map[[32]byte]editorEntry
}

type editorEntry struct {
	editor  *tasks.Editor
	expires time.Time
}

func newEditorCache(ttl time.Duration, max int) *editorCache {
	return &editorCache{ttl: ttl, max: max, clock: time.Now, entries: make(map[[32]byte]editorEntry)}
}

// get returns the editor remembered for hash, if its time is not up.
func (c *editorCache) get(hash [32]byte) (*tasks.Editor, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok {
		return nil, false
	}
	if !c.clock().Before(e.expires) {
		delete(c.entries, hash)
		return nil, false
	}
	return e.editor, true
}

// put remembers editor for hash. When the cache is full, entries whose time
// is up go first, then arbitrary ones.
func (c *editorCache) put(hash [32]byte, editor *tasks.Editor) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	if len(c.entries) >= c.max {
		for h, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, h)
			}
		}
		for h := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			delete(c.entries, h)
		}
	}
	c.entries[hash] = editorEntry{editor: editor, expires: now.Add(c.ttl)}
}
