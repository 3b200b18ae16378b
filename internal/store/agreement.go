package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/taskd/taskd/tasks"
)

// Agreement reads: the accepted results of the done tasks of a category's overlap
// groups, created in a window, one range of tasks_category_created (category,
// ended_status = 'done', created_at) read in index order, each task's result by
// primary key and its editor's name by primary key. The range holds the
// category's done tasks of the window, grouped or not: a read costs the tasks it
// passes, bounded by the window and the limit, never the pool.
const (
	agreementSQL = `SELECT t.group_id, t.id AS task_id, COALESCE(r.editor_id, 0) AS editor_id,
  COALESCE(e.name, '') AS editor_name, %s AS value
FROM tasks t FORCE INDEX (tasks_category_created)
JOIN task_results r FORCE INDEX (PRIMARY) ON r.task_id = t.id AND r.fence = t.fence
LEFT JOIN editors e ON e.id = r.editor_id
WHERE t.category = ? AND t.ended_status = 'done' AND t.created_at >= ? AND t.created_at < ?
  AND t.group_id IS NOT NULL
ORDER BY t.created_at, t.id
LIMIT ?`
	// agreementDecision is the decision compared; agreementField a scalar
	// field of the result (a JSON string unquoted, a number or a boolean as
	// written), NULL for an object, an array, a JSON null or no such field.
	agreementDecision = `r.decision`
	agreementField    = `(CASE WHEN JSON_TYPE(JSON_EXTRACT(r.result, ?)) IN ('OBJECT', 'ARRAY', 'NULL') THEN NULL
  ELSE JSON_UNQUOTE(JSON_EXTRACT(r.result, ?)) END)`
)

// agreementQuery is agreementSQL comparing field ("" the decision), with its
// arguments but the window's and the limit.
func agreementQuery(field string) (string, []any) {
	if field == "" {
		return fmt.Sprintf(agreementSQL, agreementDecision), nil
	}
	path := `$."` + field + `"` // CheckAgreementField: letters, digits, '_'
	return fmt.Sprintf(agreementSQL, agreementField), []any{path, path}
}

// Agreement returns the values agreement is measured over (see
// tasks.AgreementParams): for each done task of an overlap group of p.Category
// created in [p.Since, p.Until), its accepted result's decision, or the field
// the category's workflow names (tasks.Workflow.AgreementField), with the
// editor who submitted it. A result without a value (no decision, no such
// field) is left out, as is a worker's. Oldest task first, at most p.Limit
// rows read. Invalid params return an error wrapping tasks.ErrInvalid. One
// round trip.
func (s *Store) Agreement(ctx context.Context, p tasks.AgreementParams) (*tasks.AgreementValues, error) {
	limit := p.Limit
	switch {
	case limit == 0:
		limit = tasks.AgreementLimitDefault
	case limit < 0 || limit > tasks.AgreementLimitMax:
		return nil, fmt.Errorf("agreement: %w: limit must be 1..%d", tasks.ErrInvalid, tasks.AgreementLimitMax)
	}
	if err := tasks.CheckCategory(p.Category); err != nil {
		return nil, fmt.Errorf("agreement: %w", err)
	}
	if p.Since.IsZero() || p.Until.IsZero() || !p.Until.After(p.Since) {
		return nil, fmt.Errorf("agreement: %w: until must be after since", tasks.ErrInvalid)
	}
	wf := s.cfg.Workflows[p.Category]
	out := &tasks.AgreementValues{Field: wf.AgreementField, Interval: wf.AgreementInterval, Values: []tasks.AgreementValue{}}
	query, args := agreementQuery(wf.AgreementField)
	args = append(args, p.Category, p.Since.UTC(), p.Until.UTC(), limit+1)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("agreement of %s: %w", p.Category, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if n++; n > limit {
			out.Truncated = true
			break
		}
		var v tasks.AgreementValue
		var value sql.NullString
		if err := rows.Scan(&v.GroupID, &v.TaskID, &v.EditorID, &v.EditorName, &value); err != nil {
			return nil, fmt.Errorf("agreement of %s: %w", p.Category, err)
		}
		if !value.Valid || value.String == "" || v.EditorID == 0 {
			continue
		}
		v.Value = value.String
		out.Values = append(out.Values, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("agreement of %s: %w", p.Category, err)
	}
	return out, nil
}
