package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
)

// ClaimParams are the arguments of Claim.
type ClaimParams struct {
	TaskID int64
	// Fence is the fence the caller saw in Candidates.
	Fence int64
	// Status is the status the caller saw in Candidates. StatusPending claims with
	// one statement batch (one round trip); anything else, StatusAssigned for a
	// claim whose lease passed or "" when unknown, goes through a locking read that
	// also records the takeover.
	Status Status
	// Holder identifies the claimant: EditorHolder(id) for editors, a worker id for
	// workers. 1..128 characters.
	Holder string
	// EditorID is the claiming editor, or 0 for workers.
	EditorID int64
	// Lease is how long the claim lives without a heartbeat: LeaseMin..Config.MaxHold,
	// truncated to milliseconds.
	Lease time.Duration
	// TraceContext is the W3C traceparent of the claim span; may be empty.
	TraceContext string
}

// skippedSQL is true when the editor skipped the task and the skip has not passed. It
// is read on its own, never inside a locking statement: a locking read of task_skips
// would take gap locks there that a concurrent skip (Release) waits for.
const skippedSQL = `SELECT EXISTS (SELECT 1 FROM task_skips WHERE task_id = ? AND editor_id = ? AND ` + "`until`" + ` > NOW(3))`

const (
	// claimPendingSQL claims a pending task in one batch (see batch): the fenced
	// UPDATE, a SELECT of the task as claimed (claimed is the number of rows the
	// UPDATE matched), and the 'claimed' event, written when the row shows this
	// claim: the holder and the new fence, assigned at this batch's instant. The
	// event comes after the UPDATE, so that event ids follow the order in which
	// claims got their rows and the editor's unique key.
	claimPendingSQL = `START TRANSACTION;
SET @taskd_now = NOW(3), @taskd_skipped = (` + skippedSQL + `);
UPDATE tasks SET status = 'assigned', fence = fence + 1, holder = ?, editor_id = ?,
	assigned_at = @taskd_now, lease_expires_at = @taskd_now + INTERVAL ? MICROSECOND,
	attempts = attempts + 1, trace_context = ?
WHERE id = ? AND fence = ? AND status = 'pending' AND run_after <= @taskd_now AND NOT @taskd_skipped;
SELECT ROW_COUNT() AS claimed, @taskd_skipped AS skipped, ` + taskColumns + ` FROM tasks WHERE id = ?;
INSERT INTO task_events (task_id, kind, fence, holder, editor_id)
	SELECT id, 'claimed', fence, holder, editor_id FROM tasks
	WHERE id = ? AND fence = ? AND status = 'assigned' AND holder = ? AND assigned_at = @taskd_now;
COMMIT`

	// claimLockSQL reads and locks the row; db_now is the database clock the lease is
	// computed from, claimable whether the row may be claimed now. SKIP LOCKED: a row
	// another transaction is writing (a competing claim, a holder's write, a sweep's
	// batch) reads as no row at once instead of a lock wait, and the caller moves on to
	// its next candidate.
	claimLockSQL = `SELECT ` + taskColumns + `, NOW(3) AS db_now,
	COALESCE((status = 'pending' AND run_after <= NOW(3)) OR (status = 'assigned' AND lease_expires_at < NOW(3)), 0) AS claimable
FROM tasks WHERE id = ? FOR UPDATE SKIP LOCKED`

	// claimSQL is the conditional UPDATE that makes the claim. It repeats every
	// condition the locked read checked, so it is correct on its own.
	claimSQL = `UPDATE tasks SET status = 'assigned', fence = fence + 1, holder = ?, editor_id = ?,
	assigned_at = ?, lease_expires_at = ?, attempts = attempts + 1, trace_context = ?, updated_at = ?
WHERE id = ? AND fence = ?
	AND ((status = 'pending' AND run_after <= NOW(3)) OR (status = 'assigned' AND lease_expires_at < NOW(3)))`
)

