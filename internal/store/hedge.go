package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Hedged re-offers (task_hedges, see schema.sql and migration 0024).
//
// A task an editor holds near its due_at, whose holder sent no heartbeat for a
// while, is offered to one more editor of its category too (Workflow.Hedge).
// That editor's hedge is a second claim record: its fence is the holder's plus
// one, the fence the task's next claim would get, and it is live while it has
// not expired and the task is still under the holder's fence at the stage it
// was hedged at: assigned to the holder, or back in the pool and claimed by
// nobody since (the holder released it, or its lease passed). A hedge counts
// against its editor's capacity while it is live: every claim of an editor and
// every hedge take lock the editor's row first and count, under that lock, the
// tasks that name it and its live hedges (the claims count hedges only when
// some category hedges), so a claim and a hedge taken at once never put the
// editor past its capacity. On Galera the hedge take writes the editor's row,
// as a claim does, so that two nodes' takes conflict.
//
// The task's row is the arbiter. The holder's submit is the usual fenced
// UPDATE (fence = the holder's, status 'assigned'); the hedger's submit first
// takes the task over (TakeOverHedge): one conditional UPDATE that needs the
// same fence and a live hedge moves the task to the hedger under the hedge's
// fence, and then the hedger submits as any holder. Both UPDATEs need the
// holder's fence: exactly one of them matches a row, so a slot never has two
// accepted results. The loser's writes are refused with ErrDoneByOther.
//
// Every write of a task_hedges row is made under the lock of its task's row,
// taken first, so that none races the arbiter. The hedge writes no event while
// it lives: its fence may go to the task's next claim when it ends without a
// win, and every fence is accounted for by one 'claimed' event. A takeover writes
// the holder's 'released' event (detail "hedge") and the hedger's 'claimed'
// event (detail "hedge").

// hedgeDetail is the detail of the events a takeover writes.
const hedgeDetail = "hedge"

// hedgeLiveSQL is true when the hedge h of the task t is live. A task back in
// the pool must be claimable now: one held out of it (a gold task's
// tasks.GoldRunAfter, which MarkGold gives a pending task) or deferred is
// taken over by no hedge, as no claim takes it.
const hedgeLiveSQL = `h.expires_at > NOW(3) AND t.fence = h.fence - 1
	AND (t.status = 'assigned' OR (t.status = 'pending' AND t.stage = h.stage AND t.reserved_for IS NULL AND t.run_after <= NOW(3)))`

// hedgesOfSQL is the editors' hedges joined to their tasks, for counts by
// editor that hedgeLiveSQL filters.
const hedgesOfSQL = `task_hedges h FORCE INDEX (task_hedges_editor) JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = h.task_id`

