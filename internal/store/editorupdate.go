package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

const (
	lockEditorRowSQL          = `SELECT id FROM editors WHERE id = ? FOR UPDATE`
	updateEditorNameSQL       = `UPDATE editors SET name = ? WHERE id = ?`
	deleteEditorCategoriesSQL = `DELETE FROM editor_categories WHERE editor_id = ?`
)

// UpdateEditor changes an editor's name, its categories, or both, in one transaction
// that locks the editor's row first, as a claim does. New categories replace the old
// ones whole; a live claim is kept. It returns the editor as changed; ErrNotFound for
// an unknown editor; ErrInvalid for bad params (the message names the field), and
// ErrDuplicate if the name is taken. Nothing is changed on error.
func (s *Store) UpdateEditor(ctx context.Context, p tasks.UpdateEditorParams) (*tasks.Editor, error) {
	if p.Name == nil && p.Categories == nil {
		return nil, fmt.Errorf("update editor %d: %w: name or categories must be given", p.ID, tasks.ErrInvalid)
	}
	if p.Name != nil {
		if err := tasks.CheckEditorName(*p.Name); err != nil {
			return nil, fmt.Errorf("update editor %d: %w", p.ID, err)
		}
	}
	var cats []string
	if p.Categories != nil {
		var err error
		if cats, err = editorCategories(p.Categories); err != nil {
			return nil, fmt.Errorf("update editor %d: %w", p.ID, err)
		}
	}
	var ed *tasks.Editor
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var id int64
		if err := tx.GetContext(ctx, &id, lockEditorRowSQL, p.ID); err != nil {
			return notFound(err)
		}
		if p.Name != nil {
			if _, err := tx.ExecContext(ctx, updateEditorNameSQL, *p.Name, p.ID); err != nil {
				return err
			}
		}
		if cats != nil {
			if _, err := tx.ExecContext(ctx, deleteEditorCategoriesSQL, p.ID); err != nil {
				return err
			}
			if err := insertEditorCategories(ctx, tx, p.ID, cats); err != nil {
				return err
			}
		}
		var err error
		ed, err = editorWhere(ctx, tx, `WHERE e.id = ? ORDER BY c.category`, p.ID)
		return err
	})
	if mysqlErrorIs(err, erDupEntry) {
		return nil, fmt.Errorf("update editor %d: %w: name is taken", p.ID, tasks.ErrDuplicate)
	}
	if err != nil {
		return nil, fmt.Errorf("update editor %d: %w", p.ID, refusedValue(err))
	}
	return ed, nil
}
