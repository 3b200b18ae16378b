package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskd/taskd/tasks"
)

// Editors' claims in batches. When thousands of long-polling editors are woken
// together, each runs the claim path on its own (its candidate from the pool, its
// task's Redis lock), and their claims of pending tasks meet in editorClaims, which
// sends them to the store as batches (tasks.Store.ClaimEditorBatch: a few multi-row
// statements for the whole batch, instead of five per editor): whatever arrived while
// the batches in flight ran, up to editorBatchMax, at most editorBatchFlights at once.
// A claim that finds no flight in the air goes at once, alone, the way it always
// did (tasks.Store.Claim): there is no timer, and an editor alone waits for
// nobody. While one is in the air, the next flight takes off once
// editorBatchMin claims queued, or when one lands: a claim alone costs a
// flight several round trips, a batch's members a fraction of one each, so
// claims that keep arriving do not take the free flight one at a time.
//
// Each member is still claimed under its editor's lock with every check of a single
// claim, fenced by its own row, and refused on its own. A member the batch refuses
// because a task names its editor goes the single way (errBatchEditorBusy), which
// frees a claim whose lease passed, or finds the live one.

// editorBatchMax is the most claims one batch carries: the hub's wakeBusyMax,
// the most waiters of a category woken and looking at once.
const editorBatchMax = wakeBusyMax

// editorBatchFlights is how many batches (or claims alone) may be in flight at
// once, each on a connection of its own.
const editorBatchFlights = 2

// editorBatchMin is how many claims must be queued for a flight to take off
// while another is in the air.
const editorBatchMin = 8

// editorBatchTimeout bounds a batch's time in the store. A batch runs on a
// context of its own, which carries its first member's values but not its
// end, so that a member who leaves does not take the others' claims with it.
const editorBatchTimeout = 30 * time.Second

// errBatchEditorBusy is a batch's answer to a member whose editor a task names:
// the claim goes the single way instead.
var errBatchEditorBusy = errors.New("the editor has a task")

// editorClaim is one claim waiting for, or in, a batch.
type editorClaim struct {
	ctx   context.Context
	p     tasks.ClaimParams
	claim *tasks.Claim
	err   error // set before done is closed
	done  chan struct{}
}

// editorClaims sends editors' claims of pending tasks in batches; see above.
type editorClaims struct {
	store Store

	mu     sync.Mutex
	queue  []*editorClaim
	flying int

	// Counts, for tests: batches of more than one claim sent, and the
	// claims they carried.
	batches, batched atomic.Int64
}

func newEditorClaims(s Store) *editorClaims {
	return &editorClaims{store: s}
}

// claim makes claim p, an editor's claim of a pending task, alone or in a
// batch with others that arrive together. When ctx ends first it returns
// ctx's cause at once: the claim may still be made, as a single claim whose
// caller went away may (asking again returns the claim the editor holds).
func (b *editorClaims) claim(ctx context.Context, p tasks.ClaimParams) (*tasks.Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	m := &editorClaim{ctx: ctx, p: p, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, m)
	if b.flying >= editorBatchFlights || b.flying > 0 && len(b.queue) < editorBatchMin {
		b.mu.Unlock()
	} else {
		b.flying++
		ms := b.takeLocked()
		b.mu.Unlock()
		go b.fly(ms)
	}
	select {
	case <-m.done:
		return m.claim, m.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// fly sends ms, then the claims that queued meanwhile, until none are left.
func (b *editorClaims) fly(ms []*editorClaim) {
	for {
		if len(ms) > 0 {
			b.send(ms)
		}
		b.mu.Lock()
		next := b.takeLocked()
		if len(next) == 0 {
			b.flying--
		}
		b.mu.Unlock()
		for _, m := range ms {
			close(m.done)
		}
		if len(next) == 0 {
			return
		}
		ms = next
	}
}

// takeLocked takes up to editorBatchMax claims from the queue, one per editor
// (a second claim of an editor waits for the next batch), leaving out those
// whose context ended (they have had their answer).
func (b *editorClaims) takeLocked() []*editorClaim {
	var ms []*editorClaim
	editors := make(map[int64]bool)
	rest := b.queue[:0]
	for _, m := range b.queue {
		switch {
		case m.ctx.Err() != nil:
		case len(ms) < editorBatchMax && !editors[m.p.EditorID]:
			editors[m.p.EditorID] = true
			ms = append(ms, m)
		default:
			rest = append(rest, m)
		}
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	return ms
}

// send makes the claims of ms: alone, or as one batch, and answers each.
func (b *editorClaims) send(ms []*editorClaim) {
	// The first member's values (its trace span), not its end.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ms[0].ctx), editorBatchTimeout)
	defer cancel()
	if len(ms) == 1 {
		ms[0].claim, ms[0].err = b.store.Claim(ctx, ms[0].p)
		return
	}
	b.batches.Add(1)
	b.batched.Add(int64(len(ms)))
	ps := make([]tasks.ClaimParams, len(ms))
	for i, m := range ms {
		ps[i] = m.p
	}
	res, err := b.store.ClaimEditorBatch(ctx, ps)
	for i, m := range ms {
		switch {
		case err != nil:
			m.err = err
		case errors.Is(res[i].Err, tasks.ErrEditorBusy):
			m.err = fmt.Errorf("%w: %w", errBatchEditorBusy, res[i].Err)
		default:
			m.claim, m.err = res[i].Claim, res[i].Err
		}
	}
}

// counts returns the batches of more than one claim sent and the claims they
// carried.
func (b *editorClaims) counts() (batches, batched int64) {
	return b.batches.Load(), b.batched.Load()
}

// claimStored makes claim p in the store: an editor's claim of a pending task
// with those of other editors that arrive together (see editorClaims),
// anything else alone.
func (d *Dispatcher) claimStored(ctx context.Context, p tasks.ClaimParams) (*tasks.Claim, error) {
	if p.EditorID == 0 || p.Status != tasks.StatusPending {
		return d.store.Claim(ctx, p)
	}
	claim, err := d.editorClaims.claim(ctx, p)
	if errors.Is(err, errBatchEditorBusy) {
		// A task names the editor: its live claim, or one whose lease passed,
		// which Claim frees before it claims.
		return d.store.Claim(ctx, p)
	}
	return claim, err
}
