package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Bulk limits.
const (
	// bulkBatch is how many tasks one transaction of a bulk operation changes: its
	// rows stay locked for one UPDATE and one INSERT of as many events.
	bulkBatch = 500
)

// statusChange is one of the operator's status changes.
type statusChange struct {
	op   string // for errors: "requeue", "cancel"
	from tasks.Status
	kind tasks.EventKind
	// set is the SET clause of the UPDATE.
	set string
	// keepHolder records the task's last holder in the event (the claim the
	// event's fence is about).
	keepHolder bool
	// endsClaim is set for a change of assigned tasks: it ends their claims as
	// Cancel does (the 'claimed' event of a claim made without one first, the
	// claim's editor in the event, the holder in the result).
	endsClaim bool
}

var (
	// requeue puts a dead task back in the pool as if it were new: no attempts
	// and no snoozes, claimable now, no holder. last_error stays, for the record.
	requeue = statusChange{
		op: "requeue", from: tasks.StatusDead, kind: tasks.EventRequeued, keepHolder: true,
		set: `status = 'pending', attempts = 0, snoozes = 0, run_after = NOW(3), holder = NULL, editor_id = NULL,
	assigned_at = NULL, lease_expires_at = NULL, done_at = NULL`,
	}
	// cancel ends a pending task for good; done_at records when (the bulk
	// cancel's change of pending tasks, as cancelPendingSQL).
	cancel = statusChange{
		op: "cancel", from: tasks.StatusPending, kind: tasks.EventCancelled,
		set: `status = 'cancelled', done_at = NOW(3)`,
	}
	// cancelRunning ends an assigned task and its claim for good, as
	// cancelAssignedSQL does (the bulk cancel's change of assigned tasks).
	cancelRunning = statusChange{
		op: "cancel", from: tasks.StatusAssigned, kind: tasks.EventCancelled, keepHolder: true, endsClaim: true,
		set: `status = 'cancelled', done_at = NOW(3), editor_id = NULL, lease_expires_at = NULL, claim_unlogged = 0`,
	}
)

const (
	// changeLockSQL locks the rows of a batch by primary key, in id order.
	changeLockSQL = `SELECT id, status, fence, COALESCE(holder, '') AS holder, COALESCE(editor_id, 0) AS editor_id,
	category, claim_unlogged
FROM tasks FORCE INDEX (PRIMARY) WHERE id IN (?) ORDER BY id FOR UPDATE`
	// changeSQL changes exactly the locked rows that are in the status wanted,
	// fenced on (id, fence) and the status.
	changeSQL = `UPDATE tasks FORCE INDEX (PRIMARY) SET %s
WHERE (id, fence) IN (%s) AND status = ?`
	// changeLogClaimsSQL writes the 'claimed' events of the locked claims a
	// change ends that were made without one (see logClaimsSQL).
	changeLogClaimsSQL = logClaimsSQL + "(id, fence) IN (%s)"
)

// lockedRow is a row changeLockSQL locked.
type lockedRow struct {
	ID       int64        `db:"id"`
	Status   tasks.Status `db:"status"`
	Fence    int64        `db:"fence"`
	Holder   string       `db:"holder"`
	EditorID int64        `db:"editor_id"`
	Category string       `db:"category"`
	Unlogged bool         `db:"claim_unlogged"`
}

// change locks the rows of ids (sorted, distinct, at most bulkBatch) and makes ch on
// those in ch.from, with one event each. It returns every locked row, whatever its
// status (tasks that do not exist are absent), and the rows it changed.
func (s *Store) change(ctx context.Context, ch statusChange, ids []int64, reason string) (locked []lockedRow, changed []tasks.Changed, err error) {
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		locked, changed = nil, nil // a deadlock victim runs again
		q, args, err := sqlx.In(changeLockSQL, ids)
		if err != nil {
			return err
		}
		if err := tx.SelectContext(ctx, &locked, q, args...); err != nil {
			return err
		}
		var pairs, unlogged []any
		var evs []event
		for _, r := range locked {
			if r.Status != ch.from {
				continue
			}
			pairs = append(pairs, r.ID, r.Fence)
			ev := event{taskID: r.ID, kind: ch.kind, fence: r.Fence, detail: reason}
			if ch.keepHolder {
				ev.holder = r.Holder
			}
			c := tasks.Changed{TaskID: r.ID, Category: r.Category, Fence: r.Fence}
			if ch.endsClaim {
				ev.editorID, c.Holder = r.EditorID, r.Holder
				if r.Unlogged {
					unlogged = append(unlogged, r.ID, r.Fence)
				}
			}
			evs = append(evs, ev)
			changed = append(changed, c)
		}
		if len(evs) == 0 {
			return nil
		}
		if len(unlogged) > 0 {
			q := fmt.Sprintf(changeLogClaimsSQL, pairList(len(unlogged)/2))
			if _, err := tx.ExecContext(ctx, q, unlogged...); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, fmt.Sprintf(changeSQL, ch.set, pairList(len(evs))), append(pairs, string(ch.from))...)
		if mysqlErrorIs(err, erDupEntry) {
			// A requeue takes the task's key again (tasks_key_held), which
			// another task has taken since its key was freed.
			return fmt.Errorf("%w: a task's key is held by another task: %w", tasks.ErrDuplicate, err)
		}
		if err != nil {
			return err
		}
		matched, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if matched != int64(len(evs)) {
			// The rows are locked: nothing else can have changed them.
			return fmt.Errorf("%s matched %d of %d locked rows", ch.op, matched, len(evs))
		}
		return s.insertEvents(ctx, tx, evs...)
	})
	return locked, changed, err
}

