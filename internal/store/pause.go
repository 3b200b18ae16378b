package store

import (
	"context"
	"fmt"

	"github.com/taskd/taskd/tasks"
)

// notPausedSQL is true when the category of the tasks row in the statement is not
// paused: one primary-key lookup.
const notPausedSQL = ` AND NOT EXISTS (SELECT 1 FROM paused_categories p WHERE p.category = tasks.category)`

const (
	pauseSQL          = `INSERT INTO paused_categories (category, paused_at) VALUES (?, NOW(3))`
	pausedSQL         = `SELECT category, paused_at FROM paused_categories WHERE category = ?`
	resumeSQL         = `DELETE FROM paused_categories WHERE category = ?`
	pausedListSQL     = `SELECT category, paused_at FROM paused_categories ORDER BY category`
	pausedCategorySQL = `SELECT EXISTS (SELECT 1 FROM paused_categories WHERE category = ?)`
)

// PauseCategory pauses a category: from the moment it returns, no claim on any
// replica takes a task of it, to editors or to workers, until ResumeCategory. Live
// claims end as usual. Pausing a paused category changes nothing. It returns the
// pause (since when, by the database clock) and whether this call made it.
//
// It returns ErrInvalid for a category that tasks cannot have (1..64 characters, no
// leading or trailing spaces). The category need not have tasks.
func (s *Store) PauseCategory(ctx context.Context, category string) (p tasks.PausedCategory, paused bool, err error) {
	if err := tasks.CheckCategory(category); err != nil {
		return p, false, fmt.Errorf("pause category: %w", err)
	}
	_, err = s.db.ExecContext(ctx, pauseSQL, category)
	switch {
	case err == nil:
		paused = true
	case mysqlErrorIs(err, erDupEntry):
	default:
		return p, false, fmt.Errorf("pause category %q: %w", category, refusedValue(err))
	}
	if err := s.db.GetContext(ctx, &p, pausedSQL, category); err != nil {
		// Resumed in the meantime: report the pause this call saw.
		return p, false, fmt.Errorf("pause category %q: %w", category, notFound(err))
	}
	return p, paused, nil
}

// ResumeCategory ends the pause of a category: its tasks are handed out again.
// Resuming a category that is not paused changes nothing. It returns whether this
// call ended a pause, and ErrInvalid for a category that tasks cannot have.
func (s *Store) ResumeCategory(ctx context.Context, category string) (resumed bool, err error) {
	if err := tasks.CheckCategory(category); err != nil {
		return false, fmt.Errorf("resume category: %w", err)
	}
	res, err := s.db.ExecContext(ctx, resumeSQL, category)
	if err != nil {
		return false, fmt.Errorf("resume category %q: %w", category, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("resume category %q: %w", category, err)
	}
	return n > 0, nil
}

// PausedCategories lists the paused categories, by name.
func (s *Store) PausedCategories(ctx context.Context) ([]tasks.PausedCategory, error) {
	out := []tasks.PausedCategory{}
	if err := s.db.SelectContext(ctx, &out, pausedListSQL); err != nil {
		return nil, fmt.Errorf("paused categories: %w", err)
	}
	return out, nil
}
