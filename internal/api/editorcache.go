package api

import (
	"sync"
	"time"

	"github.com/taskd/taskd/tasks"
)

// editorCache remembers editors found by token hash for a short time, so
// that an editor's requests do not each read MySQL to authenticate. It
// remembers token hashes no editor has as well, for as long and in a table
// of their own (at most unknownMax), so that a wrong token sent again and
// again costs no MySQL read either, and garbage cannot push editors out.
//
// A change this process makes to an editor (its name, categories, token or
// state) forgets the editor at once, so this process's next request of the
// editor reads it anew; a token this process makes (a new editor's, a new
// one for an editor) is taken off the unknown hashes at once. Other
// processes, and edits made in the database directly, are seen once an
// entry's time is up. (A new token is random: no process can have found it
// unknown before it was made, unless a client sent it before its answer.)
type editorCache struct {
	ttl        time.Duration
	max        int
	unknownMax int
	clock      func() time.Time

	mu      sync.Mutex
	entries map[[32]byte]editorEntry
	// byID is the hash each remembered editor is under.
	byID map[int64][32]byte
	// unknown holds hashes no editor had when read, until their time is up.
	unknown map[[32]byte]time.Time
	// gen counts forgets: an editor read before a forget may be older than the
	// change that forgot it, so put does not keep it (see generation).
	gen uint64
}

type editorEntry struct {
	editor  *tasks.Editor
	expires time.Time
}

func newEditorCache(ttl time.Duration, max, unknownMax int) *editorCache {
	return &editorCache{
		ttl: ttl, max: max, unknownMax: unknownMax, clock: time.Now,
		entries: make(map[[32]byte]editorEntry), byID: make(map[int64][32]byte),
		unknown: make(map[[32]byte]time.Time),
	}
}

// isUnknown reports whether hash was found to be no editor's token less than
// the cache's time ago.
func (c *editorCache) isUnknown(hash [32]byte) bool {
	if c.ttl <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	expires, ok := c.unknown[hash]
	if ok && !c.clock().Before(expires) {
		delete(c.unknown, hash)
		return false
	}
	return ok
}

// putUnknown remembers that hash is no editor's token, unless a token was
// made or an editor forgotten since gen was taken. When the table is full,
// entries whose time is up go first, then arbitrary ones.
func (c *editorCache) putUnknown(hash [32]byte, gen uint64) {
	if c.ttl <= 0 || c.unknownMax <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	now := c.clock()
	if len(c.unknown) >= c.unknownMax {
		for h, expires := range c.unknown {
			if !now.Before(expires) {
				delete(c.unknown, h)
			}
		}
		for h := range c.unknown {
			if len(c.unknown) < c.unknownMax {
				break
			}
			delete(c.unknown, h)
		}
	}
	c.unknown[hash] = now.Add(c.ttl)
}

// known takes hash, a token just made, off the unknown hashes, and keeps
// reads that started before from putting it back.
func (c *editorCache) known(hash [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.unknown, hash)
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
		c.delete(hash)
		return nil, false
	}
	return e.editor, true
}

// generation returns the count of forgets so far. Take it before reading an
// editor from the store, and pass it to put.
func (c *editorCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put remembers editor for hash, unless an editor was forgotten since gen was
// taken: the editor read may then predate the change. When the cache is
// full, entries whose time is up go first, then arbitrary ones.
func (c *editorCache) put(hash [32]byte, editor *tasks.Editor, gen uint64) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	now := c.clock()
	if len(c.entries) >= c.max {
		for h, e := range c.entries {
			if !now.Before(e.expires) {
				c.delete(h)
			}
		}
		for h := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			c.delete(h)
		}
	}
	if old, ok := c.byID[editor.ID]; ok && old != hash {
		c.delete(old)
	}
	c.entries[hash] = editorEntry{editor: editor, expires: now.Add(c.ttl)}
	c.byID[editor.ID] = hash
}

// forget drops editor id, whatever token it was remembered under, and keeps
// reads that started before from putting it back.
func (c *editorCache) forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if h, ok := c.byID[id]; ok {
		c.delete(h)
	}
}

// delete drops the entry of hash. The caller holds mu.
func (c *editorCache) delete(hash [32]byte) {
	e, ok := c.entries[hash]
	if !ok {
		return
	}
	delete(c.entries, hash)
	if c.byID[e.editor.ID] == hash {
		delete(c.byID, e.editor.ID)
	}
}
