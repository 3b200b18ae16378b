package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// A claim is live while the task is assigned to the holder under the fence and its
// lease has not passed. Every write a holder makes is fenced by this predicate: first a
// locking read of the row (which also yields the values the write and its audit record
// need), then a conditional UPDATE with the same predicate that must match exactly one
// row. Anything else is ErrStale and the transaction is rolled back.
const (
	liveClaimWhere = ` WHERE id = ? AND fence = ? AND status = 'assigned' AND holder = ? AND lease_expires_at >= NOW(3)`

	liveClaimLockSQL = `SELECT COALESCE(editor_id, 0) AS editor_id, category, assigned_at, lease_expires_at,
	attempts, max_attempts, COALESCE(trace_context, '') AS trace_context, NOW(3) AS db_now, claim_unlogged,
	` + goldCopyColumnSQL + `
FROM tasks` + liveClaimWhere + ` FOR UPDATE`
)

// liveClaim is what the locking read of a live claim returns.
type liveClaim struct {
	EditorID       int64     `db:"editor_id"`
	Category       string    `db:"category"`
	AssignedAt     time.Time `db:"assigned_at"`
	LeaseExpiresAt time.Time `db:"lease_expires_at"`
	Attempts       int       `db:"attempts"`
	MaxAttempts    int       `db:"max_attempts"`
	TraceContext   string    `db:"trace_context"`
	DBNow          time.Time `db:"db_now"`
	// Unlogged says the claim was made without its 'claimed' event, which
	// whatever ends it writes first (see logClaimsSQL).
	Unlogged bool `db:"claim_unlogged"`
	// GoldCopy says the task is a copy of a gold task: its end is sent to no
	// webhook.
	GoldCopy bool `db:"gold_copy"`
}

// ended describes the claim c of task id, held by holder, as ended now, leaving the
// task in status.
func (c liveClaim) ended(id int64, holder string, status tasks.Status) *tasks.Ended {
	return &tasks.Ended{
		TaskID: id, Holder: holder, Category: c.Category, Status: status,
		AssignedAt: c.AssignedAt, EndedAt: c.DBNow, TraceContext: c.TraceContext,
	}
}

// lockLiveClaim locks the row of a live claim, or returns ErrStale.
func lockLiveClaim(ctx context.Context, tx *sqlx.Tx, taskID, fence int64, holder string) (liveClaim, error) {
	var c liveClaim
	err := tx.GetContext(ctx, &c, liveClaimLockSQL, taskID, fence, holder)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return c, tasks.ErrStale
		}
		return c, err
	}
	return c, nil
}

// fencedExec runs a fenced UPDATE whose last three arguments are the live-claim
// predicate's and checks that it matched exactly one row.
func fencedExec(ctx context.Context, tx *sqlx.Tx, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	return expectOne(res)
}

// Heartbeat extends a live claim's lease to now + p.Lease on the database clock, but
// never beyond assigned_at + Config.MaxHold and never shorter than it already is. It
// returns the new deadline and moves the editor's last-seen time (see GetEditorStats); it
// writes no event: a claim's rows do not grow with how long it is held.
//
// It returns ErrStale if the claim is not live (wrong fence or holder, not assigned,
// or its lease has passed: an expired claim cannot be renewed; wrapped with
// ErrCancelled when a cancel ended the claim, see Cancel), ErrHoldLimit if the
// lease already reaches the maximum hold, and ErrInvalid for bad params.
//
// Round trips: one, shared with the concurrent writes of other claimants that
// arrive together (see Config.GroupCommit); a ctx that ends while it is in flight
// returns ctx's cause, and the lease may still have been extended.
func (s *Store) Heartbeat(ctx context.Context, p tasks.HeartbeatParams) (time.Time, error) {
	lease, err := s.checkLease(p.Lease)
	if err != nil {
		return time.Time{}, fmt.Errorf("heartbeat task %d: %w", p.TaskID, err)
	}
	c := &cycle{beat: &p, lease: lease}
	if err := s.groupedCycle(ctx, c); err != nil {
		return time.Time{}, fmt.Errorf("heartbeat task %d: %w", p.TaskID, err)
	}
	switch {
	case c.beaten.Beat:
		return *c.beaten.LeaseExpiresAt, nil
	case c.beaten.HoldLimit:
		return time.Time{}, fmt.Errorf("heartbeat task %d: %w", p.TaskID, tasks.ErrHoldLimit)
	default:
		return time.Time{}, fmt.Errorf("heartbeat task %d: %w", p.TaskID, s.refusal(ctx, claimRef{p.TaskID, p.Fence, p.Holder}, tasks.ErrStale))
	}
}