const (
	// hedgeEditorLockSQL locks the editor's row, as each of its claims does
	// first, and reads what a take needs of it.
	hedgeEditorLockSQL = `SELECT capacity, disabled_at IS NOT NULL AS disabled FROM editors WHERE id = ? FOR UPDATE`
	// hedgeHeldSQL counts, under that lock, the claims and the live hedges the
	// editor holds.
	hedgeHeldSQL = `SELECT (SELECT COUNT(*) FROM tasks FORCE INDEX (tasks_editor) WHERE editor_id = ?)
	+ (SELECT COUNT(*) FROM ` + hedgesOfSQL + `
		WHERE h.editor_id = ? AND ` + hedgeLiveSQL + `)`

	// hedgeCandidatesSQL reads, for one category, the assigned tasks an editor
	// may hedge: held by another editor, their lease not passed, due within
	// the category's before_due, their holder silent for inactive_for (its
	// last heartbeat, or its claim when it sent none), without a live hedge,
	// not skipped by the editor, not paused, and not barred for it by the
	// workflow rules of a claim (barredWhereSQL), nor of a group of which it
	// hedges another task. Without locking: the take locks the row.
	// barredWhereSQL is UNKNOWN, not false, for a task with stages or of a
	// group that no reservation names (its reservation test compares NULLs):
	// a claim reads it through EXISTS, where that is false; here it is
	// negated, so COALESCE makes it false first, or no such task would ever
	// be hedged.
	hedgeCandidatesSQL = `(SELECT t.id, t.fence, t.due_at FROM tasks t FORCE INDEX (tasks_expiry)
	LEFT JOIN editor_seen s FORCE INDEX (PRIMARY) ON s.editor_id = t.editor_id
	LEFT JOIN task_hedges h FORCE INDEX (PRIMARY) ON h.task_id = t.id
WHERE t.status = 'assigned' AND t.category = ? AND t.lease_expires_at >= NOW(3)
	AND t.editor_id IS NOT NULL AND t.editor_id <> ?
	AND t.due_at <= NOW(3) + INTERVAL ? MICROSECOND
	AND GREATEST(t.assigned_at, COALESCE(s.last_seen_at, t.assigned_at)) <= NOW(3) - INTERVAL ? MICROSECOND
	AND (h.task_id IS NULL OR NOT (` + hedgeLiveSQL + `))
	AND NOT EXISTS (SELECT 1 FROM task_skips k FORCE INDEX (PRIMARY) WHERE k.task_id = t.id AND k.editor_id = ? AND k.` + "`until`" + ` > NOW(3))
	AND NOT EXISTS (SELECT 1 FROM paused_categories p WHERE p.category = t.category)
	AND NOT (t.group_id IS NOT NULL AND EXISTS (SELECT 1 FROM task_hedges gh FORCE INDEX (task_hedges_editor)
		JOIN tasks g FORCE INDEX (PRIMARY) ON g.id = gh.task_id
		WHERE gh.editor_id = ? AND gh.expires_at > NOW(3) AND g.group_id = t.group_id AND g.id <> t.id))
	AND NOT COALESCE(%s, FALSE)
ORDER BY t.due_at, t.id LIMIT 4)`

	// hedgeLockSQL locks a candidate's row, if it is still assigned under the
	// fence it was read with and no other transaction is writing it.
	hedgeLockSQL = `SELECT ` + taskColumns + ` FROM tasks
WHERE id = ? AND fence = ? AND status = 'assigned' AND lease_expires_at >= NOW(3) FOR UPDATE SKIP LOCKED`
	// hedgeClearSQL deletes the task's hedge unless it is live: the record of a
	// hedge that ended makes way for the next, kept first in
	// task_hedges_ended (whose hedge (task, fence) was: see hedgeRefusal).
	hedgeClearSQL = `INSERT IGNORE INTO task_hedges_ended (task_id, fence, editor_id)
SELECT h.task_id, h.fence, h.editor_id FROM task_hedges h JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = h.task_id
WHERE h.task_id = ? AND NOT (` + hedgeLiveSQL + `);
DELETE h FROM task_hedges h JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = h.task_id
WHERE h.task_id = ? AND NOT (` + hedgeLiveSQL + `)`
	// hedgeInsertSQL takes the hedge; a live one makes it a duplicate key.
	hedgeInsertSQL = `INSERT INTO task_hedges (task_id, editor_id, fence, stage, assigned_at, expires_at)
VALUES (?, ?, ?, ?, NOW(3), NOW(3) + INTERVAL ? MICROSECOND)`
	hedgeReadSQL = `SELECT assigned_at, expires_at FROM task_hedges WHERE task_id = ?`
)