// Claim claims a task for a holder: one conditional UPDATE checks that the fence is
// still p.Fence and that the task is claimable now (pending with run_after passed, or
// assigned with its lease passed) and not skipped by the editor, moves it to assigned,
// bumps the fence and sets the lease from the database clock. In the same transaction
// it records a 'claimed' event and, when it took over a claim whose lease had passed,
// an 'expired' event for the old fence.
//
// Claim returns ErrStale if the task was claimed or changed since Candidates read it,
// if another transaction is writing its row right now, or if there is no such task;
// ErrSkipped if the editor skipped it (it stays claimable for others); ErrEditorBusy
// if p.EditorID already holds a live claim; and ErrInvalid for bad params. If the
// editor's previous claim has expired but was not recycled yet, Claim recycles it
// first.
//
// Round trips: one for a pending task (p.Status StatusPending); otherwise the skip
// check (editors only), BEGIN, locked SELECT, UPDATE, INSERT events, COMMIT.
func (s *Store) Claim(ctx context.Context, p ClaimParams) (*Claim, error) {
	lease, err := s.checkLease(p.Lease)
	if err != nil {
		return nil, fmt.Errorf("claim task %d: %w", p.TaskID, err)
	}
	if err := checkHolder(p.Holder); err != nil {
		return nil, fmt.Errorf("claim task %d: %w", p.TaskID, err)
	}
	if p.EditorID < 0 {
		return nil, fmt.Errorf("claim task %d: %w: editor id must not be negative", p.TaskID, ErrInvalid)
	}
	if utf8.RuneCountInString(p.TraceContext) > maxTraceContextLen {
		return nil, fmt.Errorf("claim task %d: %w: trace context must be at most %d characters", p.TaskID, ErrInvalid, maxTraceContextLen)
	}
	if p.Status == StatusPending {
		c, err := s.claimPending(ctx, p, lease)
		// The editor's unique key is taken: the locking path finds out whether by
		// a live claim or one whose lease passed, which it frees.
		if !mysqlErrorIs(err, erDupEntry) || p.EditorID == 0 {
			if err != nil {
				return nil, fmt.Errorf("claim task %d: %w", p.TaskID, lostRace(err))
			}
			return c, nil
		}
	}
	c, err := s.claimLocked(ctx, p, lease)
	if err != nil {
		return nil, fmt.Errorf("claim task %d: %w", p.TaskID, lostRace(err))
	}
	return c, nil
}

// claimPending claims a pending task with claimPendingSQL.
func (s *Store) claimPending(ctx context.Context, p ClaimParams, lease time.Duration) (*Claim, error) {
	var row struct {
		Claimed int64 `db:"claimed"`
		Skipped bool  `db:"skipped"`
		Task
	}
	var found bool
	args := []any{
		p.TaskID, p.EditorID,
		p.Holder, nullID(p.EditorID), micros(lease), nullString(p.TraceContext), p.TaskID, p.Fence,
		p.TaskID,
		p.TaskID, p.Fence + 1, p.Holder,
	}
	if err := s.batch(ctx, claimPendingSQL, args, scanOne(&row, &found)); err != nil {
		return nil, err
	}
	switch {
	case !found:
		return nil, ErrStale
	case row.Claimed > 0:
		return claimOf(row.Task), nil
	case row.Skipped:
		return nil, ErrSkipped
	default:
		return nil, ErrStale
	}
}

