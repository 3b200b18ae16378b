package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// editorLoadsSQL reads the capacity of a page of editors and counts their live
// claims: editors by primary key, their claims by tasks_editor.
const editorLoadsSQL = `SELECT e.id, e.capacity, COUNT(t.id) AS holding
FROM editors e LEFT JOIN tasks t FORCE INDEX (tasks_editor)
	ON t.editor_id = e.id AND t.status = 'assigned' AND t.lease_expires_at >= NOW(3)
WHERE e.id IN (?) GROUP BY e.id, e.capacity`

// editorStageLimitsSQL reads the stage limits of a page of editors by primary key.
const editorStageLimitsSQL = `SELECT editor_id, category, stages FROM editor_categories
WHERE editor_id IN (?) AND stages IS NOT NULL ORDER BY editor_id, category`

// EditorLoads returns, by editor id, the capacity, the stage limits and the
// number of live claims of the editors ids that exist; those that do not are
// left out. Two queries: the editors with their claims counted, by primary key
// and tasks_editor, then their stage limits.
func (s *Store) EditorLoads(ctx context.Context, ids []int64) (map[int64]*tasks.EditorLoad, error) {
	out := make(map[int64]*tasks.EditorLoad, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var loads []struct {
		ID       int64 `db:"id"`
		Capacity int   `db:"capacity"`
		Holding  int   `db:"holding"`
	}
	q, args, err := sqlx.In(editorLoadsSQL, ids)
	if err == nil {
		err = s.db.SelectContext(ctx, &loads, q, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("editor loads: %w", err)
	}
	for _, l := range loads {
		out[l.ID] = &tasks.EditorLoad{Capacity: l.Capacity, Holding: l.Holding}
	}
	var limits []struct {
		EditorID int64        `db:"editor_id"`
		Category string       `db:"category"`
		Stages   tasks.Stages `db:"stages"`
	}
	q, args, err = sqlx.In(editorStageLimitsSQL, ids)
	if err == nil {
		err = s.db.SelectContext(ctx, &limits, q, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("editor loads: stage limits: %w", err)
	}
	for _, l := range limits {
		if e := out[l.EditorID]; e != nil {
			if e.Stages == nil {
				e.Stages = map[string][]string{}
			}
			e.Stages[l.Category] = l.Stages
		}
	}
	return out, nil
}