// Submit accepts the holder's result and completes the task, in one transaction and
// one round trip: the fenced UPDATE to done, one task_results row keyed by (task_id,
// fence), a 'submitted' event and, when webhooks subscribe to it, the webhook
// outbox's record. The task keeps its holder and assigned_at as a
// record of who completed it; editor_id is cleared so the editor can claim again.
//
// It returns the ended claim; ErrStale, changing nothing, if the claim is not live
// (wrapped with ErrCancelled when a cancel ended it, see Cancel); and ErrInvalid,
// naming the rule, for a result SubmitParams.Result does not allow.
// The round trip is shared with the concurrent writes of other claimants that
// arrive together (see Config.GroupCommit); a ctx that ends while it is in
// flight returns ctx's cause, and the submit may still have committed.
func (s *Store) Submit(ctx context.Context, p tasks.SubmitParams) (*tasks.Ended, error) {
	if err := tasks.CheckSubmission(p.Result, p.Decision, p.Notes); err != nil {
		return nil, fmt.Errorf("submit task %d: %w", p.TaskID, err)
	}
	c := &cycle{submit: &p}
	if err := s.groupedCycle(ctx, c); err != nil {
		return nil, fmt.Errorf("submit task %d: %w", p.TaskID, err)
	}
	ended, err := c.submitted.ended(p, c.foundSubmitted)
	if err != nil {
		return nil, fmt.Errorf("submit task %d: %w", p.TaskID, s.refusal(ctx, claimRef{p.TaskID, p.Fence, p.Holder}, err))
	}
	return ended, nil
}

// submittedRow is what a cycle's report says of its submit: Submitted is 1
// when the submit was accepted.
type submittedRow struct {
	Submitted    int64      `db:"submitted"`
	Category     string     `db:"category"`
	AssignedAt   *time.Time `db:"assigned_at"`
	DoneAt       *time.Time `db:"done_at"`
	TraceContext string     `db:"trace_context"`
	// MovedAt is the instant a submit that moved the task to another stage
	// did so (its updated_at then); Status, Stage and Stages the task's after
	// the submit.
	MovedAt time.Time
	Status  tasks.Status
	Stage   int
	Stages  tasks.Stages
	// FirstStage says the claim is live at the task's first stage.
	FirstStage bool
}

// ended is the claim p ended, or ErrStale if the row shows that the submit
// changed nothing, or ErrInvalid for a send back refused at a task's first
// stage. found says whether the SELECT found the task.
func (row *submittedRow) ended(p tasks.SubmitParams, found bool) (*tasks.Ended, error) {
	if found && row.Submitted == 0 && row.FirstStage && p.Decision == tasks.DecisionSendBack {
		return nil, fmt.Errorf("%w: decision %q: the task is at its first stage, there is nothing to send it back to", tasks.ErrInvalid, p.Decision)
	}
	if !found || row.Submitted == 0 || row.AssignedAt == nil {
		return nil, tasks.ErrStale
	}
	e := &tasks.Ended{
		TaskID: p.TaskID, Holder: p.Holder, Category: row.Category, Status: row.Status,
		AssignedAt: *row.AssignedAt, EndedAt: row.MovedAt, TraceContext: row.TraceContext,
	}
	if row.Status == tasks.StatusDone {
		if row.DoneAt == nil {
			return nil, tasks.ErrStale
		}
		e.EndedAt = *row.DoneAt
	} else {
		e.Stage = row.Stages[row.Stage]
	}
	return e, nil
}

const (
	releaseSQL = `UPDATE tasks SET run_after = ` + pendingRunAfterSQL + `, status = 'pending', holder = NULL, editor_id = NULL,
	assigned_at = NULL, lease_expires_at = NULL, claim_unlogged = 0` + liveClaimWhere
	// lockTaskEditorSQL locks the row of the editor the task names; the subquery
	// reads without locking, so the editor's row is locked before the task's.
	lockTaskEditorSQL = `SELECT id FROM editors WHERE id = (SELECT editor_id FROM tasks WHERE id = ?) FOR UPDATE`
	// upsertSkipSQL keeps the task from the editor until the later of the
	// time it has and the new one.
	upsertSkipSQL = `INSERT INTO task_skips (task_id, editor_id, ` + "`until`" + `)
VALUES (?, ?, NOW(3) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE ` + "`until`" + ` = GREATEST(` + "`until`" + `, NOW(3) + INTERVAL ? MICROSECOND)`
)

