package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/textrule"
	"github.com/taskd/taskd/tasks"
)

const (
	insertEditorSQL         = `INSERT INTO editors (name, name_skeleton, token_hash, capacity) VALUES (?, ?, ?, ?)`
	insertEditorCategorySQL = `INSERT INTO editor_categories (editor_id, category, stages) VALUES `
	// editorBySkeletonSQL finds the editor whose name looks like a name
	// refused as a duplicate (editors_name_skeleton).
	editorBySkeletonSQL = `SELECT id, name FROM editors WHERE name_skeleton = ?`
)

// CreateEditor creates an editor with its categories. The name is kept in Unicode's
// NFC (see tasks.NormalizeEditorName) with its confusable skeleton, whose UNIQUE key
// refuses a name that looks like another editor's, however close in time the two
// are created. It returns ErrInvalid for bad params (the message names the field)
// and ErrDuplicate if the name or token hash is taken, or the name looks like
// another editor's (the message names that editor). Nothing is changed on error.
func (s *Store) CreateEditor(ctx context.Context, p tasks.CreateEditorParams) (*tasks.Editor, error) {
	name, err := tasks.NormalizeEditorName(p.Name)
	if err != nil {
		return nil, fmt.Errorf("create editor: %w", err)
	}
	skeleton := textrule.Skeleton(name)
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
	if err := s.checkStageLimits(p.Stages); err != nil {
		return nil, fmt.Errorf("create editor: %w", err)
	}

	var id int64
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, insertEditorSQL, name, skeleton[:], p.TokenHash[:], max(1, p.Capacity))
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		return insertEditorCategories(ctx, tx, id, cats, p.Stages)
	})
	if mysqlErrorIs(err, erDupEntry) {
		return nil, fmt.Errorf("create editor: %w", s.nameTaken(ctx, err, name, skeleton, 0, "name or token is taken"))
	}
	if err != nil {
		return nil, fmt.Errorf("create editor: %w", refusedValue(err))
	}
	return s.GetEditor(ctx, id)
}

// nameTaken describes err, a duplicate entry refused by a write of the name
// name with the skeleton skeleton for editor self (0 for a new editor), as an
// error wrapping ErrDuplicate: when the skeleton's key refused it, the message
// names the editor whose name looks alike; otherwise it is taken.
func (s *Store) nameTaken(ctx context.Context, err error, name string, skeleton [32]byte, self int64, taken string) error {
	if !strings.Contains(err.Error(), "editors_name_skeleton") {
		return fmt.Errorf("%w: %s", tasks.ErrDuplicate, taken)
	}
	var other struct {
		ID   int64  `db:"id"`
		Name string `db:"name"`
	}
	if s.db.GetContext(ctx, &other, editorBySkeletonSQL, skeleton[:]) != nil || other.ID == self {
		return fmt.Errorf("%w: name %q looks like another editor's name", tasks.ErrDuplicate, name)
	}
	return fmt.Errorf("%w: name %q looks like the name of editor %d, %q", tasks.ErrDuplicate, name, other.ID, other.Name)
}

// checkStageLimits refuses stage limits for a category that has no stages in
// the store's workflows (Config.Workflows): they would limit the editor to
// nothing of it. The error wraps ErrInvalid and names the category.
func (s *Store) checkStageLimits(stages map[string][]string) error {
	for _, cat := range slices.Sorted(maps.Keys(stages)) {
		if len(s.cfg.Workflows[cat].Stages) == 0 {
			return fmt.Errorf("%w: stages: category %q has no stages (a category's stages are set in the config's categories)", tasks.ErrInvalid, cat)
		}
	}
	return nil
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
