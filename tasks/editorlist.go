package tasks

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Editor management: listing editors with what they do (here), their stats from the
// audit trail (editorstats.go), and changes to their name and categories
// (editorupdate.go), their state (editorstate.go) and their token (editortoken.go).

// Limits of editor listings.
const (
	// ListEditorsLimitDefault and ListEditorsLimitMax bound ListEditorsParams.Limit.
	ListEditorsLimitDefault = 50
	ListEditorsLimitMax     = 500
)

// EventCounts counts an editor's events of the audit trail by what they record.
type EventCounts struct {
	// Claimed counts claims the editor made ('claimed').
	Claimed int64
	// Submitted counts results of the editor that were accepted ('submitted').
	Submitted int64
	// Released counts claims the editor gave back, and claims of the editor an
	// operator released or that DisableEditor revoked ('released').
	Released int64
	// Skipped counts claims the editor skipped ('skipped').
	Skipped int64
	// Expired counts claims of the editor whose lease passed: taken over by another
	// claim ('expired') or returned to the pool by a sweep or by the editor's next
	// claim ('recycled').
	Expired int64
}

// add counts n events of kind.
func (c *EventCounts) add(kind EventKind, n int64) {
	switch kind {
	case EventClaimed:
		c.Claimed += n
	case EventSubmitted:
		c.Submitted += n
	case EventReleased:
		c.Released += n
	case EventSkipped:
		c.Skipped += n
	case EventExpired, EventRecycled:
		c.Expired += n
	}
}

// EditorClaim is an editor's live claim as a listing shows it.
type EditorClaim struct {
	TaskID         int64
	Fence          int64
	LeaseExpiresAt time.Time
}

// EditorSummary is an editor with its live claim, if any, and its counts of today.
type EditorSummary struct {
	Editor
	// Claim is the editor's live claim (assigned, lease not passed), or nil.
	Claim *EditorClaim
	// Today counts the editor's events since midnight UTC by the database clock.
	Today EventCounts
}

// ListEditorsParams are the arguments of ListEditors.
type ListEditorsParams struct {
	// AfterID continues a listing after the editor with this id (EditorPage.NextAfterID
	// of the page before); 0 starts at the beginning.
	AfterID int64
	// Limit is the page size: 1..ListEditorsLimitMax, 0 means ListEditorsLimitDefault.
	Limit int
}

// EditorPage is a page of a listing of editors.
type EditorPage struct {
	// Editors are in id order.
	Editors []EditorSummary
	// NextAfterID is the AfterID of the next page, or 0 when this page is the last.
	NextAfterID int64
}

// editorSummarySQL reads editors with their live claim; the caller adds the WHERE
// clause. At most one task names an editor (see claim.go), so the join adds no rows.
const editorSummarySQL = `SELECT e.id, e.name, e.created_at, e.disabled_at,
	t.id AS claim_task_id, t.fence AS claim_fence, t.lease_expires_at AS claim_lease_expires_at
FROM editors e
LEFT JOIN tasks t FORCE INDEX (tasks_editor)
	ON t.editor_id = e.id AND t.status = 'assigned' AND t.lease_expires_at >= NOW(3) `

// listEditorsSQL is a page of editors in id order, read by primary key.
const listEditorsSQL = editorSummarySQL + `WHERE e.id > ? ORDER BY e.id LIMIT ?`

// todayCountsSQL counts the events of today (from midnight UTC by the database's
// clock: UTC_DATE(), whatever the session's zone) of a page of editors, by kind: one
// range of task_events_editor per (editor, kind), holding exactly the rows counted,
// read from the index alone.
const todayCountsSQL = `SELECT editor_id, kind, COUNT(*) AS n FROM task_events FORCE INDEX (task_events_editor)
WHERE editor_id IN (%s) AND kind IN ` + countedKinds + " AND `at` >= UTC_DATE()\n" + `GROUP BY editor_id, kind`

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
}