// Release gives a live claim back: the task returns to the pool at once, with its
// fence unchanged (the next claim bumps it). It records a 'released' event, or with
// p.Skip a 'skipped' event (after the claim's 'claimed' event, for a claim made
// without one: see logClaimsSQL). An editor's claim leaves the task kept from that editor
// (task_skips) for Config.ReleaseCooldown, or Config.SkipFor with p.Skip: others may
// claim it at once. A claim p.Undelivered is kept from nobody.
//
// It returns the ended claim; ErrStale, changing nothing, if the claim is not live
// (wrapped with ErrCancelled when a cancel ended it, see Cancel); and ErrInvalid for a
// skip of a claim no editor holds or one undelivered.
func (s *Store) Release(ctx context.Context, p tasks.ReleaseParams) (*tasks.Ended, error) {
	var ended *tasks.Ended
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		// The skip record's foreign key takes a lock on the editor's row, which a
		// claim of the same editor locks before the task: lock it first here too,
		// or the two deadlock. A worker's task names no editor: nothing is locked.
		if _, err := tx.ExecContext(ctx, lockTaskEditorSQL, p.TaskID); err != nil {
			return err
		}
		c, err := lockLiveClaim(ctx, tx, p.TaskID, p.Fence, p.Holder)
		if err != nil {
			return err
		}
		ended = c.ended(p.TaskID, p.Holder, tasks.StatusPending)
		if p.Skip && c.EditorID == 0 {
			return fmt.Errorf("%w: only an editor's claim can be skipped", tasks.ErrInvalid)
		}
		if p.Skip && p.Undelivered {
			return fmt.Errorf("%w: a claim its holder never learnt of cannot be skipped", tasks.ErrInvalid)
		}
		if err := logClaim(ctx, tx, c.Unlogged, p.TaskID, p.Fence); err != nil {
			return err
		}
		if err := fencedExec(ctx, tx, releaseSQL, p.TaskID, p.Fence, p.Holder); err != nil {
			return err
		}
		kind, cause, withheld := tasks.EventReleased, tasks.WebhookRelease, s.cfg.ReleaseCooldown
		if p.Skip {
			kind, cause, withheld = tasks.EventSkipped, tasks.WebhookSkip, s.cfg.SkipFor
		}
		if p.Undelivered && p.Reason == "" {
			p.Reason = tasks.ReasonUndelivered
		}
		if c.EditorID != 0 && !p.Undelivered {
			us := micros(withheld)
			if _, err := tx.ExecContext(ctx, upsertSkipSQL, p.TaskID, c.EditorID, us, us); err != nil {
				return err
			}
			ended.Withheld = withheld
		}
		return s.insertEvents(ctx, tx, event{
			taskID: p.TaskID, kind: kind, fence: p.Fence, holder: p.Holder, editorID: c.EditorID, detail: p.Reason,
			category: c.Category, cause: cause, goldCopy: c.GoldCopy,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("release task %d: %w", p.TaskID, s.refusal(ctx, claimRef{p.TaskID, p.Fence, p.Holder}, err))
	}
	return ended, nil
}

const (
	forceReleaseLockSQL = `SELECT status, fence, COALESCE(holder, '') AS holder, COALESCE(editor_id, 0) AS editor_id,
	category, assigned_at, COALESCE(trace_context, '') AS trace_context, NOW(3) AS db_now, claim_unlogged,
	` + goldCopyColumnSQL + `
FROM tasks WHERE id = ? FOR UPDATE`
	forceReleaseSQL = `UPDATE tasks SET run_after = ` + pendingRunAfterSQL + `, status = 'pending', fence = fence + 1, holder = NULL, editor_id = NULL,
	assigned_at = NULL, lease_expires_at = NULL, claim_unlogged = 0
WHERE id = ? AND fence = ? AND status = 'assigned'`
)

// ForceRelease revokes the claim on a task, whoever holds it and whether or not its
// lease has passed: the task returns to the pool and its fence is bumped, so every
// write the old holder still sends is stale. It records a 'released' event with detail
// "forced" for the revoked fence, and returns the revoked claim.
//
// It returns ErrNotFound for an unknown task and ErrStale if the task is not assigned.
func (s *Store) ForceRelease(ctx context.Context, taskID int64) (*tasks.Ended, error) {
	var ended *tasks.Ended
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var row struct {
			Status       tasks.Status `db:"status"`
			Fence        int64        `db:"fence"`
			Holder       string       `db:"holder"`
			EditorID     int64        `db:"editor_id"`
			Category     string       `db:"category"`
			AssignedAt   *time.Time   `db:"assigned_at"` // NULL unless assigned
			TraceContext string       `db:"trace_context"`
			DBNow        time.Time    `db:"db_now"`
			Unlogged     bool         `db:"claim_unlogged"`
			GoldCopy     bool         `db:"gold_copy"`
		}
		if err := tx.GetContext(ctx, &row, forceReleaseLockSQL, taskID); err != nil {
			return notFound(err)
		}
		if row.Status != tasks.StatusAssigned || row.AssignedAt == nil {
			return tasks.ErrStale
		}
		if err := logClaim(ctx, tx, row.Unlogged, taskID, row.Fence); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, forceReleaseSQL, taskID, row.Fence)
		if err != nil {
			return err
		}
		if err := expectOne(res); err != nil {
			return err
		}
		ended = &tasks.Ended{
			TaskID: taskID, Holder: row.Holder, Category: row.Category, Status: tasks.StatusPending,
			AssignedAt: *row.AssignedAt, EndedAt: row.DBNow, TraceContext: row.TraceContext,
		}
		return s.insertEvents(ctx, tx, event{
			taskID: taskID, kind: tasks.EventReleased, fence: row.Fence, holder: row.Holder, editorID: row.EditorID, detail: "forced",
			category: row.Category, cause: tasks.WebhookForce, goldCopy: row.GoldCopy,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("force release task %d: %w", taskID, err)
	}
	return ended, nil
}

const (
	failRetrySQL = `UPDATE tasks SET status = 'pending', holder = NULL, editor_id = NULL, assigned_at = NULL,
	lease_expires_at = NULL, run_after = NOW(3) + INTERVAL ? MICROSECOND, last_error = ?, claim_unlogged = 0` + liveClaimWhere
	failDeadSQL = `UPDATE tasks SET status = 'dead', done_at = NOW(3), editor_id = NULL,
	lease_expires_at = NULL, last_error = ?, claim_unlogged = 0` + liveClaimWhere
)

// Fail ends a live claim with an error. If the task has attempts left (attempts <
// max_attempts; every claim counts as an attempt) and p.Dead is not set, it goes back
// to the pool, claimable after p.Backoff, with a 'failed' event; otherwise it becomes
// dead, keeping its last holder, with a 'dead' event. It returns the ended claim, whose
// Status is the task's new status.
//
// It returns ErrStale, changing nothing, if the claim is not live, and ErrInvalid for
// bad params.
func (s *Store) Fail(ctx context.Context, p tasks.FailParams) (*tasks.Ended, error) {
	if p.Backoff < 0 {
		return nil, fmt.Errorf("fail task %d: %w: backoff must not be negative", p.TaskID, tasks.ErrInvalid)
	}
	backoff := p.Backoff.Truncate(time.Millisecond)
	var ended *tasks.Ended
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		c, err := lockLiveClaim(ctx, tx, p.TaskID, p.Fence, p.Holder)
		if err != nil {
			return err
		}
		if err := logClaim(ctx, tx, c.Unlogged, p.TaskID, p.Fence); err != nil {
			return err
		}
		lastErr := nullString(truncate(p.Err, maxLastErrorLen))
		kind := tasks.EventFailed
		ended = c.ended(p.TaskID, p.Holder, tasks.StatusPending)
		if p.Dead || c.Attempts >= c.MaxAttempts {
			kind, ended.Status = tasks.EventDead, tasks.StatusDead
			err = fencedExec(ctx, tx, failDeadSQL, lastErr, p.TaskID, p.Fence, p.Holder)
		} else {
			err = fencedExec(ctx, tx, failRetrySQL, micros(backoff), lastErr, p.TaskID, p.Fence, p.Holder)
		}
		if err != nil {
			return err
		}
		return s.insertEvents(ctx, tx, event{
			taskID: p.TaskID, kind: kind, fence: p.Fence, holder: p.Holder, editorID: c.EditorID, detail: p.Err,
			category: c.Category, cause: tasks.WebhookFail,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("fail task %d: %w", p.TaskID, err)
	}
	return ended, nil
}
