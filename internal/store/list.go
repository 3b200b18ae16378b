package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskd/taskd/tasks"
)

// listCursor is what a cursor says: the sort key of the last task of a page, and
// the order it belongs to.
type listCursor struct {
	ByDone bool      `json:"d,omitempty"`
	Oldest bool      `json:"o,omitempty"`
	At     time.Time `json:"t"`
	ID     int64     `json:"i"`
}

func (c listCursor) encode() string {
	data, _ := json.Marshal(c) // a struct of plain fields: cannot fail
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeCursor(s string) (listCursor, error) {
	var c listCursor
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(data, &c) != nil || c.ID < 1 || c.At.IsZero() {
		return listCursor{}, fmt.Errorf("%w: cursor is not one this list returned", tasks.ErrInvalid)
	}
	return c, nil
}

// taskListColumns selects a Task without its payload.
const taskListColumns = `t.id, t.category, t.priority, t.title, t.status, t.fence,
	COALESCE(t.holder, '') AS holder, COALESCE(t.editor_id, 0) AS editor_id,
	t.assigned_at, t.lease_expires_at, t.attempts, t.max_attempts, t.run_after,
	COALESCE(t.last_error, '') AS last_error, COALESCE(t.trace_context, '') AS trace_context,
	t.created_at, t.updated_at, t.done_at, COALESCE(t.task_key, '') AS task_key, t.due_at`

// listHeldOutSQL leaves out of a list the pending tasks held out of the pool
// by gold tasks (see goldheld.go): a gold task that was pending when marked,
// and a copy whose claim ended unanswered and that the sweep has not cancelled
// yet. Nobody can claim them, so they are not pending work; GET /v1/tasks/{id}
// and the gold routes show them. A condition on the rows the list reads
// anyway: held-out entries are passed over, at most one per gold task and copy.
const listHeldOutSQL = `(t.status <> 'pending' OR t.run_after < ?)`

// listQuery is a built list query.
type listQuery struct {
	sql   string
	args  []any
	index string // the index the query reads (each branch, for a union)
}

// listIndex picks the index a list with these filters reads, in this order: the
// unique key (at most one task), the editor's task (at most one), the done time
// (with the status, or a branch per ended status), the holder, the assigned status
// (tasks_expiry: every claim, sorted), the category (with the status, or a branch per
// ended status), the status, the creation time. internal/store/EXPLAIN.md says which
// combinations cost a bounded read.
func listIndex(p tasks.ListParams) string {
	switch {
	case p.Key != "":
		return "tasks_key"
	case p.EditorID != 0:
		return "tasks_editor"
	case !p.DoneAfter.IsZero() || !p.DoneBefore.IsZero():
		return "tasks_done"
	case p.Holder != "":
		return "tasks_holder_created"
	case p.Status == tasks.StatusAssigned:
		return "tasks_expiry"
	case p.Category != "":
		return "tasks_category_created"
	case p.Status != "":
		return "tasks_ended_created"
	}
	return "tasks_created"
}

// endedKeys are the list keys that hold ended_status instead of status (schema.sql):
// a status condition on them is written on ended_status, so that the read is a range
// of the key.
var endedKeys = map[string]bool{"tasks_ended_created": true, "tasks_category_created": true, "tasks_done": true}

// endedBranches are the values of ended_status, "" for NULL (pending or assigned): a
// list by tasks_category_created or tasks_done without a status reads one branch per
// value.
var endedBranches = []tasks.Status{"", tasks.StatusDone, tasks.StatusDead, tasks.StatusCancelled}

// statusCond is the condition that keeps tasks in status st, on index: on a key of
// ended_status, the range of that status (an ended one), or the open range and the
// status in it (pending or assigned).
func statusCond(index string, st tasks.Status) (string, []any) {
	if !endedKeys[index] {
		return "t.status = ?", []any{string(st)}
	}
	if st == tasks.StatusPending || st == tasks.StatusAssigned {
		return "t.ended_status IS NULL AND t.status = ?", []any{string(st)}
	}
	return "t.ended_status = ?", []any{string(st)}
}

// buildListQuery builds the list query for validated params and a decoded cursor
// (nil for the first page). It reads limit+1 rows, to know whether a page follows.
func buildListQuery(p tasks.ListParams, cur *listCursor, limit int) listQuery {
	byDone := !p.DoneAfter.IsZero() || !p.DoneBefore.IsZero()
	col := "t.created_at"
	if byDone {
		col = "t.done_at"
	}
	dir, cmp := "DESC", "<"
	if p.Oldest {
		dir, cmp = "ASC", ">"
	}
	index := listIndex(p)

	// where returns the conditions and arguments of one branch, with status the
	// condition on the status ("" for none); open says the branch may hold
	// pending tasks, of which it leaves out those held out of the pool by gold
	// tasks (listHeldOutSQL).
	where := func(status string, statusArgs []any, open bool) (string, []any) {
		var conds []string
		var args []any
		add := func(cond string, a ...any) {
			conds = append(conds, cond)
			args = append(args, a...)
		}
		if p.Key != "" {
			add("t.task_key = ?", p.Key)
		}
		if p.EditorID != 0 {
			add("t.editor_id = ?", p.EditorID)
		}
		if p.Holder != "" {
			add("t.holder = ?", p.Holder)
		}
		if p.Category != "" {
			add("t.category = ?", p.Category)
		}
		if status != "" {
			add(status, statusArgs...)
		}
		if open {
			add(listHeldOutSQL, tasks.GoldRunAfter)
		}
		if !p.CreatedAfter.IsZero() {
			add("t.created_at >= ?", p.CreatedAfter)
		}
		if !p.CreatedBefore.IsZero() {
			add("t.created_at < ?", p.CreatedBefore)
		}
		if !p.DoneAfter.IsZero() {
			add("t.done_at >= ?", p.DoneAfter)
		}
		if !p.DoneBefore.IsZero() {
			add("t.done_at < ?", p.DoneBefore)
		}
		if byDone && p.DoneAfter.IsZero() {
			add("t.done_at IS NOT NULL")
		}
		if cur != nil {
			// Spelled out rather than as a row comparison, so that the range
			// optimizer turns it into index ranges: the read starts right after
			// the cursor instead of skipping the rows before it.
			add(fmt.Sprintf("(%s %s ? OR (%s = ? AND t.id %s ?))", col, cmp, col, cmp), cur.At, cur.At, cur.ID)
		}
		if len(conds) == 0 {
			return "", nil
		}
		return "\n\tWHERE " + strings.Join(conds, " AND "), args
	}
	order := fmt.Sprintf("ORDER BY %s %s, t.id %s LIMIT ?", col, dir, dir)

	if (index == "tasks_category_created" || index == "tasks_done") && p.Status == "" {
		// One branch per value of ended_status, each read in index order and
		// stopped by its LIMIT; the outer ORDER BY merges at most
		// len(endedBranches) * (limit+1) rows. Pending and assigned tasks have
		// no done time: a list by done time reads no open branch.
		var q strings.Builder
		var args []any
		for _, st := range endedBranches {
			cond, condArgs := "t.ended_status IS NULL", []any(nil)
			if st != "" {
				cond, condArgs = "t.ended_status = ?", []any{string(st)}
			} else if byDone {
				continue
			}
			if q.Len() > 0 {
				q.WriteString("\nUNION ALL\n")
			}
			w, a := where(cond, condArgs, st == "")
			fmt.Fprintf(&q, "(SELECT %s FROM tasks t FORCE INDEX (%s)%s\n\t%s)", taskListColumns, index, w, order)
			args = append(append(args, a...), limit+1)
		}
		outer := strings.ReplaceAll(order, "t.", "")
		q.WriteString("\n" + outer)
		return listQuery{sql: q.String(), args: append(args, limit+1), index: index}
	}
	var cond string
	var condArgs []any
	if p.Status != "" {
		cond, condArgs = statusCond(index, p.Status)
	}
	w, args := where(cond, condArgs, !byDone && (p.Status == "" || p.Status == tasks.StatusPending))
	q := fmt.Sprintf("SELECT %s FROM tasks t FORCE INDEX (%s)%s\n%s", taskListColumns, index, w, order)
	return listQuery{sql: q, args: append(args, limit+1), index: index}
}

// checkList checks p and returns its page size and decoded cursor.
func checkList(p *tasks.ListParams) (int, *listCursor, error) {
	limit := p.Limit
	if limit == 0 {
		limit = tasks.ListLimitDefault
	}
	if limit < 1 || limit > tasks.ListLimitMax {
		return 0, nil, fmt.Errorf("%w: limit must be 1..%d, not %d", tasks.ErrInvalid, tasks.ListLimitMax, p.Limit)
	}
	if p.Status != "" && !slices.Contains(tasks.Statuses(), p.Status) {
		return 0, nil, fmt.Errorf("%w: status must be one of %s, not %q", tasks.ErrInvalid, statusList(), p.Status)
	}
	if p.Category != "" {
		if err := tasks.CheckCategory(p.Category); err != nil {
			return 0, nil, err
		}
	}
	if p.Holder != "" {
		if err := checkHolder(p.Holder); err != nil {
			return 0, nil, err
		}
	}
	if p.Key != "" {
		if err := tasks.CheckKey(p.Key); err != nil {
			return 0, nil, err
		}
	}
	if p.EditorID < 0 {
		return 0, nil, fmt.Errorf("%w: editor id must not be negative", tasks.ErrInvalid)
	}
	for _, tm := range []struct {
		name string
		t    *time.Time
	}{
		{"created_after", &p.CreatedAfter}, {"created_before", &p.CreatedBefore},
		{"done_after", &p.DoneAfter}, {"done_before", &p.DoneBefore},
	} {
		if err := tasks.CheckTime(tm.name, *tm.t); err != nil {
			return 0, nil, err
		}
		if v := taskTime(*tm.t); v != nil {
			*tm.t = v.(time.Time)
		}
	}
	if !p.CreatedAfter.IsZero() && !p.CreatedBefore.IsZero() && !p.CreatedAfter.Before(p.CreatedBefore) {
		return 0, nil, fmt.Errorf("%w: created_after must be before created_before", tasks.ErrInvalid)
	}
	if !p.DoneAfter.IsZero() && !p.DoneBefore.IsZero() && !p.DoneAfter.Before(p.DoneBefore) {
		return 0, nil, fmt.Errorf("%w: done_after must be before done_before", tasks.ErrInvalid)
	}
	if p.Cursor == "" {
		return limit, nil, nil
	}
	cur, err := decodeCursor(p.Cursor)
	if err != nil {
		return 0, nil, err
	}
	byDone := !p.DoneAfter.IsZero() || !p.DoneBefore.IsZero()
	if cur.ByDone != byDone || cur.Oldest != p.Oldest {
		return 0, nil, fmt.Errorf("%w: cursor belongs to a list in another order", tasks.ErrInvalid)
	}
	return limit, &cur, nil
}

func statusList() string {
	names := make([]string, len(tasks.Statuses()))
	for i, s := range tasks.Statuses() {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// ListTasks returns a page of tasks, without payloads, that pass every filter of p:
// the newest first by creation time (or by done time, with a done time filter), or
// the oldest first with p.Oldest; ties go by id. Pages follow each other by keyset
// (TaskPage.NextCursor): a task inserted or changed meanwhile does not shift the
// pages, and a deep page costs what the first one does.
//
// Each filter, and status with category, reads an index in the list's order and
// stops after Limit+1 rows: the cost does not grow with the pool. Two statuses
// cost the claims instead: a list of pending tasks also passes over the assigned
// ones between them, and a list of assigned tasks reads and sorts every assigned
// task (see internal/store/EXPLAIN.md, which also names the combinations that filter rows an
// index read, such as a holder with a status). ListTasks returns ErrInvalid for a
// bad filter, limit or cursor, or a cursor of a list in another order.
func (s *Store) ListTasks(ctx context.Context, p tasks.ListParams) (*tasks.TaskPage, error) {
	limit, cur, err := checkList(&p)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	q := buildListQuery(p, cur, limit)
	page := &tasks.TaskPage{Tasks: []tasks.Task{}}
	if err := s.db.SelectContext(ctx, &page.Tasks, q.sql, q.args...); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	if len(page.Tasks) > limit {
		page.Tasks = page.Tasks[:limit]
		last := page.Tasks[limit-1]
		next := listCursor{Oldest: p.Oldest, At: last.CreatedAt, ID: last.ID}
		if !p.DoneAfter.IsZero() || !p.DoneBefore.IsZero() {
			next.ByDone, next.At = true, *last.DoneAt // the query keeps done_at IS NOT NULL
		}
		page.NextCursor = next.encode()
	}
	return page, nil
}
