package tasks

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// UpdateEditorParams are the arguments of UpdateEditor. At least one of Name and
// Categories must be set.
type UpdateEditorParams struct {
	ID int64
	// Name, when not nil, is the new name: as CreateEditorParams.Name.
	Name *string
	// Categories, when not nil, replace the editor's categories: as
	// CreateEditorParams.Categories.
	Categories []string
}

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
func (s *Store) UpdateEditor(ctx context.Context, p UpdateEditorParams) (*Editor, error) {
	if p.Name == nil && p.Categories == nil {
		return nil, fmt.Errorf("update editor %d: %w: name or categories must be given", p.ID, ErrInvalid)
	}
	if p.Name != nil {
		if err := checkText("name", *p.Name, MaxEditorNameLen); err != nil {
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
	var ed *Editor
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
		return nil, fmt.Errorf("update editor %d: %w: name is taken", p.ID, ErrDuplicate)
	}
	if err != nil {
		return nil, fmt.Errorf("update editor %d: %w", p.ID, refusedValue(err))
	}
	return ed, nil
}
