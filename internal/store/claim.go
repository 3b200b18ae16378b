package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// skippedSQL is true when the editor skipped the task and the skip has not passed. It
// is read on its own, never inside a locking statement: a locking read of task_skips
// would take gap locks there that a concurrent skip (Release) waits for.
const skippedSQL = `SELECT EXISTS (SELECT 1 FROM task_skips WHERE task_id = ? AND editor_id = ? AND ` + "`until`" + ` > NOW(3))`

// One task per editor. An editor's claims are serialized on the editor's row: every
// claim by an editor first locks that row (a primary-key record lock), then checks,
// under the lock, that no task names the editor, and only then sets tasks.editor_id
// (a cycle's claim: see Cycles; claimLocked: see lockEditor). Only claims set
// editor_id, so no second claim of the editor can slip in between the check and the
// commit. A unique key on tasks.editor_id would say the same declaratively, but its
// duplicate checks take next-key locks on neighbouring editors' entries, which made
// concurrent claims of different editors deadlock.
//
// A disabled editor gets no claim: the same lock reads editors.disabled_at, so the
// check costs no round trip, and DisableEditor, which sets it under the same lock,
// cannot pass a claim in flight.

const (
	// claimLockSQL reads and locks the row; db_now is the database clock the lease is
	// computed from, claimable whether the row may be claimed now. SKIP LOCKED: a row
	// another transaction is writing (a competing claim, a holder's write, a sweep's
	// batch) reads as no row at once instead of a lock wait, and the caller moves on to
	// its next candidate.
	claimLockSQL = `SELECT ` + taskColumns + `, NOW(3) AS db_now, claim_unlogged,
	COALESCE((status = 'pending' AND run_after <= NOW(3)) OR (status = 'assigned' AND lease_expires_at < NOW(3)` + goldTakeoverSQL + `), 0) AS claimable
FROM tasks WHERE id = ? FOR UPDATE SKIP LOCKED`

	// claimSQL is the conditional UPDATE that makes the claim. It repeats every
	// condition the locked read checked, so it is correct on its own, and checks
	// that the task's category is not paused. It keeps in run_after the moment
	// the task became claimable (see claimableSinceSQL), assigned first, from
	// the row as it was. Its claim writes its 'claimed' event (claim_unlogged 0).
	claimSQL = `UPDATE tasks SET run_after = IF(status = 'assigned', lease_expires_at, ` + claimableSinceSQL + `),
	status = 'assigned', fence = fence + 1, holder = ?, editor_id = ?,
	assigned_at = ?, lease_expires_at = ?, attempts = attempts + 1, reserved_for = NULL, reserved_until = NULL,
	trace_context = ?, updated_at = ?, claim_unlogged = 0
WHERE id = ? AND fence = ?
	AND ((status = 'pending' AND run_after <= NOW(3)) OR (status = 'assigned' AND lease_expires_at < NOW(3)` + goldTakeoverSQL + `))` + notPausedSQL
)

// Queue wait. The moment a pending task became claimable is its run_after: every
// write that makes a task pending sets it, to the later of the run_after it asks
// for and the moment it was made pending (insert: the insert's time or the
// run_after asked for; release, force release, recycle, a freed expired claim, a
// stage's submit, a send back: GREATEST(run_after, NOW(3)), pendingRunAfterSQL;
// requeue: NOW(3); a failed attempt's retry: the end of its backoff). The claim
// statements read the later of run_after and updated_at (the row's last write,
// which for a pending task is the write that made it pending), so that a task made
// pending before run_after was kept so counts from then too; for an assigned task
// whose lease passed, taken over, it is lease_expires_at. Every claim statement
// stores that moment in run_after, in the UPDATE that makes the claim and before it
// sets anything else: a claimed task's run_after says when the attempt became
// claimable, its assigned_at when it was claimed, both on the database clock, and
// the claim needs no statement of its own to report its queue wait
// (Claim.Task.RunAfter to Claim.AssignedAt). run_after of an assigned task is read by
// nothing else: a task made pending again without a new run_after keeps a past one
// and is claimable at once, as before.

// pendingRunAfterSQL is the run_after of a write that makes a task pending now.
const pendingRunAfterSQL = `GREATEST(run_after, NOW(3))`

// claimableSinceSQL is when a pending task became claimable, in a claim's UPDATE.
const claimableSinceSQL = `GREATEST(run_after, updated_at)`

