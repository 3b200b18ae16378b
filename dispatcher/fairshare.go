package dispatcher

import (
	"slices"
	"sync"
	"time"

	"github.com/taskd/taskd/tasks"
)

// fairStride is the pass a claim adds to a category of weight 1; a category
// of weight w adds fairStride/w. It is divisible by every weight up to 16,
// and large enough that the rounding of the others is negligible.
const fairStride = 720720 << 10

// fairShareIdleFor is how long an editor's shares are kept after its last
// claim: an editor back after longer starts afresh, all its categories
// even.
const fairShareIdleFor = 10 * time.Minute

// fairShareEditorsMax bounds how many editors' shares one process keeps:
// past it, the longest idle are forgotten first.
const fairShareEditorsMax = 100_000

// fairShare shares each editor's claims among its categories by their
// weights, by stride scheduling: each category of an editor has a pass,
// which a claim in it moves on by fairStride over its weight, and the
// editor's next claim goes to the category with the lowest pass among those
// that have a claimable task. The editor's virtual time is the pass its last
// claim was made at; a category behind it (it ran dry, or is new) counts as
// being at it, so that one coming back rejoins the others level instead of
// with the credit of the time it was away.
//
// The shares are this process's, per editor: with an editor's requests
// spread over several processes, each keeps the shares over the claims it
// serves, and so the whole keeps them too.
type fairShare struct {
	weights map[string]int // by category; read-only
	clock   func() time.Time

	mu      sync.Mutex
	editors map[int64]*editorShare
	charges int // counts charges, to forget idle editors now and then
}

// editorShare is one editor's passes.
type editorShare struct {
	now  int64            // virtual time: the pass the last claim was made at
	pass map[string]int64 // by category
	used time.Time        // last claim
}

func newFairShare(workflows map[string]tasks.Workflow) *fairShare {
	weights := make(map[string]int)
	for cat, w := range workflows {
		if w.Weight > 1 {
			weights[cat] = w.Weight
		}
	}
	return &fairShare{weights: weights, clock: time.Now, editors: make(map[int64]*editorShare)}
}

// stride is what a claim in cat adds to its pass.
func (f *fairShare) stride(cat string) int64 {
	if w := f.weights[cat]; w > 1 {
		return fairStride / int64(w)
	}
	return fairStride
}

// order returns a copy of cats, the editor's categories, lowest pass first
// (ties in the order of cats): the order in which its next claim looks at
// them.
func (f *fairShare) order(editorID int64, cats []string) []string {
	out := slices.Clone(cats)
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.editors[editorID]
	if e == nil {
		return out
	}
	slices.SortStableFunc(out, func(a, b string) int {
		pa, pb := max(e.pass[queueCategory(a)], e.now), max(e.pass[queueCategory(b)], e.now)
		switch {
		case pa < pb:
			return -1
		case pa > pb:
			return 1
		}
		return 0
	})
	return out
}

// charge counts a claim the editor got in cat; cats are the editor's
// categories (the passes of others are dropped).
func (f *fairShare) charge(editorID int64, cat string, cats []string) {
	now := f.clock()
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.editors[editorID]
	if e == nil {
		e = &editorShare{pass: make(map[string]int64, len(cats))}
		f.editors[editorID] = e
	}
	e.used = now
	e.now = max(e.pass[cat], e.now)
	e.pass[cat] = e.now + f.stride(cat)
	for c := range e.pass {
		if !slices.Contains(cats, c) {
			delete(e.pass, c)
		}
	}
	if f.charges++; f.charges%1024 == 0 || len(f.editors) > fairShareEditorsMax {
		f.forget(now)
	}
}

// forget drops the shares of editors idle for fairShareIdleFor, and of the
// longest idle while more than fairShareEditorsMax are kept. f.mu is held.
func (f *fairShare) forget(now time.Time) {
	for id, e := range f.editors {
		if now.Sub(e.used) > fairShareIdleFor {
			delete(f.editors, id)
		}
	}
	if over := len(f.editors) - fairShareEditorsMax; over > 0 {
		type idle struct {
			id   int64
			used time.Time
		}
		all := make([]idle, 0, len(f.editors))
		for id, e := range f.editors {
			all = append(all, idle{id, e.used})
		}
		slices.SortFunc(all, func(a, b idle) int { return a.used.Compare(b.used) })
		for _, e := range all[:over+len(all)/8] {
			delete(f.editors, e.id)
		}
	}
}
