package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/textrule"
	"github.com/taskd/taskd/tasks"
)

const (
	lockEditorRowSQL          = `SELECT id FROM editors WHERE id = ? FOR UPDATE`
	updateEditorNameSQL       = `UPDATE editors SET name = ?, name_skeleton = ? WHERE id = ?`
	updateEditorCapacitySQL   = `UPDATE editors SET capacity = ? WHERE id = ?`
	deleteEditorCategoriesSQL = `DELETE FROM editor_categories WHERE editor_id = ?`
)

// UpdateEditor changes an editor's name, categories, capacity or stage limits, in
// one transaction that locks the editor's row first, as a claim does. New categories
// replace the old ones whole, as new stage limits do; live claims are kept. It
// returns the editor as changed; ErrNotFound for an unknown editor; ErrInvalid for
// bad params (the message names the field), and ErrDuplicate if the name is taken
// or looks like another editor's (see CreateEditor). Nothing is changed on error.
func (s *Store) UpdateEditor(ctx context.Context, p tasks.UpdateEditorParams) (*tasks.Editor, error) {
	if p.Name == nil && p.Categories == nil && p.Capacity == nil && p.Stages == nil {
		return nil, fmt.Errorf("update editor %d: %w: name, categories, capacity or stages must be given", p.ID, tasks.ErrInvalid)
	}
	if p.Capacity != nil && (*p.Capacity < 1 || *p.Capacity > tasks.MaxCapacity) {
		return nil, fmt.Errorf("update editor %d: %w: capacity must be 1..%d, got %d", p.ID, tasks.ErrInvalid, tasks.MaxCapacity, *p.Capacity)
	}
	var name string
	var skeleton [32]byte
	if p.Name != nil {
		var err error
		if name, err = tasks.NormalizeEditorName(*p.Name); err != nil {
			return nil, fmt.Errorf("update editor %d: %w", p.ID, err)
		}
		skeleton = textrule.Skeleton(name)
	}
	if p.Stages != nil {
		if err := s.checkStageLimits(p.Stages); err != nil {
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
			if _, err := tx.ExecContext(ctx, updateEditorNameSQL, name, skeleton[:], p.ID); err != nil {
				return err
			}
		}
		if p.Capacity != nil {
			if _, err := tx.ExecContext(ctx, updateEditorCapacitySQL, *p.Capacity, p.ID); err != nil {
				return err
			}
		}
		if cats != nil || p.Stages != nil {
			old, err := editorWhere(ctx, tx, `WHERE e.id = ? ORDER BY c.category`, p.ID)
			if err != nil {
				return err
			}
			if cats == nil {
				cats = old.Categories
			}
			stages := p.Stages
			if stages == nil {
				stages = map[string][]string{}
				for cat, list := range old.Stages {
					if slices.Contains(cats, cat) {
						stages[cat] = list
					}
				}
			}
			if err := tasks.CheckEditorWorkflow(0, cats, stages); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, deleteEditorCategoriesSQL, p.ID); err != nil {
				return err
			}
			if err := insertEditorCategories(ctx, tx, p.ID, cats, stages); err != nil {
				return err
			}
		}
		var err error
		ed, err = editorWhere(ctx, tx, `WHERE e.id = ? ORDER BY c.category`, p.ID)
		return err
	})
	if mysqlErrorIs(err, erDupEntry) {
		return nil, fmt.Errorf("update editor %d: %w", p.ID, s.nameTaken(ctx, err, name, skeleton, p.ID, "name is taken"))
	}
	if err != nil {
		return nil, fmt.Errorf("update editor %d: %w", p.ID, refusedValue(err))
	}
	return ed, nil
}