// TakeHedge offers the editor p.EditorID one task that another editor holds in
// one of p.Categories whose Workflow.Hedge is on, near its due_at, whose holder
// has been inactive (see tasks.Hedge): the hedge lasts p.Lease from now on the
// database clock, and its fence is the holder's plus one. The editor must have
// room for it (its capacity counts its claims and live hedges), and the task
// must be one it could claim at its stage (stages, the four-eyes rule, its
// group, skips, pauses). It returns the hedge as a Claim with Hedge set.
//
// It returns ErrNotFound when there is nothing to hedge, ErrEditorBusy when the
// editor has no room, ErrEditorDisabled for a disabled editor and ErrInvalid for
// bad params.
//
// Round trips: BEGIN, the editor's lock and count, one read of candidates, then
// per candidate tried a lock, a delete and an insert, and COMMIT (and the
// claims count on Galera).
func (s *Store) TakeHedge(ctx context.Context, p tasks.HedgeParams) (*tasks.Claim, error) {
	lease, err := s.checkLease(p.Lease)
	if err != nil {
		return nil, fmt.Errorf("take hedge: %w", err)
	}
	var q strings.Builder
	var args []any
	for _, cat := range slices.Sorted(slices.Values(p.Categories)) {
		h := s.cfg.Workflows[cat].Hedge
		if !h.On() {
			continue
		}
		if len(args) > 0 {
			q.WriteString("\nUNION ALL ")
		}
		q.WriteString(fmt.Sprintf(hedgeCandidatesSQL, "("+fmt.Sprintf(barredWhereSQL, "NOW(3)")+")"))
		args = append(args, cat, p.EditorID, micros(h.BeforeDue), micros(h.InactiveFor), p.EditorID, p.EditorID)
		args = append(args, barredArgs(p.EditorID)...)
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("take hedge: %w", tasks.ErrNotFound)
	}
	query := "SELECT id, fence FROM (" + q.String() + ") c ORDER BY due_at, id LIMIT 4"
	galera := s.onGalera(ctx)
	var claim *tasks.Claim
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		claim = nil
		var ed struct {
			Capacity int  `db:"capacity"`
			Disabled bool `db:"disabled"`
		}
		if err := tx.GetContext(ctx, &ed, hedgeEditorLockSQL, p.EditorID); err != nil {
			return notFound(err)
		}
		if ed.Disabled {
			return tasks.ErrEditorDisabled
		}
		if galera {
			// See 0010_editor_claims.sql.
			if _, err := tx.ExecContext(ctx, countClaimSQL, p.EditorID); err != nil {
				return err
			}
		}
		var held int
		if err := tx.GetContext(ctx, &held, hedgeHeldSQL, p.EditorID, p.EditorID); err != nil {
			return err
		}
		if held >= max(1, ed.Capacity) {
			return tasks.ErrEditorBusy
		}
		var cands []struct {
			ID    int64 `db:"id"`
			Fence int64 `db:"fence"`
		}
		if err := tx.SelectContext(ctx, &cands, query, args...); err != nil {
			return err
		}
		for _, c := range cands {
			var t tasks.Task
			if err := tx.GetContext(ctx, &t, hedgeLockSQL, c.ID, c.Fence); errors.Is(err, sql.ErrNoRows) {
				continue
			} else if err != nil {
				return err
			}
			if t.EditorID == p.EditorID {
				continue // never the holder
			}
			if _, err := s.execInTx(ctx, tx, hedgeClearSQL, []any{c.ID, c.ID}); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, hedgeInsertSQL, c.ID, p.EditorID, c.Fence+1, t.Stage, micros(lease)); err != nil {
				if mysqlErrorIs(err, erDupEntry) {
					continue // a live hedge: one at a time
				}
				return err
			}
			claim = claimOf(t)
			claim.Fence, claim.Hedge = c.Fence+1, true
			var at struct {
				AssignedAt time.Time `db:"assigned_at"`
				ExpiresAt  time.Time `db:"expires_at"`
			}
			if err := tx.GetContext(ctx, &at, hedgeReadSQL, c.ID); err != nil {
				return err
			}
			claim.AssignedAt, claim.LeaseExpiresAt = at.AssignedAt, at.ExpiresAt
			return nil
		}
		return tasks.ErrNotFound
	})
	if err != nil {
		return nil, fmt.Errorf("take hedge for editor %d: %w", p.EditorID, err)
	}
	return claim, nil
}

// hedgesHeldSQL reads the editor's live hedges with their tasks, oldest first.
const hedgesHeldSQL = `SELECT ` + taskColumns + `, h_fence, h_assigned_at, h_expires_at FROM tasks FORCE INDEX (PRIMARY)
JOIN (SELECT h.task_id AS h_task_id, h.fence AS h_fence, h.assigned_at AS h_assigned_at, h.expires_at AS h_expires_at
	FROM task_hedges h FORCE INDEX (task_hedges_editor) JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = h.task_id
	WHERE h.editor_id = ? AND ` + hedgeLiveSQL + `) x ON tasks.id = x.h_task_id
ORDER BY h_assigned_at, id`

// HeldHedges returns the editor's live hedges as Claims with Hedge set, oldest
// first. One round trip, by the editor's key in task_hedges.
func (s *Store) HeldHedges(ctx context.Context, editorID int64) ([]*tasks.Claim, error) {
	var rows []struct {
		tasks.Task
		Fence      int64     `db:"h_fence"`
		AssignedAt time.Time `db:"h_assigned_at"`
		ExpiresAt  time.Time `db:"h_expires_at"`
	}
	if err := s.db.SelectContext(ctx, &rows, hedgesHeldSQL, editorID); err != nil {
		return nil, fmt.Errorf("hedges of editor %d: %w", editorID, err)
	}
	out := make([]*tasks.Claim, len(rows))
	for i, r := range rows {
		out[i] = &tasks.Claim{Task: r.Task, Fence: r.Fence, AssignedAt: r.AssignedAt, LeaseExpiresAt: r.ExpiresAt, Hedge: true}
	}
	return out, nil
}