// pairList is n "(?, ?)" pairs, comma-separated.
func pairList(n int) string {
	return strings.TrimSuffix(strings.Repeat("(?, ?), ", n), ", ")
}

// Requeue puts a dead task back in the pool: pending, attempts and snoozes reset to 0,
// claimable now, holder cleared (last_error stays). It records a 'requeued' event with the fence
// and holder of the claim that died. One conditional UPDATE (WHERE status = 'dead' on
// the locked row) makes the change.
//
// It returns ErrNotFound for an unknown task and a *StatusError (ErrWrongStatus) for a
// task that is not dead, changing nothing; ErrDuplicate when the task's key was freed
// (tasks.KeyHold) and another task holds it now.
//
// Round trips: BEGIN, locked SELECT, UPDATE, INSERT event, COMMIT.
func (s *Store) Requeue(ctx context.Context, p tasks.ChangeParams) (*tasks.Changed, error) {
	return s.changeOne(ctx, requeue, p)
}

func (s *Store) changeOne(ctx context.Context, ch statusChange, p tasks.ChangeParams) (*tasks.Changed, error) {
	if p.TaskID < 1 {
		return nil, fmt.Errorf("%s task %d: %w: task id must be positive", ch.op, p.TaskID, tasks.ErrInvalid)
	}
	locked, changed, err := s.change(ctx, ch, []int64{p.TaskID}, p.Reason)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s task %d: %w", ch.op, p.TaskID, err)
	case len(locked) == 0:
		return nil, fmt.Errorf("%s task %d: %w", ch.op, p.TaskID, tasks.ErrNotFound)
	case len(changed) == 0:
		return nil, fmt.Errorf("%s task %d: %w", ch.op, p.TaskID, &tasks.StatusError{TaskID: p.TaskID, Status: locked[0].Status, Want: ch.from})
	}
	return &changed[0], nil
}

// RequeueMatching requeues (see Requeue) the dead tasks that p selects, up to
// p.Limit of them per call, highest priority then oldest first by category, in id
// order by IDs. It works in batches of 500, each one transaction that locks its rows
// by primary key, changes them with one conditional UPDATE and writes their events;
// batches committed before an error stay. Call it again while More is set.
//
// It returns ErrInvalid for a filter with neither Category nor IDs, a Status other
// than dead, or bad values.
func (s *Store) RequeueMatching(ctx context.Context, p tasks.BulkParams) (*tasks.BulkResult, error) {
	if p.Status != "" && p.Status != tasks.StatusDead {
		return nil, fmt.Errorf("requeue matching: %w: status must be dead, got %q", tasks.ErrInvalid, p.Status)
	}
	return s.changeMatching(ctx, requeue, p)
}