func (r editorSummaryRow) summary() EditorSummary {
	s := EditorSummary{
		Editor: Editor{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt, DisabledAt: r.DisabledAt, Categories: []string{}},
	}
	if r.ClaimTaskID != nil && r.ClaimFence != nil && r.ClaimExpiresAt != nil {
		s.Claim = &EditorClaim{TaskID: *r.ClaimTaskID, Fence: *r.ClaimFence, LeaseExpiresAt: *r.ClaimExpiresAt}
	}
	return s
}

// editorCategoriesSQL reads the categories of a page of editors by primary key.
const editorCategoriesSQL = `SELECT editor_id, category FROM editor_categories WHERE editor_id IN (%s) ORDER BY editor_id, category`

// ListEditors lists editors in id order, a page at a time, each with its categories,
// its live claim and its counts of today (see EditorSummary). Pass NextAfterID as the
// next AfterID to continue.
//
// Three queries, not one snapshot: the editors with their claims, read by primary
// key; their counts of today, one range of task_events_editor per editor and kind
// (never a scan of the audit trail, nor of an editor's history); their categories.
// It returns ErrInvalid for a bad limit.
func (s *Store) ListEditors(ctx context.Context, p ListEditorsParams) (*EditorPage, error) {
	limit := p.Limit
	if limit == 0 {
		limit = ListEditorsLimitDefault
	}
	if limit < 1 || limit > ListEditorsLimitMax {
		return nil, fmt.Errorf("list editors: %w: limit must be 1..%d", ErrInvalid, ListEditorsLimitMax)
	}
	if p.AfterID < 0 {
		return nil, fmt.Errorf("list editors: %w: after id must not be negative", ErrInvalid)
	}
	var rows []editorSummaryRow
	// One more than the page, to know whether another page follows.
	if err := s.db.SelectContext(ctx, &rows, listEditorsSQL, p.AfterID, limit+1); err != nil {
		return nil, fmt.Errorf("list editors: %w", err)
	}
	page := &EditorPage{Editors: make([]EditorSummary, 0, min(len(rows), limit))}
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
func (s *Store) fill(ctx context.Context, eds []EditorSummary) error {
	if len(eds) == 0 {
		return nil
	}
	args := make([]any, len(eds))
	for i, e := range eds {
		args[i] = e.ID
	}
	in := strings.TrimSuffix(strings.Repeat("?, ", len(eds)), ", ")
	find := func(id int64) *EditorSummary {
		i, found := slices.BinarySearchFunc(eds, id, func(e EditorSummary, id int64) int { return cmp.Compare(e.ID, id) })
		if !found {
			return nil
		}
		return &eds[i]
	}
	var cats []struct {
		EditorID int64  `db:"editor_id"`
		Category string `db:"category"`
	}
	if err := s.db.SelectContext(ctx, &cats, fmt.Sprintf(editorCategoriesSQL, in), args...); err != nil {
		return err
	}
	for _, r := range cats {
		if e := find(r.EditorID); e != nil {
			e.Categories = append(e.Categories, r.Category)
		}
	}
	var counts []struct {
		EditorID int64     `db:"editor_id"`
		Kind     EventKind `db:"kind"`
		N        int64     `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &counts, fmt.Sprintf(todayCountsSQL, in), args...); err != nil {
		return err
	}
	for _, r := range counts {
		if e := find(r.EditorID); e != nil {
			e.Today.add(r.Kind, r.N)
		}
	}
	return nil
}

// GetEditorSummary returns the editor with its categories, its live claim and its
// counts of today, as ListEditors lists it, or ErrNotFound.
func (s *Store) GetEditorSummary(ctx context.Context, id int64) (*EditorSummary, error) {
	var rows []editorSummaryRow
	if err := s.db.SelectContext(ctx, &rows, editorSummarySQL+`WHERE e.id = ?`, id); err != nil {
		return nil, fmt.Errorf("get editor summary %d: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("get editor summary %d: %w", id, ErrNotFound)
	}
	eds := []EditorSummary{rows[0].summary()}
	if err := s.fill(ctx, eds); err != nil {
		return nil, fmt.Errorf("get editor summary %d: %w", id, err)
	}
	return &eds[0], nil
}