// claimableSince is when t, read before its claim, became claimable: as
// claimSQL computes it.
func claimableSince(t tasks.Task) time.Time {
	if t.Status == tasks.StatusAssigned && t.LeaseExpiresAt != nil {
		return *t.LeaseExpiresAt
	}
	if t.UpdatedAt.After(t.RunAfter) {
		return t.UpdatedAt
	}
	return t.RunAfter
}

// Claim claims a task for a holder: one conditional UPDATE checks that the fence is
// still p.Fence and that the task is claimable now (pending with run_after passed, or
// assigned with its lease passed) and not skipped by the editor, moves it to assigned,
// bumps the fence and sets the lease from the database clock. In the same transaction
// it records a 'claimed' event and, when it took over a claim whose lease had passed,
// an 'expired' event for the old fence (after that claim's 'claimed' event, when it
// was made without one: see logClaimsSQL).
//
// Claim returns ErrStale if the task was claimed or changed since Candidates read it,
// if another transaction is writing its row right now, or if there is no such task;
// ErrPaused if its category is paused (see PauseCategory); ErrLimited if a limit
// in flight of its category or key has no room (see limits.go; a takeover of
// an expired claim needs none); ErrSkipped if the editor
// skipped it (it stays claimable for others); ErrEditorBusy if p.EditorID already
// holds a live claim; ErrEditorDisabled if the editor is disabled (checked under the
// lock of its row, whatever a caller's cache says); and ErrInvalid for bad params. If the
// editor's previous claim has expired but was not recycled yet, Claim recycles it
// first.
//
// Round trips: one for a pending task (p.Status StatusPending), sent with the
// concurrent writes of other claimants that arrive together, as one transaction
// (see Config.GroupCommit); a ctx that ends while it is in flight returns ctx's
// cause, and the claim may still have been made. Otherwise the skip
// check (editors only), BEGIN, locked SELECT, UPDATE, INSERT events, COMMIT.
func (s *Store) Claim(ctx context.Context, p tasks.ClaimParams) (*tasks.Claim, error) {
	lease, err := s.checkClaimParams(p)
	if err != nil {
		return nil, fmt.Errorf("claim task %d: %w", p.TaskID, err)
	}
	// A claim in a limited category (or one that may be: it names none)
	// takes the locking path, which keeps the limits (lockLimit); the
	// group's cycles refuse it.
	if p.Status == tasks.StatusPending && !s.limited(p) {
		c, err := s.claimPending(ctx, p, lease)
		// The editor has a task: the locking path finds out whether it is a live
		// claim or one whose lease passed, which it frees. Or the task has a
		// workflow the claim did not expect: the locking path reads its checks.
		if !errors.Is(err, errEditorHasTask) && !errors.Is(err, errWorkflowTask) {
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

// checkClaimParams returns the lease of p, or an error wrapping ErrInvalid that
// names what is wrong with p.
func (s *Store) checkClaimParams(p tasks.ClaimParams) (time.Duration, error) {
	lease, err := s.checkLease(p.Lease)
	if err != nil {
		return 0, err
	}
	if err := checkHolder(p.Holder); err != nil {
		return 0, err
	}
	if p.EditorID < 0 {
		return 0, fmt.Errorf("%w: editor id must not be negative", tasks.ErrInvalid)
	}
	if utf8.RuneCountInString(p.TraceContext) > maxTraceContextLen || !utf8.ValidString(p.TraceContext) {
		return 0, fmt.Errorf("%w: trace context must be at most %d characters of valid UTF-8", tasks.ErrInvalid, maxTraceContextLen)
	}
	return lease, nil
}

// errEditorHasTask is claimPending's answer when a task names the editor.
var errEditorHasTask = errors.New("the editor has a task")

// errWorkflowTask is claimPending's answer when the task has stages, a group or
// a reservation, and the claim did not say so (ClaimParams.Workflow).
var errWorkflowTask = errors.New("the task has a workflow")

// claimPending claims a pending task as a cycle of a group (see Cycles).
func (s *Store) claimPending(ctx context.Context, p tasks.ClaimParams, lease time.Duration) (*tasks.Claim, error) {
	c := &cycle{claim: &p, lease: lease}
	if err := s.groupedCycle(ctx, c); err != nil {
		return nil, err
	}
	return c.claimed.claim(c.foundClaimed)
}

// claimedRow is what a cycle's report says of its claim: Claimed is 1 when the
// claim was made; else the checks that refused it.
type claimedRow struct {
	Claimed  int64 `db:"claimed"`
	Skipped  bool  `db:"skipped"`
	Busy     bool  `db:"busy"`
	Disabled bool  `db:"disabled"`
	Paused   bool  `db:"paused"`
	Barred   bool  `db:"barred"`
	// BarredFor is what is left of a send-back hold that reserves the task
	// for another editor than the claimant's (tasks.BarredError.For).
	BarredFor time.Duration
	// Unchecked says an editor's claim that did not expect a workflow was
	// refused because the task has one.
	Unchecked bool
	tasks.Task
}

// claim is the claim the row shows, or why there is none. found says
// whether the SELECT found the task.
func (row *claimedRow) claim(found bool) (*tasks.Claim, error) {
	switch {
	case !found:
		return nil, tasks.ErrStale
	case row.Claimed > 0:
		return claimOf(row.Task), nil
	case row.Disabled:
		return nil, tasks.ErrEditorDisabled
	case row.Busy:
		return nil, errEditorHasTask
	case row.Skipped:
		return nil, tasks.ErrSkipped
	case row.Barred:
		return nil, &tasks.BarredError{For: row.BarredFor}
	case row.Unchecked:
		return nil, errWorkflowTask
	case row.Paused:
		return nil, tasks.ErrPaused
	default:
		return nil, tasks.ErrStale
	}
}

// heldFor is left, what is left of t's reservation on the database's clock, when
// it reserves t for another editor than editorID, or 0.
func heldFor(t *tasks.Task, editorID int64, left time.Duration) time.Duration {
	if t.ReservedFor == 0 || t.ReservedFor == editorID {
		return 0
	}
	return max(left, 0)
}

// claimLocked claims a task with a locking read and claimSQL in a transaction. An
// editor's row is locked first, then the task the editor still has, if any (freed when
// its lease has passed), then the task to claim: always in that order.
func (s *Store) claimLocked(ctx context.Context, p tasks.ClaimParams, lease time.Duration) (*tasks.Claim, error) {
	if p.EditorID != 0 {
		var skipped bool
		if err := s.db.GetContext(ctx, &skipped, skippedSQL, p.TaskID, p.EditorID); err != nil {
			return nil, err
		}
		if skipped {
			return nil, tasks.ErrSkipped
		}
	}
	var claimed tasks.Task
	var tookOver bool
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		if p.EditorID != 0 {
			ed, err := s.lockEditor(ctx, tx, p.EditorID)
			if errors.Is(err, tasks.ErrNotFound) {
				return fmt.Errorf("%w: editor %d does not exist", tasks.ErrInvalid, p.EditorID)
			}
			if err != nil {
				return err
			}
			if s.onGalera(ctx) {
				// See 0010_editor_claims.sql.
				if _, err := tx.ExecContext(ctx, countClaimSQL, p.EditorID); err != nil {
					return err
				}
			}
			if ed.Disabled {
				return tasks.ErrEditorDisabled
			}
			if ed.full() {
				// At capacity: a claim whose lease passed makes room.
				if ed.Expired == 0 {
					return tasks.ErrEditorBusy
				}
				if err := s.freeExpiredEditorClaim(ctx, tx, p.EditorID, ed.Expired); err != nil {
					return err
				}
			}
		}
		limit, limited, err := s.lockLimit(ctx, tx, p)
		if errors.Is(err, sql.ErrNoRows) {
			return tasks.ErrStale // no such task
		}
		if err != nil {
			return err
		}
		var row struct {
			tasks.Task
			DBNow     time.Time `db:"db_now"`
			Claimable bool      `db:"claimable"`
			Unlogged  bool      `db:"claim_unlogged"`
		}
		if err := tx.GetContext(ctx, &row, claimLockSQL, p.TaskID); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return tasks.ErrStale // locked by another transaction right now, or no such task
			}
			return err
		}
		if row.Fence != p.Fence || !row.Claimable {
			return tasks.ErrStale
		}
		if err := s.checkLimit(p, limited, row.Task); err != nil {
			return err
		}
		if p.EditorID != 0 && (row.Stages != nil || row.GroupID != 0 || row.ReservedFor != 0) {
			// Under the task's lock: the stage the checks read is the one
			// the claim takes. A task without stages, group or reservation
			// has none to check.
			var barred bool
			if err := tx.GetContext(ctx, &barred, barredSQL, append([]any{p.TaskID}, barredArgs(p.EditorID)...)...); err != nil {
				return err
			}
			if barred {
				var left time.Duration
				if row.ReservedUntil != nil {
					left = row.ReservedUntil.Sub(row.DBNow)
				}
				return &tasks.BarredError{For: heldFor(&row.Task, p.EditorID, left)}
			}
		}
		if limited && row.Status == tasks.StatusPending {
			// A takeover needs no room: its task is counted already.
			if err := limitRoom(ctx, tx, limit, row.Task); err != nil {
				return err
			}
		}
		// A claim taken over: its 'claimed' event first, if it has none.
		if err := logClaim(ctx, tx, row.Status == tasks.StatusAssigned && row.Unlogged, p.TaskID, row.Fence); err != nil {
			return err
		}
		now := row.DBNow
		expires := now.Add(lease)
		args := []any{p.Holder, nullID(p.EditorID), now, expires, nullString(p.TraceContext), now, p.TaskID, p.Fence}
		res, err := tx.ExecContext(ctx, claimSQL, args...)
		if err != nil {
			return err
		}
		if err := expectOne(res); err != nil {
			// The row is locked and was claimable: the category is paused,
			// unless the pause ended in between.
			var paused bool
			if perr := tx.GetContext(ctx, &paused, pausedCategorySQL, row.Category); perr == nil && paused {
				return tasks.ErrPaused
			}
			return err
		}

		var evs []event
		tookOver = row.Status == tasks.StatusAssigned
		if tookOver {
			evs = append(evs, event{
				taskID: p.TaskID, kind: tasks.EventExpired, fence: row.Fence,
				holder: row.Holder, editorID: row.EditorID, detail: "taken over by " + p.Holder,
				category: row.Category, cause: tasks.WebhookTakeover,
			})
		}
		evs = append(evs, event{
			taskID: p.TaskID, kind: tasks.EventClaimed, fence: row.Fence + 1,
			holder: p.Holder, editorID: p.EditorID,
		})
		if err := s.insertEvents(ctx, tx, evs...); err != nil {
			return err
		}

		claimed = row.Task
		claimed.RunAfter = claimableSince(row.Task)
		claimed.Status = tasks.StatusAssigned
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

// lockEditorTaskSQL locks the editor's row and, in the same round trip, reads the
// tasks that name the editor, one of them whose lease has passed, the editor's
// capacity and whether it is disabled. The subqueries read without locking and run
// for the locked row, so they see every claim of the editor that committed before:
// only claims set editor_id, and they hold this lock.
const lockEditorTaskSQL = `SELECT COALESCE((SELECT GROUP_CONCAT(t.id ORDER BY t.id) FROM tasks t FORCE INDEX (tasks_editor)
	WHERE t.editor_id = e.id), '') AS held,
	COALESCE((SELECT t.id FROM tasks t FORCE INDEX (tasks_editor) WHERE t.editor_id = e.id AND t.lease_expires_at < NOW(3) LIMIT 1), 0) AS expired,
	e.capacity, e.disabled_at IS NOT NULL AS disabled
FROM editors e WHERE e.id = ? FOR UPDATE`

// lockEditorHedgingSQL is lockEditorTaskSQL for a store where some category
// hedges: it counts the editor's live hedges too, which take a slot of its
// capacity (see hedge.go). A hedge is taken under the same lock, so the count
// sees every one committed before.
const lockEditorHedgingSQL = `SELECT COALESCE((SELECT GROUP_CONCAT(t.id ORDER BY t.id) FROM tasks t FORCE INDEX (tasks_editor)
	WHERE t.editor_id = e.id), '') AS held,
	COALESCE((SELECT t.id FROM tasks t FORCE INDEX (tasks_editor) WHERE t.editor_id = e.id AND t.lease_expires_at < NOW(3) LIMIT 1), 0) AS expired,
	(SELECT COUNT(*) FROM ` + hedgesOfSQL + ` WHERE h.editor_id = e.id AND ` + hedgeLiveSQL + `) AS hedges,
	e.capacity, e.disabled_at IS NOT NULL AS disabled
FROM editors e WHERE e.id = ? FOR UPDATE`

// lockedEditor is what lockEditor read under the lock of an editor's row.
type lockedEditor struct {
	// Held are the ids of the tasks that name the editor, lowest first:
	// Capacity at most, but for claims whose lease has passed, Expired one of
	// those (0 if none).
	Held     ids   `db:"held"`
	Expired  int64 `db:"expired"`
	Capacity int   `db:"capacity"`
	// Hedges is how many live hedges the editor holds: read only when
	// some category hedges, else 0.
	Hedges int `db:"hedges"`
	// Disabled says the editor is disabled.
	Disabled bool `db:"disabled"`
}

// full says whether the editor holds as many claims and live hedges as its
// capacity.
func (ed *lockedEditor) full() bool { return len(ed.Held)+ed.Hedges >= max(1, ed.Capacity) }

// ids is a list of ids a query reads comma-separated.
type ids []int64

// Scan implements sql.Scanner.
func (l *ids) Scan(src any) error {
	var text string
	switch v := src.(type) {
	case string:
		text = v
	case []byte:
		text = string(v)
	case nil:
	default:
		return fmt.Errorf("ids: cannot scan %T", src)
	}
	*l = (*l)[:0]
	for item := range strings.SplitSeq(text, ",") {
		if item == "" {
			continue
		}
		id, err := strconv.ParseInt(item, 10, 64)
		if err != nil {
			return fmt.Errorf("ids: %w", err)
		}
		*l = append(*l, id)
	}
	return nil
}

// lockEditor locks the editor's row, which serializes the editor's claims and every
// change of its state, and returns the tasks that name the editor, its capacity and
// whether it is disabled, and its live hedges when some category hedges. It returns
// ErrNotFound if there is no such editor.
func (s *Store) lockEditor(ctx context.Context, tx *sqlx.Tx, editorID int64) (lockedEditor, error) {
	var ed lockedEditor
	query := lockEditorTaskSQL
	if s.hedging() {
		query = lockEditorHedgingSQL
	}
	if err := tx.GetContext(ctx, &ed, query, editorID); err != nil {
		return ed, notFound(err)
	}
	return ed, nil
}

const (
	// editorTaskLockSQL locks the task lockEditor found by primary key, which also
	// sees a release, a submit or a recycle that committed in the meantime.
	editorTaskLockSQL = `SELECT fence, COALESCE(holder, '') AS holder, category, lease_expires_at < NOW(3) AS expired,
	` + goldCopyColumnSQL + `
FROM tasks WHERE id = ? AND editor_id = ? FOR UPDATE`
	editorClaimFreeSQL = `UPDATE tasks SET run_after = ` + pendingRunAfterSQL + `, status = 'pending', holder = NULL, editor_id = NULL,
	assigned_at = NULL, lease_expires_at = NULL
WHERE id = ? AND fence = ? AND status = 'assigned' AND lease_expires_at < NOW(3)`
)

// freeExpiredEditorClaim returns task id, which names the editor, to the pool if its
// lease has passed, and returns ErrEditorBusy if it is live. The caller holds the
// editor's row.
func (s *Store) freeExpiredEditorClaim(ctx context.Context, tx *sqlx.Tx, editorID, id int64) error {
	var held struct {
		Fence    int64  `db:"fence"`
		Holder   string `db:"holder"`
		Category string `db:"category"`
		Expired  bool   `db:"expired"`
		GoldCopy bool   `db:"gold_copy"`
	}
	if err := tx.GetContext(ctx, &held, editorTaskLockSQL, id, editorID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil // released, submitted or recycled in the meantime
		}
		return err
	}
	if !held.Expired {
		return tasks.ErrEditorBusy
	}
	res, err := tx.ExecContext(ctx, editorClaimFreeSQL, id, held.Fence)
	if err != nil {
		return err
	}
	if err := expectOne(res); err != nil {
		return err
	}
	return s.insertEvents(ctx, tx, event{
		taskID: id, kind: tasks.EventRecycled, fence: held.Fence, holder: held.Holder,
		editorID: editorID, detail: "lease expired; freed for the editor's next claim",
		category: held.Category, cause: tasks.WebhookReclaim, goldCopy: held.GoldCopy,
	})
}

const heldByEditorSQL = `SELECT ` + taskColumns + ` FROM tasks FORCE INDEX (tasks_editor)
WHERE editor_id = ? AND status = 'assigned' AND lease_expires_at >= NOW(3) ORDER BY assigned_at, id LIMIT 1`

// HeldByEditor returns the live claim the editor holds, the oldest of them for an
// editor that may hold several, or ErrNotFound. A claim is live while the task is
// assigned and its lease has not passed.
func (s *Store) HeldByEditor(ctx context.Context, editorID int64) (*tasks.Claim, error) {
	var t tasks.Task
	if err := s.db.GetContext(ctx, &t, heldByEditorSQL, editorID); err != nil {
		return nil, fmt.Errorf("held by editor %d: %w", editorID, notFound(err))
	}
	return claimOf(t), nil
}

// editorClaimsSQL reads an editor's live claims and the tasks sent back to it that
// are reserved for it now: two ranges, of tasks_editor and of tasks_reserved,
// streamed (no ORDER BY over the UNION, which would need a temporary table: the
// few rows are put in order by EditorClaims).
const editorClaimsSQL = `SELECT 0 AS reserved, ` + taskColumns + ` FROM tasks FORCE INDEX (tasks_editor)
	WHERE editor_id = ? AND status = 'assigned' AND lease_expires_at >= NOW(3)
UNION ALL
SELECT 1 AS reserved, ` + taskColumns + ` FROM tasks FORCE INDEX (tasks_reserved)
	WHERE reserved_for = ? AND status = 'pending' AND reserved_until > NOW(3) AND run_after <= NOW(3)`

// EditorClaims returns the editor's live claims, oldest first, and the tasks sent
// back to it that are reserved for it now, in one query.
func (s *Store) EditorClaims(ctx context.Context, editorID int64) (*tasks.EditorClaims, error) {
	var rows []struct {
		Reserved bool `db:"reserved"`
		tasks.Task
	}
	if err := s.db.SelectContext(ctx, &rows, editorClaimsSQL, editorID, editorID); err != nil {
		return nil, fmt.Errorf("claims of editor %d: %w", editorID, err)
	}
	out := &tasks.EditorClaims{}
	for _, r := range rows {
		if r.Reserved {
			out.Reserved = append(out.Reserved, tasks.Candidate{
				ID: r.ID, Fence: r.Fence, Priority: r.Priority, Status: r.Status, Due: dueOf(r.DueAt), Category: r.Category,
				Workflow: true,
			})
			continue
		}
		out.Held = append(out.Held, claimOf(r.Task))
	}
	slices.SortFunc(out.Held, func(a, b *tasks.Claim) int {
		return cmp.Or(a.AssignedAt.Compare(b.AssignedAt), cmp.Compare(a.Task.ID, b.Task.ID))
	})
	slices.SortFunc(out.Reserved, func(a, b tasks.Candidate) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// dueOf is the Candidate.Due of a task's due_at.
func dueOf(due *time.Time) time.Time {
	if due == nil {
		return tasks.NoDue
	}
	return *due
}

// claimHolderSQL reads the holder of a claim from the one record that accounts
// for it (see logClaimsSQL): its 'claimed' event, or its result row, or, while
// it is live and was made without an event, the task's row.
const claimHolderSQL = `(SELECT holder FROM task_events
	WHERE task_id = ? AND kind = 'claimed' AND fence = ? ORDER BY id LIMIT 1)
UNION ALL
(SELECT holder FROM task_results FORCE INDEX (PRIMARY) WHERE task_id = ? AND fence = ? AND claimed_at IS NOT NULL)
UNION ALL
(SELECT holder FROM tasks FORCE INDEX (PRIMARY) WHERE id = ? AND fence = ? AND claim_unlogged = 1)
LIMIT 1`

// ClaimHolder returns the holder of the claim of task taskID with fence fence, from
// the audit trail (a 'claimed' event, or the result row or task row that stands for
// it: see TaskEvents): whoever the claim was made for, live or long over. It returns
// ErrNotFound if the task never had a claim with that fence.
func (s *Store) ClaimHolder(ctx context.Context, taskID, fence int64) (string, error) {
	var holder string
	if err := s.db.GetContext(ctx, &holder, claimHolderSQL, taskID, fence, taskID, fence, taskID, fence); err != nil {
		return "", fmt.Errorf("claim holder of task %d fence %d: %w", taskID, fence, notFound(err))
	}
	return holder, nil
}