// CancelMatching cancels (as Cancel does) the tasks that p selects, pending and
// assigned, up to p.Limit of them per call: the pending ones first, in the order and
// batches RequeueMatching uses, then the assigned ones in id order (a task claimed
// meanwhile is found among those), each assigned task's claim ended as Cancel ends
// it, under its fence. The result's Running counts the assigned tasks it cancelled
// (in a dry run, those it matched) and Claims lists their claims, for their holders
// to be told. With p.Status pending or assigned, it cancels the tasks of that
// status only. Call it again while More is set.
//
// It returns ErrInvalid for a filter with neither Category nor IDs, a Status other
// than pending or assigned, or bad values.
func (s *Store) CancelMatching(ctx context.Context, p tasks.BulkParams) (*tasks.BulkResult, error) {
	ids, limit, err := checkBulk(p)
	if err == nil && p.Status != "" && p.Status != tasks.StatusPending && p.Status != tasks.StatusAssigned {
		err = fmt.Errorf("%w: status must be pending or assigned, got %q", tasks.ErrInvalid, p.Status)
	}
	if err != nil {
		return nil, fmt.Errorf("cancel matching: %w", err)
	}
	res := &tasks.BulkResult{ByCategory: make(map[string]int)}
	if p.Status != tasks.StatusAssigned {
		if err := s.changeMatchingInto(ctx, res, cancel, p, ids, limit); err != nil || res.More {
			return res, err
		}
	}
	if p.Status == tasks.StatusPending {
		return res, nil
	}
	return res, s.changeMatchingInto(ctx, res, cancelRunning, p, ids, limit)
}

// Bulk reads: the tasks of a status (pending, assigned or dead, the statuses a bulk
// change starts from) that match the filter, after a keyset cursor, in the order of
// the index they read. By category, the candidate index (pool_status, category,
// priority DESC, due_order, id) in index order, so the cost is the rows read, plus
// the rows created_before leaves out; for assigned tasks, the category's claims in
// tasks_expiry, sorted by id. By ids, primary-key lookups of the ids after the
// cursor. None locks: the batch's transaction locks and checks the rows again.
const (
	bulkByCategorySQL = `SELECT id, priority, due_order FROM tasks FORCE INDEX (tasks_candidate)
WHERE pool_status = ? AND category = ?%s%s
ORDER BY priority DESC, due_order, id LIMIT ?`
	bulkByCategoryAfterSQL = ` AND (priority < ? OR (priority = ? AND (due_order > ? OR (due_order = ? AND id > ?))))`
	bulkByIDsSQL           = `SELECT id, priority, due_order FROM tasks FORCE INDEX (PRIMARY)
WHERE id IN (?) AND id > ? AND status = ?%s%s
ORDER BY id LIMIT ?`
	// bulkRunningByCategorySQL reads the assigned tasks of a category, by
	// tasks_expiry: a read bounded by the category's claims, sorted by id.
	bulkRunningByCategorySQL = `SELECT id, priority, due_order FROM tasks FORCE INDEX (tasks_expiry)
WHERE status = ? AND category = ? AND id > ?%s
ORDER BY id LIMIT ?`
	bulkCategorySQL      = ` AND category = ?`
	bulkCreatedBeforeSQL = ` AND created_at < ?`
)

// bulkRow is a row a bulk read found; priority, due order and id are its
// cursor.
type bulkRow struct {
	ID       int64     `db:"id"`
	Priority int       `db:"priority"`
	DueOrder time.Time `db:"due_order"`
}

// bulkQuery builds the bulk read of the tasks in status that p selects (ids sorted
// and distinct), after the row after (nil: from the start), limit rows.
func bulkQuery(status tasks.Status, p tasks.BulkParams, ids []int64, after *bulkRow, limit int) (string, []any, error) {
	created, createdArg := "", []any(nil)
	if !p.CreatedBefore.IsZero() {
		// created_at has milliseconds: created_at < t when created_at < t rounded
		// up to the millisecond.
		t := p.CreatedBefore.UTC()
		if r := t.Truncate(time.Millisecond); !r.Equal(t) {
			t = r.Add(time.Millisecond)
		}
		created, createdArg = bulkCreatedBeforeSQL, []any{t}
	}
	if len(ids) == 0 && status == tasks.StatusAssigned {
		var afterID int64
		if after != nil {
			afterID = after.ID
		}
		args := append([]any{string(status), p.Category, afterID}, append(createdArg, limit)...)
		return fmt.Sprintf(bulkRunningByCategorySQL, created), args, nil
	}
	if len(ids) == 0 {
		cursor, args := "", []any{string(status), p.Category}
		if after != nil {
			cursor = bulkByCategoryAfterSQL
			args = append(args, after.Priority, after.Priority, after.DueOrder, after.DueOrder, after.ID)
		}
		args = append(append(args, createdArg...), limit)
		return fmt.Sprintf(bulkByCategorySQL, cursor, created), args, nil
	}
	var afterID int64
	if after != nil {
		afterID = after.ID
	}
	args := []any{ids, afterID, string(status)}
	cat := ""
	if p.Category != "" {
		cat = bulkCategorySQL
		args = append(args, p.Category)
	}
	args = append(append(args, createdArg...), limit)
	return sqlx.In(fmt.Sprintf(bulkByIDsSQL, cat, created), args...)
}

