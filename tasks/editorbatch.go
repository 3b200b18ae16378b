package tasks

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Editors claim in batches too: when thousands of long-polling editors are woken
// together, their claims of pending tasks go to MySQL as ClaimEditorBatch, a few
// multi-row statements for the whole batch instead of Claim's five statements per
// editor. Every editor keeps the promises Claim keeps for one: the claims are
// serialized on each editor's row (locked, all of the batch's in id order, before
// anything is checked), and, under those locks, a member claims only if its editor is
// enabled, no task names it, it did not skip the task, the task's category is not
// paused and the row still has the fence and status its caller saw. A member the
// store refuses changes nothing and refuses nothing else.

// editorBatchLockSQL locks the rows of the batch's editors (a primary-key range
// read of the listed ids, in id order), as a round of cycles does (see Cycles); it also
// fixes the batch's instant. The checks that read under these locks come in the next
// statement, whose reads begin after the locks were granted (READ COMMITTED: each
// statement reads what committed before it began).
const editorBatchLockSQL = `SET @taskd_now = NOW(3), @taskd_locked = (SELECT COUNT(*) FROM editors FORCE INDEX (PRIMARY) WHERE id IN (%s) FOR UPDATE);
`

// editorBatchCheckSQL reads, under the editors' locks, the editors of the batch
// that may claim (enabled, and no task names them: a cycle's busy check) and the
// members' tasks their editors skipped (skippedSQL's check, read on its own, not in
// a locking statement), each as a comma-separated list. group_concat_max_len is
// raised for the session first, so that no list is cut short.
const editorBatchCheckSQL = `SET SESSION group_concat_max_len = 1048576;
SET @taskd_free = (SELECT GROUP_CONCAT(e.id) FROM editors e FORCE INDEX (PRIMARY) WHERE e.id IN (%s) AND e.disabled_at IS NULL
		AND NOT EXISTS (SELECT 1 FROM tasks t FORCE INDEX (tasks_editor) WHERE t.editor_id = e.id)),
	@taskd_skips = (SELECT GROUP_CONCAT(task_id) FROM task_skips WHERE (task_id, editor_id) IN (%s) AND ` + "`until`" + ` > NOW(3));
`

// ClaimEditorBatch claims pending tasks for many editors in one statement batch (one
// round trip, one commit): the editors' rows locked in one statement, their states and
// skips read in the next, one fenced UPDATE that moves every member still allowed to
// claim to assigned (bumping each row's fence, setting each its own holder, editor,
// trace context and a lease from the database clock), and their 'claimed' events as
// one INSERT. Each member is claimed or refused on its own, and the answer says
// which, in the order of ps.
//
// Every member must be an editor's claim (EditorID > 0) of a pending task (Status
// StatusPending) with the same Lease; no task and no editor may appear twice. A
// member's Err is ErrStale when the task was claimed or changed since it was read
// (or is not pending or not due), ErrPaused when its category is paused, ErrSkipped
// when the editor skipped it, ErrEditorDisabled when the editor is disabled, and
// ErrEditorBusy when a task names the editor: a live claim, or one whose lease passed
// that Claim would free first (the caller then claims with Claim, which does).
// ClaimEditorBatch returns an error wrapping ErrInvalid, claiming nothing, for bad
// params, and the error of the batch when it failed as a whole (nothing was claimed
// then).
func (s *Store) ClaimEditorBatch(ctx context.Context, ps []ClaimParams) ([]ClaimResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	fail := func(err error) ([]ClaimResult, error) { return nil, fmt.Errorf("claim editor batch: %w", err) }
	query, args, err := s.claimEditorBatchSQL(ps)
	if err != nil {
		return fail(err)
	}
	type row struct {
		ThisBatch bool         `db:"this_batch"`
		Paused    bool         `db:"paused"`
		Free      bool         `db:"free"`
		Skipped   bool         `db:"skipped"`
		Disabled  sql.NullBool `db:"editor_disabled"`
		Task
	}
	byID := make(map[int64]row, len(ps))
	scan := scanByID(byID, func(r *row) int64 { return r.ID })
	if err := s.batch(ctx, query, args, scan); err != nil {
		return fail(lostRace(err))
	}
	out := make([]ClaimResult, len(ps))
	for i, p := range ps {
		r, ok := byID[p.TaskID]
		var why error
		switch {
		case ok && r.ThisBatch && r.Status == StatusAssigned && r.Fence == p.Fence+1 && r.Holder == p.Holder && r.EditorID == p.EditorID:
			out[i].Claim = claimOf(r.Task)
			continue
		case ok && !r.Disabled.Valid:
			why = fmt.Errorf("%w: editor %d does not exist", ErrInvalid, p.EditorID)
		case ok && r.Disabled.Bool:
			why = ErrEditorDisabled
		case ok && !r.Free:
			why = ErrEditorBusy
		case ok && r.Skipped:
			why = ErrSkipped
		case ok && r.Paused && r.Status == StatusPending && r.Fence == p.Fence:
			why = ErrPaused
		default:
			why = ErrStale
		}
		out[i].Err = fmt.Errorf("claim task %d: %w", p.TaskID, why)
	}
	return out, nil
}

