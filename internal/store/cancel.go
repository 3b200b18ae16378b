package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// A cancel ends a task for good, whether it waits in the pool or a holder runs it.
// Cancelling a claim does not bump the fence: the task leaves 'assigned', which every
// write about a claim needs (see liveClaimWhere), so the holder's late heartbeat,
// submit, release or completion matches no row; the row keeps the claim's fence and
// holder (as a done task keeps its last claim's), and its 'cancelled' event names
// them. A write so refused is told apart from any other stale write by that row:
// cancelled under the fence and holder the write names (see refusal).

// cancellable is the status a cancel of one task needs, for its StatusError.
const cancellable tasks.Status = "pending or assigned"

const (
	// cancelLockSQL locks the task's row and reads what the cancel and its event
	// need; the columns of the claim are those of an assigned task.
	cancelLockSQL = forceReleaseLockSQL
	// cancelPendingSQL ends a pending task; cancelAssignedSQL ends an assigned
	// one and the claim it is under, keeping the claim's holder and
	// assigned_at as the record of who held it (as a submit does) and freeing
	// the editor it names. Both are fenced on the locked row's fence and status.
	cancelPendingSQL = `UPDATE tasks FORCE INDEX (PRIMARY) SET status = 'cancelled', done_at = NOW(3)
WHERE id = ? AND fence = ? AND status = 'pending'`
	cancelAssignedSQL = `UPDATE tasks FORCE INDEX (PRIMARY) SET status = 'cancelled', done_at = NOW(3), editor_id = NULL,
	lease_expires_at = NULL, claim_unlogged = 0
WHERE id = ? AND fence = ? AND status = 'assigned'`
)

// Cancel ends a task for good, pending or assigned: it becomes cancelled, its done_at
// is now, and no claim takes it again. For an assigned task it also ends the claim,
// whoever holds it and whether or not its lease has passed: from then on every write
// the holder sends about it (heartbeat, submit, release, a worker's completion) is
// refused with an error wrapping ErrCancelled and ErrStale, and the editor it named
// may claim again. It records a 'cancelled' event with the task's fence, and for an
// assigned task the claim's holder and editor (after the claim's 'claimed' event, for
// a claim made without one: see logClaimsSQL); its detail says who cancelled and why
// (see ChangeParams.By). It writes no webhook event. It returns the task's category,
// fence and, for an assigned task, the holder of the claim it ended.
//
// It returns ErrNotFound for an unknown task and a *StatusError (ErrWrongStatus) for
// a task that has ended (done, dead or cancelled), changing nothing.
//
// Round trips: BEGIN, locked SELECT, UPDATE, INSERT event (with the 'claimed' event
// first, for a claim made without one), COMMIT.
func (s *Store) Cancel(ctx context.Context, p tasks.ChangeParams) (*tasks.Changed, error) {
	if p.TaskID < 1 {
		return nil, fmt.Errorf("cancel task %d: %w: task id must be positive", p.TaskID, tasks.ErrInvalid)
	}
	var changed *tasks.Changed
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		changed = nil // a deadlock victim runs again
		var row struct {
			Status       tasks.Status `db:"status"`
			Fence        int64        `db:"fence"`
			Holder       string       `db:"holder"`
			EditorID     int64        `db:"editor_id"`
			Category     string       `db:"category"`
			AssignedAt   *time.Time   `db:"assigned_at"`
			TraceContext string       `db:"trace_context"`
			DBNow        time.Time    `db:"db_now"`
			Unlogged     bool         `db:"claim_unlogged"`
			GoldCopy     bool         `db:"gold_copy"`
		}
		if err := tx.GetContext(ctx, &row, cancelLockSQL, p.TaskID); err != nil {
			return notFound(err)
		}
		ev := event{taskID: p.TaskID, kind: tasks.EventCancelled, fence: row.Fence, detail: cancelDetail(p), goldCopy: row.GoldCopy}
		c := &tasks.Changed{TaskID: p.TaskID, Category: row.Category, Fence: row.Fence}
		switch row.Status {
		case tasks.StatusPending:
			if err := fencedExec(ctx, tx, cancelPendingSQL, p.TaskID, row.Fence); err != nil {
				return err
			}
		case tasks.StatusAssigned:
			if err := logClaim(ctx, tx, row.Unlogged, p.TaskID, row.Fence); err != nil {
				return err
			}
			if err := fencedExec(ctx, tx, cancelAssignedSQL, p.TaskID, row.Fence); err != nil {
				return err
			}
			ev.holder, ev.editorID = row.Holder, row.EditorID
			c.Holder = row.Holder
		default:
			return &tasks.StatusError{TaskID: p.TaskID, Status: row.Status, Want: cancellable}
		}
		if err := s.insertEvents(ctx, tx, ev); err != nil {
			return err
		}
		changed = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cancel task %d: %w", p.TaskID, err)
	}
	return changed, nil
}

