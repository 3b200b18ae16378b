package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/taskd/taskd/tasks"
)

// HedgeStore is what hedged re-offers need of the store (see tasks.Hedge); the
// MySQL store implements it. A Store that does not turns hedges off, whatever
// Config.Workflows says.
type HedgeStore interface {
	TakeHedge(ctx context.Context, p tasks.HedgeParams) (*tasks.Claim, error)
	HeldHedges(ctx context.Context, editorID int64) ([]*tasks.Claim, error)
	HeartbeatHedge(ctx context.Context, r tasks.HedgeRef, lease time.Duration) (time.Time, error)
	ReleaseHedge(ctx context.Context, r tasks.HedgeRef, skip bool) error
	TakeOverHedge(ctx context.Context, r tasks.HedgeRef) (string, error)
}

// ErrNotHedge means a write named no hedge of the claimant: the caller explains
// its first refusal as for any claim.
var ErrNotHedge = errors.New("not a hedge")

// hedgeStore returns the store's HedgeStore when some category hedges and c
// is an editor: the writes of a deployment without hedges try none.
func (d *Dispatcher) hedgeStore(c Claimant) (HedgeStore, bool) {
	hs, ok := d.store.(HedgeStore)
	if !ok || c.EditorID == 0 {
		return nil, false
	}
	for _, w := range d.cfg.Workflows {
		if w.Hedge.On() {
			return hs, true
		}
	}
	return nil, false
}

// hedges returns the store's HedgeStore when one of c's categories hedges.
func (d *Dispatcher) hedges(c Claimant) HedgeStore {
	hs, ok := d.store.(HedgeStore)
	if !ok || c.EditorID == 0 {
		return nil
	}
	if slices.ContainsFunc(c.Categories, func(cat string) bool { return d.cfg.Workflows[cat].Hedge.On() }) {
		return hs
	}
	return nil
}

// heldHedges returns c's live hedges when its categories hedge.
func (d *Dispatcher) heldHedges(ctx context.Context, c Claimant) ([]*tasks.Claim, error) {
	hs := d.hedges(c)
	if hs == nil {
		return nil, nil
	}
	return hs.HeldHedges(ctx, c.EditorID)
}

// HeldHedges returns c's live hedges, oldest first, as Claims with Hedge
// set: none, with no read, when none of c's categories hedges.
func (d *Dispatcher) HeldHedges(ctx context.Context, c Claimant) ([]*tasks.Claim, error) {
	hs, err := d.heldHedges(ctx, c)
	if err != nil {
		return nil, Unavailable(err)
	}
	return hs, nil
}

// takeHedge offers c a held task of its categories near its due_at whose
// holder went inactive, when nothing else is claimable for it: ErrNoTask
// when there is none.
func (d *Dispatcher) takeHedge(ctx context.Context, c Claimant) (*tasks.Claim, error) {
	hs := d.hedges(c)
	if hs == nil {
		return nil, ErrNoTask
	}
	claim, err := hs.TakeHedge(ctx, tasks.HedgeParams{EditorID: c.EditorID, Categories: c.Categories, Lease: d.cfg.Lease})
	switch {
	case errors.Is(err, tasks.ErrNotFound), errors.Is(err, tasks.ErrEditorBusy):
		return nil, ErrNoTask
	case err != nil:
		return nil, Unavailable(err)
	}
	d.log.DebugContext(ctx, "hedge taken", "task_id", claim.Task.ID, "fence", claim.Fence, "editor_id", c.EditorID)
	return claim, nil
}

// hedgeRef is the hedge ref would name for c.
func hedgeRef(c Claimant, ref ClaimRef) tasks.HedgeRef {
	return tasks.HedgeRef{TaskID: ref.TaskID, Fence: ref.Fence, EditorID: c.EditorID}
}

// hedgeErr maps a hedge write's error: ErrNotHedge when c holds no such hedge.
func hedgeErr(err error) error {
	if errors.Is(err, tasks.ErrNotFound) {
		return ErrNotHedge
	}
	return Unavailable(err)
}

// HeartbeatHedge extends c's hedge ref (see tasks.Hedge), as Heartbeat does a
// claim: the API tries it when Heartbeat refused ref as stale. It returns
// ErrNotHedge when ref is no hedge of c, and otherwise the store's errors:
// tasks.ErrStale when the hedge ended, wrapping tasks.ErrDoneByOther when the
// holder submitted first.
func (d *Dispatcher) HeartbeatHedge(ctx context.Context, c Claimant, ref ClaimRef) (time.Time, error) {
	hs, ok := d.hedgeStore(c)
	if !ok {
		return time.Time{}, ErrNotHedge
	}
	until, err := hs.HeartbeatHedge(ctx, hedgeRef(c, ref), d.cfg.Lease)
	if err != nil {
		return time.Time{}, hedgeErr(err)
	}
	return until, nil
}

// ReleaseHedge ends c's hedge ref: the holder keeps its claim. Errors as
// HeartbeatHedge's.
func (d *Dispatcher) ReleaseHedge(ctx context.Context, c Claimant, ref ClaimRef, skip bool) error {
	hs, ok := d.hedgeStore(c)
	if !ok {
		return ErrNotHedge
	}
	if err := hs.ReleaseHedge(ctx, hedgeRef(c, ref), skip); err != nil {
		return hedgeErr(err)
	}
	d.log.DebugContext(ctx, "hedge released", "task_id", ref.TaskID, "fence", ref.Fence, "editor_id", c.EditorID)
	return nil
}

// SubmitHedge submits c's result for its hedge ref: the hedge first takes the
// task over from its holder (the one conditional UPDATE both sides need, so
// that only the first to submit wins), then the result is submitted as by any
// holder (SubmitWith, under the hedge's fence). It returns ErrNotHedge when
// ref is no hedge of c, tasks.ErrStale wrapping tasks.ErrDoneByOther when the
// holder submitted first, tasks.ErrStale when the hedge ended otherwise, and
// SubmitWith's errors once the task is c's. The holder's Redis lock is given
// back once the takeover committed.
func (d *Dispatcher) SubmitHedge(ctx context.Context, c Claimant, ref ClaimRef, sub Submission) (*tasks.Claim, error) {
	hs, ok := d.hedgeStore(c)
	if !ok {
		return nil, ErrNotHedge
	}
	if err := tasks.CheckSubmission(sub.Result, sub.Decision, sub.Notes); err != nil {
		return nil, fmt.Errorf("submit hedge of task %d: %w", ref.TaskID, err)
	}
	holder, err := hs.TakeOverHedge(ctx, hedgeRef(c, ref))
	if err != nil {
		d.countStale(ctx, "submit", err)
		return nil, hedgeErr(err)
	}
	if holder != "" {
		// The holder's claim ended: its lock goes, as its release's would.
		d.releaseLock(ctx, ref.TaskID, holder)
	}
	d.log.DebugContext(ctx, "hedge took the task over", "task_id", ref.TaskID, "fence", ref.Fence, "editor_id", c.EditorID)
	return d.SubmitWith(ctx, c, ref, sub)
}
