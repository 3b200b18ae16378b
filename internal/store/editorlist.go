package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/taskd/taskd/tasks"
)

// addCount counts n events of kind in c.
func addCount(c *tasks.EventCounts, kind tasks.EventKind, n int64) {
	switch kind {
	case tasks.EventClaimed:
		c.Claimed += n
	case tasks.EventSubmitted:
		c.Submitted += n
	case tasks.EventReleased:
		c.Released += n
	case tasks.EventSkipped:
		c.Skipped += n
	case tasks.EventExpired, tasks.EventRecycled:
		c.Expired += n
	}
}

// editorSummarySQL reads editors with their live claim, the oldest of them for an
// editor that holds several (its capacity is above one); the caller adds the WHERE
// clause. The join adds no rows: it takes the one task a subquery of tasks_editor
// names, by primary key.
const editorSummarySQL = `SELECT e.id, e.name, e.created_at, e.disabled_at,
	t.id AS claim_task_id, t.fence AS claim_fence, t.lease_expires_at AS claim_lease_expires_at,
	t.trace_context AS claim_trace_context
FROM editors e
LEFT JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = (SELECT h.id FROM tasks h FORCE INDEX (tasks_editor)
	WHERE h.editor_id = e.id AND h.status = 'assigned' AND h.lease_expires_at >= NOW(3)
	ORDER BY h.assigned_at, h.id LIMIT 1) `

// listEditorsSQL is a page of editors in id order, read by primary key.
const listEditorsSQL = editorSummarySQL + `WHERE e.id > ? ORDER BY e.id LIMIT ?`

// todayCountsSQL counts the events of today (from midnight UTC by the database's
// clock: UTC_DATE(), whatever the session's zone) of a page of editors, by kind: one
// range of task_events_editor per (editor, kind), holding exactly the rows counted,
// read from the index alone.
const todayCountsSQL = `SELECT editor_id, kind, COUNT(*) AS n FROM task_events FORCE INDEX (task_events_editor)
WHERE editor_id IN (?) AND kind IN ` + countedKinds + " AND `at` >= UTC_DATE()\n" + `GROUP BY editor_id, kind`

// takenOverTodaySQL counts, of a page of editors, today's 'released' events of
// claims a hedge took over (detail hedgeDetail): not the editor's releases, so
// EventCounts.Released leaves them out. The same ranges of task_events_editor,
// 'released' only, each row read by primary key for its detail; run only when
// a category hedges.
const takenOverTodaySQL = `SELECT editor_id, COUNT(*) AS n FROM task_events FORCE INDEX (task_events_editor)
WHERE editor_id IN (?) AND kind = 'released' AND ` + "`at` >= UTC_DATE()" + ` AND detail = '` + hedgeDetail + `'
GROUP BY editor_id`

// countedKinds are the kinds of event EventCounts counts, as an SQL list.
const countedKinds = `('claimed', 'submitted', 'released', 'skipped', 'expired', 'recycled')`

// editorSummaryRow is a row of editorSummarySQL.
type editorSummaryRow struct {
	ID             int64      `db:"id"`
	Name           string     `db:"name"`
	CreatedAt      time.Time  `db:"created_at"`
	DisabledAt     *time.Time `db:"disabled_at"`
	ClaimTaskID    *int64     `db:"claim_task_id"`
	ClaimFence     *int64     `db:"claim_fence"`
	ClaimExpiresAt *time.Time `db:"claim_lease_expires_at"`
	ClaimTrace     *string    `db:"claim_trace_context"`
}

func (r editorSummaryRow) summary() tasks.EditorSummary {
	s := tasks.EditorSummary{
		Editor: tasks.Editor{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt, DisabledAt: r.DisabledAt, Categories: []string{}},
	}
	if r.ClaimTaskID != nil && r.ClaimFence != nil && r.ClaimExpiresAt != nil {
		s.Claim = &tasks.EditorClaim{TaskID: *r.ClaimTaskID, Fence: *r.ClaimFence, LeaseExpiresAt: *r.ClaimExpiresAt}
		if r.ClaimTrace != nil {
			s.Claim.TraceContext = *r.ClaimTrace
		}
	}
	return s
}

// editorCategoriesSQL reads the categories of a page of editors by primary key.
const editorCategoriesSQL = `SELECT editor_id, category FROM editor_categories WHERE editor_id IN (?) ORDER BY editor_id, category`