// cancelDetail is the detail of a cancel's event: who asked and why.
func cancelDetail(p tasks.ChangeParams) string {
	switch {
	case p.By == "":
		return p.Reason
	case p.Reason == "":
		return "by " + p.By
	}
	return "by " + p.By + ": " + p.Reason
}

// cancelledClaimsSQL reads, of the tasks that refused writes named, the cancelled
// ones with the fence and holder of the claim their cancel ended.
const cancelledClaimsSQL = `SELECT id, fence, COALESCE(holder, '') AS holder FROM tasks FORCE INDEX (PRIMARY)
WHERE id IN (?) AND status = 'cancelled'`

// errClaimCancelled is the refusal of a write about a claim a cancel ended.
var errClaimCancelled = fmt.Errorf("%w: %w", tasks.ErrStale, tasks.ErrCancelled)

// claimRef names a claim a write was about.
type claimRef struct {
	taskID, fence int64
	holder        string
}

// cancelledClaims reports which of claims, each named by a write the store refused
// as stale, a cancel ended: their tasks are cancelled under their fence and holder.
// One read by primary key, on the refusals' path only.
func (s *Store) cancelledClaims(ctx context.Context, claims []claimRef) (map[claimRef]bool, error) {
	ids := make([]int64, len(claims))
	for i, c := range claims {
		ids[i] = c.taskID
	}
	q, args, err := sqlx.In(cancelledClaimsSQL, ids)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		ID     int64  `db:"id"`
		Fence  int64  `db:"fence"`
		Holder string `db:"holder"`
	}
	if err := s.db.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, err
	}
	out := make(map[claimRef]bool, len(rows))
	for _, r := range rows {
		out[claimRef{r.ID, r.Fence, r.Holder}] = true
	}
	return out, nil
}

// refusal is the error of a write about the claim c that the store refused with
// err: errClaimCancelled when err is ErrStale and a cancel ended the claim,
// errDoneByOther when a hedge of its task took it over (see hedge.go), err
// otherwise (also when the read fails: the write was refused all the same).
func (s *Store) refusal(ctx context.Context, c claimRef, err error) error {
	if !errors.Is(err, tasks.ErrStale) || errors.Is(err, tasks.ErrCancelled) || c.holder == "" {
		return err
	}
	cancelled, rerr := s.cancelledClaims(ctx, []claimRef{c})
	if rerr == nil && cancelled[c] {
		return errClaimCancelled
	}
	if s.hedgedAway(ctx, c) {
		return errDoneByOther
	}
	return err
}

// markCancelled wraps with ErrCancelled the refusals in out (the answers to os, in
// their order) of the outcomes whose claims a cancel ended, and returns out. One
// read by primary key when a member was refused, none otherwise; should it fail,
// the refusals stay stale, which they are.
func (s *Store) markCancelled(ctx context.Context, os []tasks.Outcome, out []tasks.Completed) []tasks.Completed {
	var refused []claimRef
	for i, o := range os {
		if errors.Is(out[i].Err, tasks.ErrStale) {
			refused = append(refused, claimRef{o.TaskID, o.Fence, o.Holder})
		}
	}
	if len(refused) == 0 {
		return out
	}
	cancelled, err := s.cancelledClaims(ctx, refused)
	if err != nil {
		return out
	}
	for i, o := range os {
		if errors.Is(out[i].Err, tasks.ErrStale) && cancelled[claimRef{o.TaskID, o.Fence, o.Holder}] {
			out[i].Err = fmt.Errorf("complete task %d: %w", o.TaskID, errClaimCancelled)
		}
	}
	return out
}