const (
	// hedgeTaskLockSQL locks the task's row first, as every write of a hedge does.
	hedgeTaskLockSQL = `SELECT id FROM tasks WHERE id = ? FOR UPDATE`
	// hedgeBeatSQL extends a live hedge's lease, never beyond its start plus
	// the maximum hold, and never shorter than it is.
	hedgeBeatSQL = `UPDATE task_hedges h JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = h.task_id
SET h.expires_at = GREATEST(h.expires_at, LEAST(NOW(3) + INTERVAL ? MICROSECOND, h.assigned_at + INTERVAL ? MICROSECOND))
WHERE h.task_id = ? AND h.editor_id = ? AND h.fence = ? AND ` + hedgeLiveSQL
	hedgeSeenSQL = `INSERT INTO editor_seen (editor_id, last_seen_at) VALUES (?, NOW(3))
ON DUPLICATE KEY UPDATE last_seen_at = GREATEST(last_seen_at, NOW(3))`
)

// HeartbeatHedge extends the lease of the editor's live hedge r by lease from
// now, capped at its start plus Config.MaxHold, as Heartbeat does a claim's,
// and moves the editor's last-seen time. It returns the new deadline.
//
// It returns ErrNotFound when the editor never held a hedge r (the task's
// latest hedge is not r); ErrStale when r is no longer live, wrapped with
// ErrDoneByOther when its holder submitted first, or with ErrCancelled when
// the task was cancelled; ErrInvalid for a bad lease. Round trips: BEGIN, the
// task's lock, the update, the last-seen time, a read of the deadline, COMMIT.
func (s *Store) HeartbeatHedge(ctx context.Context, r tasks.HedgeRef, lease time.Duration) (time.Time, error) {
	lease, err := s.checkLease(lease)
	if err != nil {
		return time.Time{}, fmt.Errorf("heartbeat hedge of task %d: %w", r.TaskID, err)
	}
	var until time.Time
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, hedgeTaskLockSQL, r.TaskID); err != nil {
			return err
		}
		if err := fencedExec(ctx, tx, hedgeBeatSQL, micros(lease), micros(s.cfg.MaxHold), r.TaskID, r.EditorID, r.Fence); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, hedgeSeenSQL, r.EditorID); err != nil {
			return err
		}
		var at struct {
			AssignedAt time.Time `db:"assigned_at"`
			ExpiresAt  time.Time `db:"expires_at"`
		}
		if err := tx.GetContext(ctx, &at, hedgeReadSQL, r.TaskID); err != nil {
			return err
		}
		until = at.ExpiresAt
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("heartbeat hedge of task %d: %w", r.TaskID, s.hedgeRefusal(ctx, r, err))
	}
	return until, nil
}

// hedgeEndSQL ends a live hedge now: the row stays as its record.
const hedgeEndSQL = `UPDATE task_hedges h JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = h.task_id
SET h.expires_at = NOW(3) WHERE h.task_id = ? AND h.editor_id = ? AND h.fence = ? AND ` + hedgeLiveSQL

// ReleaseHedge ends the editor's live hedge r: the holder keeps the task,
// which is not offered to the editor again for Config.ReleaseCooldown (or
// Config.SkipFor with skip). Errors as HeartbeatHedge's. Round trips: BEGIN,
// the editor's lock, the task's lock, the update, the skip, COMMIT.
func (s *Store) ReleaseHedge(ctx context.Context, r tasks.HedgeRef, skip bool) error {
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		// The skip's foreign key locks the editor's row: lock it first, as a
		// claim does.
		if _, err := tx.ExecContext(ctx, hedgeEditorLockSQL, r.EditorID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, hedgeTaskLockSQL, r.TaskID); err != nil {
			return err
		}
		if err := fencedExec(ctx, tx, hedgeEndSQL, r.TaskID, r.EditorID, r.Fence); err != nil {
			return err
		}
		withheld := s.cfg.ReleaseCooldown
		if skip {
			withheld = s.cfg.SkipFor
		}
		us := micros(withheld)
		_, err := tx.ExecContext(ctx, upsertSkipSQL, r.TaskID, r.EditorID, us, us)
		return err
	})
	if err != nil {
		return fmt.Errorf("release hedge of task %d: %w", r.TaskID, s.hedgeRefusal(ctx, r, err))
	}
	return nil
}