// ListEditors lists editors in id order, a page at a time, each with its categories,
// its live claim and its counts of today (see EditorSummary). Pass NextAfterID as the
// next AfterID to continue.
//
// Three queries, not one snapshot: the editors with their claims, read by primary
// key; their counts of today, one range of task_events_editor per editor and kind
// (never a scan of the audit trail, nor of an editor's history); their categories.
// It returns ErrInvalid for a bad limit.
func (s *Store) ListEditors(ctx context.Context, p tasks.ListEditorsParams) (*tasks.EditorPage, error) {
	limit := p.Limit
	if limit == 0 {
		limit = tasks.ListEditorsLimitDefault
	}
	if limit < 1 || limit > tasks.ListEditorsLimitMax {
		return nil, fmt.Errorf("list editors: %w: limit must be 1..%d", tasks.ErrInvalid, tasks.ListEditorsLimitMax)
	}
	if p.AfterID < 0 {
		return nil, fmt.Errorf("list editors: %w: after id must not be negative", tasks.ErrInvalid)
	}
	var rows []editorSummaryRow
	// One more than the page, to know whether another page follows.
	if err := s.db.SelectContext(ctx, &rows, listEditorsSQL, p.AfterID, limit+1); err != nil {
		return nil, fmt.Errorf("list editors: %w", err)
	}
	page := &tasks.EditorPage{Editors: make([]tasks.EditorSummary, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		page.NextAfterID = rows[limit-1].ID
	}
	for _, r := range rows {
		page.Editors = append(page.Editors, r.summary())
	}
	if err := s.fill(ctx, page.Editors); err != nil {
		return nil, fmt.Errorf("list editors: %w", err)
	}
	return page, nil
}

// fill reads the categories and the counts of today of eds, which are in id order.
func (s *Store) fill(ctx context.Context, eds []tasks.EditorSummary) error {
	if len(eds) == 0 {
		return nil
	}
	ids := make([]int64, len(eds))
	for i, e := range eds {
		ids[i] = e.ID
	}
	find := func(id int64) *tasks.EditorSummary {
		i, found := slices.BinarySearchFunc(eds, id, func(e tasks.EditorSummary, id int64) int { return cmp.Compare(e.ID, id) })
		if !found {
			return nil
		}
		return &eds[i]
	}
	var cats []struct {
		EditorID int64  `db:"editor_id"`
		Category string `db:"category"`
	}
	q, args, err := sqlx.In(editorCategoriesSQL, ids)
	if err == nil {
		err = s.db.SelectContext(ctx, &cats, q, args...)
	}
	if err != nil {
		return err
	}
	for _, r := range cats {
		if e := find(r.EditorID); e != nil {
			e.Categories = append(e.Categories, r.Category)
		}
	}
	var counts []struct {
		EditorID int64           `db:"editor_id"`
		Kind     tasks.EventKind `db:"kind"`
		N        int64           `db:"n"`
	}
	q, args, err = sqlx.In(todayCountsSQL, ids)
	if err == nil {
		err = s.db.SelectContext(ctx, &counts, q, args...)
	}
	if err != nil {
		return err
	}
	for _, r := range counts {
		if e := find(r.EditorID); e != nil {
			addCount(&e.Today, r.Kind, r.N)
		}
	}
	if !s.hedging() {
		return nil
	}
	var taken []struct {
		EditorID int64 `db:"editor_id"`
		N        int64 `db:"n"`
	}
	q, args, err = sqlx.In(takenOverTodaySQL, ids)
	if err == nil {
		err = s.db.SelectContext(ctx, &taken, q, args...)
	}
	if err != nil {
		return err
	}
	for _, r := range taken {
		if e := find(r.EditorID); e != nil {
			e.Today.Released = max(e.Today.Released-r.N, 0)
		}
	}
	return nil
}

// GetEditorSummary returns the editor with its categories, its live claim and its
// counts of today, as ListEditors lists it, or ErrNotFound.
func (s *Store) GetEditorSummary(ctx context.Context, id int64) (*tasks.EditorSummary, error) {
	var rows []editorSummaryRow
	if err := s.db.SelectContext(ctx, &rows, editorSummarySQL+`WHERE e.id = ?`, id); err != nil {
		return nil, fmt.Errorf("get editor summary %d: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("get editor summary %d: %w", id, tasks.ErrNotFound)
	}
	eds := []tasks.EditorSummary{rows[0].summary()}
	if err := s.fill(ctx, eds); err != nil {
		return nil, fmt.Errorf("get editor summary %d: %w", id, err)
	}
	return &eds[0], nil
}