// claimEditorBatchSQL checks the members of a ClaimEditorBatch and writes its
// statement batch.
func (s *Store) claimEditorBatchSQL(ps []ClaimParams) (string, []any, error) {
	if err := checkBatch(len(ps), func(i int) int64 { return ps[i].TaskID }); err != nil {
		return "", nil, err
	}
	lease, err := s.checkClaimParams(ps[0])
	if err != nil {
		return "", nil, err
	}
	n := len(ps)
	ids := make([]int64, n)
	fences := make([]int64, n)
	holders := make([]string, n)
	editors := make([]int64, n)
	traces := make([]any, n)
	seen := make(map[int64]bool, n)
	for i, p := range ps {
		if _, err := s.checkClaimParams(p); err != nil {
			return "", nil, fmt.Errorf("task %d: %w", p.TaskID, err)
		}
		switch {
		case p.EditorID <= 0:
			return "", nil, fmt.Errorf("%w: task %d: only editors claim in an editor batch", ErrInvalid, p.TaskID)
		case seen[p.EditorID]:
			return "", nil, fmt.Errorf("%w: editor %d appears twice", ErrInvalid, p.EditorID)
		case p.Status != StatusPending:
			return "", nil, fmt.Errorf("%w: task %d: the task must be pending, not %q", ErrInvalid, p.TaskID, p.Status)
		case p.Lease != ps[0].Lease:
			return "", nil, fmt.Errorf("%w: task %d: the members' leases differ", ErrInvalid, p.TaskID)
		}
		seen[p.EditorID] = true
		ids[i], fences[i], holders[i], editors[i] = p.TaskID, p.Fence, p.Holder, p.EditorID
		traces[i] = nullString(p.TraceContext)
	}
	idList := func(q *strings.Builder) []any {
		return listSQL(q, "?", ids, func(i int) []any { return []any{ids[i]} })
	}

	var q strings.Builder
	var args []any
	q.WriteString("START TRANSACTION;\n")
	// The editors' locks, in id order whatever the members' order.
	var el strings.Builder
	args = append(args, listSQL(&el, "?", editors, func(i int) []any { return []any{editors[i]} })...)
	fmt.Fprintf(&q, editorBatchLockSQL, el.String())

	var skips strings.Builder
	skipArgs := listSQL(&skips, "(?, ?)", ids, func(i int) []any { return []any{ids[i], editors[i]} })
	fmt.Fprintf(&q, editorBatchCheckSQL, el.String(), skips.String())
	args = append(args, listSQL(&strings.Builder{}, "?", editors, func(i int) []any { return []any{editors[i]} })...)
	args = append(args, skipArgs...)

	// The claims: claimUpdateSQL's conditions for each member, with its
	// editor's state and skip read from the lists above.
	q.WriteString("UPDATE tasks FORCE INDEX (PRIMARY) SET status = 'assigned', fence = fence + 1, holder = ")
	args = append(args, caseSQL(&q, ids, holders)...)
	q.WriteString(",\n\teditor_id = ")
	args = append(args, caseSQL(&q, ids, editors)...)
	q.WriteString(",\n\tassigned_at = @taskd_now, lease_expires_at = @taskd_now + INTERVAL ? MICROSECOND,\n\tattempts = attempts + 1, trace_context = ")
	args = append(args, micros(lease))
	args = append(args, caseSQL(&q, ids, traces)...)
	q.WriteString("\nWHERE id IN (")
	args = append(args, idList(&q)...)
	q.WriteString(") AND (id, fence) IN (")
	args = append(args, listSQL(&q, "(?, ?)", ids, func(i int) []any { return []any{ids[i], fences[i]} })...)
	q.WriteString(") AND status = 'pending' AND run_after <= @taskd_now\n\tAND FIND_IN_SET(")
	args = append(args, caseSQL(&q, ids, editors)...)
	q.WriteString(", COALESCE(@taskd_free, '')) AND NOT FIND_IN_SET(id, COALESCE(@taskd_skips, ''))" + notPausedSQL + ";\n")

	// The events of the claims the UPDATE made: the row shows the member's
	// holder, its fence bumped, assigned at this batch's instant.
	bumped := make([]int64, n)
	for i, f := range fences {
		bumped[i] = f + 1
	}
	q.WriteString("INSERT INTO task_events (task_id, kind, fence, holder, editor_id, `at`)\n\tSELECT id, 'claimed', fence, holder, editor_id, @taskd_now FROM tasks FORCE INDEX (PRIMARY)")
	args = append(args, membersSQL(&q, ids, bumped, holders)...)
	q.WriteString(" AND assigned_at = @taskd_now;\n")

	// The report: each member's row, and what the checks found for it.
	q.WriteString("SELECT assigned_at <=> @taskd_now AS this_batch,\n\tEXISTS (SELECT 1 FROM paused_categories p WHERE p.category = tasks.category) AS paused,\n\tFIND_IN_SET(")
	args = append(args, caseSQL(&q, ids, editors)...)
	q.WriteString(", COALESCE(@taskd_free, '')) > 0 AS free, FIND_IN_SET(id, COALESCE(@taskd_skips, '')) > 0 AS skipped,\n\t(SELECT e.disabled_at IS NOT NULL FROM editors e WHERE e.id = ")
	args = append(args, caseOfSQL(&q, "tasks.id", ids, editors)...)
	q.WriteString(") AS editor_disabled, " + taskColumns + " FROM tasks WHERE id IN (")
	args = append(args, idList(&q)...)
	q.WriteString(");\nCOMMIT")
	return q.String(), args, nil
}

// caseOfSQL is caseSQL on column col: "CASE col WHEN ? THEN ? ... END", for
// an expression inside a subquery, where a bare id would name the subquery's.
func caseOfSQL[T any](q *strings.Builder, col string, ids []int64, vals []T) []any {
	var c strings.Builder
	args := caseSQL(&c, ids, vals)
	q.WriteString("CASE " + col + strings.TrimPrefix(c.String(), "CASE id"))
	return args
}