const (
	// hedgeTakeOverLockSQL locks the task's row and reads it with its hedge.
	hedgeTakeOverLockSQL = `SELECT t.status, t.fence, COALESCE(t.holder, '') AS holder, COALESCE(t.editor_id, 0) AS editor_id,
	t.category, t.claim_unlogged, h.editor_id AS hedger, h.fence AS hedge_fence, h.assigned_at, h.expires_at,
	` + hedgeLiveSQL + ` AS live
FROM tasks t FORCE INDEX (PRIMARY) JOIN task_hedges h FORCE INDEX (PRIMARY) ON h.task_id = t.id
WHERE t.id = ? FOR UPDATE`
	// hedgeTakeOverSQL is the arbiter: the task moves to the hedger under the
	// hedge's fence only if it is still under the holder's fence (assigned, or
	// back in the pool at the hedged stage), which the holder's submit needs
	// too, and the hedge is live.
	hedgeTakeOverSQL = `UPDATE tasks t JOIN task_hedges h FORCE INDEX (PRIMARY) ON h.task_id = t.id
SET t.status = 'assigned', t.fence = h.fence, t.holder = ?, t.editor_id = h.editor_id,
	t.assigned_at = h.assigned_at, t.lease_expires_at = h.expires_at, t.claim_unlogged = 0
WHERE t.id = ? AND h.editor_id = ? AND h.fence = ? AND ` + hedgeLiveSQL + `
	AND NOT EXISTS (SELECT 1 FROM paused_categories p WHERE p.category = t.category)`
	hedgeDeleteSQL = `DELETE FROM task_hedges WHERE task_id = ?`
)

// TakeOverHedge makes the editor's live hedge r the task's claim, so that the
// editor can submit it as any holder does (Submit with r.Fence): in one
// transaction, the conditional UPDATE that needs the holder's fence (see the
// model above) moves the task to the editor under the hedge's fence and
// lease, the holder's claim gets a 'released' event and the hedge's a
// 'claimed' event (both with detail "hedge"), and the hedge's row goes. A task
// back in the pool at the hedged stage (its holder released it, or its lease
// passed, and nobody claimed it since) is taken the same way, unless its
// category is paused or has limits in flight.
//
// The workflow's bars of a claim (barredWhereSQL) are read again under the
// task's lock: a takeover by an editor that holds, or did, another task of
// the task's group since its hedge was taken is refused with ErrStale.
//
// It returns the holder whose claim the takeover ended ("" for a task taken
// from the pool), whose Redis lock the caller may give back. Errors as
// HeartbeatHedge's. Round trips: BEGIN, the editor's lock, the task's, the
// bars' read, the update, the events, the delete, COMMIT.
func (s *Store) TakeOverHedge(ctx context.Context, r tasks.HedgeRef) (string, error) {
	holder := tasks.EditorHolder(r.EditorID)
	var ended string
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		ended = ""
		// The editor's row first, as its claims lock it: the task will name it.
		if _, err := tx.ExecContext(ctx, hedgeEditorLockSQL, r.EditorID); err != nil {
			return err
		}
		var row struct {
			Status     tasks.Status `db:"status"`
			Fence      int64        `db:"fence"`
			Holder     string       `db:"holder"`
			EditorID   int64        `db:"editor_id"`
			Category   string       `db:"category"`
			Unlogged   bool         `db:"claim_unlogged"`
			Hedger     int64        `db:"hedger"`
			HedgeFence int64        `db:"hedge_fence"`
			AssignedAt time.Time    `db:"assigned_at"`
			ExpiresAt  time.Time    `db:"expires_at"`
			Live       bool         `db:"live"`
		}
		if err := tx.GetContext(ctx, &row, hedgeTakeOverLockSQL, r.TaskID); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return tasks.ErrStale
			}
			return err
		}
		if !row.Live || row.Hedger != r.EditorID || row.HedgeFence != r.Fence {
			return tasks.ErrStale
		}
		if row.Status == tasks.StatusPending && s.cfg.Workflows[row.Category].Limited() {
			return tasks.ErrStale
		}
		// The workflow's bars again, under the task's lock: since the take,
		// the editor may have claimed (or submitted) another task of the
		// task's group, which would give the group two results of one editor.
		var barred bool
		if err := tx.GetContext(ctx, &barred, barredSQL, append([]any{r.TaskID}, barredArgs(r.EditorID)...)...); err != nil {
			return err
		}
		if barred {
			return tasks.ErrStale
		}
		if err := logClaim(ctx, tx, row.Unlogged, r.TaskID, row.Fence); err != nil {
			return err
		}
		if err := fencedExec(ctx, tx, hedgeTakeOverSQL, holder, r.TaskID, r.EditorID, r.Fence); err != nil {
			return err
		}
		evs := []event{{taskID: r.TaskID, kind: tasks.EventClaimed, fence: r.Fence, holder: holder, editorID: r.EditorID, detail: hedgeDetail}}
		if row.Status == tasks.StatusAssigned {
			ended = row.Holder
			evs = append([]event{{
				taskID: r.TaskID, kind: tasks.EventReleased, fence: row.Fence, holder: row.Holder, editorID: row.EditorID,
				detail: hedgeDetail, category: row.Category, cause: tasks.WebhookHedge,
			}}, evs...)
		}
		if err := s.insertEvents(ctx, tx, evs...); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, hedgeDeleteSQL, r.TaskID)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("take over hedge of task %d: %w", r.TaskID, s.hedgeRefusal(ctx, r, err))
	}
	return ended, nil
}