func (s *Store) changeMatching(ctx context.Context, ch statusChange, p tasks.BulkParams) (*tasks.BulkResult, error) {
	ids, limit, err := checkBulk(p)
	if err != nil {
		return nil, fmt.Errorf("%s matching: %w", ch.op, err)
	}
	res := &tasks.BulkResult{ByCategory: make(map[string]int)}
	return res, s.changeMatchingInto(ctx, res, ch, p, ids, limit)
}

// changeMatchingInto makes ch on the tasks p selects (ids: p's, sorted and
// distinct) while res.Matched is below limit, adding to res.
func (s *Store) changeMatchingInto(ctx context.Context, res *tasks.BulkResult, ch statusChange, p tasks.BulkParams, ids []int64, limit int) error {
	var after *bulkRow
	for res.Matched < limit {
		n := min(bulkBatch, limit-res.Matched)
		var rows []bulkRow
		q, args, err := bulkQuery(ch.from, p, ids, after, n)
		if err == nil {
			err = s.db.SelectContext(ctx, &rows, q, args...)
		}
		if err != nil {
			return fmt.Errorf("%s matching: %w", ch.op, err)
		}
		if len(rows) == 0 {
			return nil
		}
		after = &rows[len(rows)-1]
		if p.DryRun {
			for _, r := range rows {
				res.IDs = append(res.IDs, r.ID)
			}
			res.Matched += len(rows)
			if ch.endsClaim {
				res.Running += len(rows)
			}
			if len(rows) < n {
				return nil
			}
			continue
		}
		batch := make([]int64, len(rows))
		for i, r := range rows {
			batch[i] = r.ID
		}
		slices.Sort(batch)
		_, changed, err := s.change(ctx, ch, batch, p.Reason)
		if err != nil {
			return fmt.Errorf("%s matching: %w", ch.op, err)
		}
		res.Matched += len(rows)
		res.Changed += len(changed)
		for _, c := range changed {
			res.ByCategory[c.Category]++
		}
		if ch.endsClaim {
			res.Running += len(changed)
			res.Claims = append(res.Claims, changed...)
		}
		if len(rows) < n {
			return nil
		}
	}
	// At the limit: is there more?
	var rows []bulkRow
	q, args, err := bulkQuery(ch.from, p, ids, after, 1)
	if err == nil {
		err = s.db.SelectContext(ctx, &rows, q, args...)
	}
	if err != nil {
		return fmt.Errorf("%s matching: %w", ch.op, err)
	}
	res.More = len(rows) > 0
	return nil
}

// checkBulk validates p and returns its ids sorted and distinct, and its limit.
func checkBulk(p tasks.BulkParams) ([]int64, int, error) {
	if p.Category == "" && len(p.IDs) == 0 {
		return nil, 0, fmt.Errorf("%w: give a category or ids: an empty filter would select every task", tasks.ErrInvalid)
	}
	if p.Category != "" {
		if err := tasks.CheckCategory(p.Category); err != nil {
			return nil, 0, err
		}
	}
	if len(p.IDs) > tasks.BulkLimitMax {
		return nil, 0, fmt.Errorf("%w: at most %d ids, got %d", tasks.ErrInvalid, tasks.BulkLimitMax, len(p.IDs))
	}
	for _, id := range p.IDs {
		if id < 1 {
			return nil, 0, fmt.Errorf("%w: ids must be positive, got %d", tasks.ErrInvalid, id)
		}
	}
	if t := p.CreatedBefore; !t.IsZero() && (t.Before(minDatetime) || t.After(maxDatetime)) {
		return nil, 0, fmt.Errorf("%w: created_before must be between %s and %s", tasks.ErrInvalid,
			minDatetime.Format(time.DateOnly), maxDatetime.Format(time.DateOnly))
	}
	limit := p.Limit
	if limit == 0 {
		limit = tasks.BulkLimitDefault
	}
	if limit < 1 || limit > tasks.BulkLimitMax {
		return nil, 0, fmt.Errorf("%w: limit must be 1..%d, got %d", tasks.ErrInvalid, tasks.BulkLimitMax, p.Limit)
	}
	ids := slices.Compact(slices.Sorted(slices.Values(p.IDs)))
	return ids, limit, nil
}

// The range of a DATETIME(3) column.
var (
	minDatetime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDatetime = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
)
