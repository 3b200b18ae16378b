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

const (
	insertEditorSQL         = `INSERT INTO editors (name, token_hash, capacity) VALUES (?, ?, ?)`
	insertEditorCategorySQL = `INSERT INTO editor_categories (editor_id, category, stages) VALUES `
)

// CreateEditor creates an editor with its categories. It returns ErrInvalid for bad
// params (the message names the field) and ErrDuplicate if the name or token hash is
// taken.
func (s *Store) CreateEditor(ctx context.Context, p tasks.CreateEditorParams) (*tasks.Editor, error) {
	if err := tasks.CheckEditorName(p.Name); err != nil {
		return nil, fmt.Errorf("create editor: %w", err)
	}
	if p.TokenHash == [32]byte{} {
		return nil, fmt.Errorf("create editor: %w: token hash must be set", tasks.ErrInvalid)
	}
	cats, err := editorCategories(p.Categories)
	if err != nil {
		return nil, fmt.Errorf("create editor: %w", err)
	}
	if err := tasks.CheckEditorWorkflow(p.Capacity, cats, p.Stages); err != nil {
		return nil, fmt.Errorf("create editor: %w", err)
	}

	var id int64
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, insertEditorSQL, p.Name, p.TokenHash[:], max(1, p.Capacity))
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		return insertEditorCategories(ctx, tx, id, cats, p.Stages)
	})
	if mysqlErrorIs(err, erDupEntry) {
		return nil, fmt.Errorf("create editor: %w: name or token is taken", tasks.ErrDuplicate)
	}
	if err != nil {
		return nil, fmt.Errorf("create editor: %w", refusedValue(err))
	}
	return s.GetEditor(ctx, id)
}

// editorCategories validates an editor's categories, 1..MaxCategories of them, drops
// duplicates and sorts them.
func editorCategories(cats []string) ([]string, error) {
	out, err := normalizeCategories(cats)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: categories are required (at least one)", tasks.ErrInvalid)
	}
	return out, nil
}

// insertEditorCategories gives editor id the categories cats, limited to the
// stages of each in stages, in one INSERT.
func insertEditorCategories(ctx context.Context, tx *sqlx.Tx, id int64, cats []string, stages map[string][]string) error {
	var q strings.Builder
	q.WriteString(insertEditorCategorySQL)
	args := make([]any, 0, 3*len(cats))
	for i, c := range cats {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?)")
		var limit any
		if list, ok := stages[c]; ok {
			limit = tasks.Stages(list).String()
		}
		args = append(args, id, c, limit)
	}
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// normalizeCategories validates categories, drops duplicates and sorts them.
func normalizeCategories(cats []string) ([]string, error) {
	out := make([]string, 0, len(cats))
	for _, c := range cats {
		if err := tasks.CheckCategory(c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > tasks.MaxCategories {
		return nil, fmt.Errorf("%w: at most %d categories", tasks.ErrInvalid, tasks.MaxCategories)
	}
	return out, nil
}

// editorRow is one row of an editor joined with one of its categories.
type editorRow struct {
	ID         int64      `db:"id"`
	Name       string     `db:"name"`
	CreatedAt  time.Time  `db:"created_at"`
	DisabledAt *time.Time `db:"disabled_at"`
	Capacity   int        `db:"capacity"`
	Epoch      int64      `db:"session_epoch"`
	Category   *string    `db:"category"`
	Stages     *string    `db:"stages"`
}

const editorSelectSQL = `SELECT e.id, e.name, e.created_at, e.disabled_at, e.capacity, e.session_epoch, c.category, c.stages
FROM editors e LEFT JOIN editor_categories c ON c.editor_id = e.id `

// GetEditor returns the editor with its categories, enabled or not, or ErrNotFound.
func (s *Store) GetEditor(ctx context.Context, id int64) (*tasks.Editor, error) {
	e, err := s.editorWhere(ctx, `WHERE e.id = ? ORDER BY c.category`, id)
	if err != nil {
		return nil, fmt.Errorf("get editor %d: %w", id, err)
	}
	return e, nil
}

// EditorByTokenHash returns the editor whose token has the given hash, or ErrNotFound.
// A disabled editor is returned too: check Editor.Disabled.
func (s *Store) EditorByTokenHash(ctx context.Context, hash [32]byte) (*tasks.Editor, error) {
	e, err := s.editorWhere(ctx, `WHERE e.token_hash = ? ORDER BY c.category`, hash[:])
	if err != nil {
		return nil, fmt.Errorf("editor by token hash: %w", err)
	}
	return e, nil
}

// editorWhere reads one editor and its categories in one query.
func (s *Store) editorWhere(ctx context.Context, where string, arg any) (*tasks.Editor, error) {
	return editorWhere(ctx, s.db, where, arg)
}

// editorWhere reads one editor and its categories in one query on q, the store's
// handle or a transaction.
func editorWhere(ctx context.Context, q sqlx.QueryerContext, where string, arg any) (*tasks.Editor, error) {
	var rows []editorRow
	if err := sqlx.SelectContext(ctx, q, &rows, editorSelectSQL+where, arg); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, tasks.ErrNotFound
	}
	e := &tasks.Editor{ID: rows[0].ID, Name: rows[0].Name, CreatedAt: rows[0].CreatedAt, DisabledAt: rows[0].DisabledAt,
		Capacity: rows[0].Capacity, SessionEpoch: rows[0].Epoch, Categories: []string{}}
	for _, r := range rows {
		if r.Category != nil {
			e.Categories = append(e.Categories, *r.Category)
			if r.Stages != nil {
				if e.Stages == nil {
					e.Stages = map[string][]string{}
				}
				e.Stages[*r.Category] = strings.Split(*r.Stages, ",")
			}
		}
	}
	return e, nil
}