// errDoneByOther is the refusal of a write about a claim or hedge whose slot the
// other party submitted first.
var errDoneByOther = fmt.Errorf("%w: %w", tasks.ErrStale, tasks.ErrDoneByOther)

const (
	// hedgeRefusalSQL reads what a refused hedge write needs: whether the
	// task's hedge is r, the task's status and fence, and whether the
	// holder's claim (the hedge's fence - 1) has a result.
	hedgeRefusalSQL = `SELECT h.editor_id, h.fence, t.status, t.fence AS task_fence,
	EXISTS (SELECT 1 FROM task_results r FORCE INDEX (PRIMARY) WHERE r.task_id = t.id AND r.fence = h.fence - 1) AS submitted
FROM task_hedges h JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = h.task_id WHERE h.task_id = ?`
	// hedgeEndedSQL says whether r was a hedge the task's next one replaced.
	hedgeEndedSQL = `SELECT EXISTS (SELECT 1 FROM task_hedges_ended WHERE task_id = ? AND fence = ? AND editor_id = ?)`
	// hedgedAwaySQL is true when a takeover ended the holder's claim.
	hedgedAwaySQL = `SELECT EXISTS (SELECT 1 FROM task_events FORCE INDEX (task_events_task)
	WHERE task_id = ? AND kind = 'released' AND fence = ? AND holder = ? AND detail = '` + hedgeDetail + `')`
)

// hedgeRefusal is the error of a write about the hedge r that the store
// refused with err: ErrNotFound when the task's hedge is not r and never was
// (the caller's fence names something else; a hedge the task's next one
// replaced is kept in task_hedges_ended, and its writes are err, stale),
// errDoneByOther when the holder's claim has a result, errClaimCancelled when
// a cancel ended it, err otherwise.
func (s *Store) hedgeRefusal(ctx context.Context, r tasks.HedgeRef, err error) error {
	if !errors.Is(err, tasks.ErrStale) {
		return err
	}
	var row struct {
		EditorID  int64        `db:"editor_id"`
		Fence     int64        `db:"fence"`
		Status    tasks.Status `db:"status"`
		TaskFence int64        `db:"task_fence"`
		Submitted bool         `db:"submitted"`
	}
	switch rerr := s.db.GetContext(ctx, &row, hedgeRefusalSQL, r.TaskID); {
	case errors.Is(rerr, sql.ErrNoRows), rerr == nil && (row.EditorID != r.EditorID || row.Fence != r.Fence):
		var ended bool
		if eerr := s.db.GetContext(ctx, &ended, hedgeEndedSQL, r.TaskID, r.Fence, r.EditorID); eerr == nil && ended {
			return err
		}
		return tasks.ErrNotFound
	case rerr != nil:
		return err
	case row.Submitted:
		return errDoneByOther
	case row.Status == tasks.StatusCancelled && row.TaskFence == r.Fence-1:
		return errClaimCancelled
	}
	return err
}

// hedgedAway reports whether a takeover by a hedge ended the claim c: never,
// with no read, when no category hedges.
func (s *Store) hedgedAway(ctx context.Context, c claimRef) bool {
	if !s.hedging() {
		return false
	}
	var yes bool
	err := s.db.GetContext(ctx, &yes, hedgedAwaySQL, c.taskID, c.fence, c.holder)
	return err == nil && yes
}

// hedging reports whether some category's Workflow.Hedge is on.
func (s *Store) hedging() bool {
	for _, w := range s.cfg.Workflows {
		if w.Hedge.On() {
			return true
		}
	}
	return false
}