// claimLocked claims a task with a locking read and claimSQL in a transaction.
func (s *Store) claimLocked(ctx context.Context, p ClaimParams, lease time.Duration) (*Claim, error) {
	if p.EditorID != 0 {
		var skipped bool
		if err := s.db.GetContext(ctx, &skipped, skippedSQL, p.TaskID, p.EditorID); err != nil {
			return nil, err
		}
		if skipped {
			return nil, ErrSkipped
		}
	}
	var claimed Task
	var tookOver bool
	err := s.inTx(ctx, nil, func(tx *sqlx.Tx) error {
		var row struct {
			Task
			DBNow     time.Time `db:"db_now"`
			Claimable bool      `db:"claimable"`
		}
		if err := tx.GetContext(ctx, &row, claimLockSQL, p.TaskID); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrStale // locked by another transaction right now, or no such task
			}
			return err
		}
		if row.Fence != p.Fence || !row.Claimable {
			return ErrStale
		}
		now := row.DBNow
		expires := now.Add(lease)
		args := []any{p.Holder, nullID(p.EditorID), now, expires, nullString(p.TraceContext), now, p.TaskID, p.Fence}
		res, err := tx.ExecContext(ctx, claimSQL, args...)
		if p.EditorID != 0 && mysqlErrorIs(err, erDupEntry) {
			// The editor's unique key is taken. If that claim has expired, free it and
			// try once more; if it is live, the editor is busy.
			if err := s.freeExpiredEditorClaim(ctx, tx, p.EditorID); err != nil {
				return err
			}
			res, err = tx.ExecContext(ctx, claimSQL, args...)
		}
		if err != nil {
			return err
		}
		if err := expectOne(res); err != nil {
			return err
		}

		var evs []event
		tookOver = row.Status == StatusAssigned
		if tookOver {
			evs = append(evs, event{
				taskID: p.TaskID, kind: EventExpired, fence: row.Fence,
				holder: row.Holder, editorID: row.EditorID, detail: "taken over by " + p.Holder,
			})
		}
		evs = append(evs, event{
			taskID: p.TaskID, kind: EventClaimed, fence: row.Fence + 1,
			holder: p.Holder, editorID: p.EditorID,
		})
		if err := insertEvents(ctx, tx, evs...); err != nil {
			return err
		}

		claimed = row.Task
		claimed.Status = StatusAssigned
		claimed.Fence = row.Fence + 1
		claimed.Holder = p.Holder
		claimed.EditorID = p.EditorID
		claimed.AssignedAt = &now
		claimed.LeaseExpiresAt = &expires
		claimed.Attempts++
		claimed.TraceContext = p.TraceContext
		claimed.UpdatedAt = now
		return nil
	})
	if err != nil {
		return nil, err
	}
	c := claimOf(claimed)
	c.TookOver = tookOver
	return c, nil
}

const (
	editorClaimLockSQL = `SELECT id, fence, COALESCE(holder, '') AS holder, lease_expires_at < NOW(3) AS expired
FROM tasks WHERE editor_id = ? FOR UPDATE`
	editorClaimFreeSQL = `UPDATE tasks SET status = 'pending', holder = NULL, editor_id = NULL,
	assigned_at = NULL, lease_expires_at = NULL
WHERE id = ? AND fence = ? AND status = 'assigned' AND lease_expires_at < NOW(3)`
)

// freeExpiredEditorClaim returns the editor's claim to the pool if its lease has passed,
// and returns ErrEditorBusy if it is live.
func (s *Store) freeExpiredEditorClaim(ctx context.Context, tx *sqlx.Tx, editorID int64) error {
	var held struct {
		ID      int64  `db:"id"`
		Fence   int64  `db:"fence"`
		Holder  string `db:"holder"`
		Expired bool   `db:"expired"`
	}
	if err := tx.GetContext(ctx, &held, editorClaimLockSQL, editorID); err != nil {
		if errors.Is(notFound(err), ErrNotFound) {
			// Freed by someone else in the meantime; the retried UPDATE decides.
			return nil
		}
		return err
	}
	if !held.Expired {
		return ErrEditorBusy
	}
	res, err := tx.ExecContext(ctx, editorClaimFreeSQL, held.ID, held.Fence)
	if err != nil {
		return err
	}
	if err := expectOne(res); err != nil {
		return err
	}
	return insertEvents(ctx, tx, event{
		taskID: held.ID, kind: EventRecycled, fence: held.Fence, holder: held.Holder,
		editorID: editorID, detail: "lease expired; freed for the editor's next claim",
	})
}

const heldByEditorSQL = `SELECT ` + taskColumns + ` FROM tasks
WHERE editor_id = ? AND status = 'assigned' AND lease_expires_at >= NOW(3)`

// HeldByEditor returns the live claim the editor holds, or ErrNotFound. A claim is live
// while the task is assigned and its lease has not passed.
func (s *Store) HeldByEditor(ctx context.Context, editorID int64) (*Claim, error) {
	var t Task
	if err := s.db.GetContext(ctx, &t, heldByEditorSQL, editorID); err != nil {
		return nil, fmt.Errorf("held by editor %d: %w", editorID, notFound(err))
	}
	return claimOf(t), nil
}
