package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// erNoReferencedRow2 is the server's refusal of a row whose foreign key names
// no row (ER_NO_REFERENCED_ROW_2).
const erNoReferencedRow2 = 1452

// instructionsAttempts bounds how often SetInstructions tries again when
// another version of the category took the number it was writing.
const instructionsAttempts = 20

const (
	// instructionsLastSQL locks the category's current version, if any; at
	// READ COMMITTED no gap is locked, so two first versions written at once
	// meet at the primary key instead (one is retried).
	instructionsLastSQL = `SELECT category, version, body, source, created_at FROM category_instructions
		WHERE category = ? ORDER BY version DESC LIMIT 1 FOR UPDATE`
	instructionsInsertSQL = `INSERT INTO category_instructions (category, version, body, source, created_at)
		VALUES (?, ?, ?, ?, NOW(3))`
	instructionsVersionSQL = `SELECT category, version, body, source, created_at FROM category_instructions
		WHERE category = ? AND version = ?`
	instructionsCurrentSQL = `SELECT category, version, body, source, created_at FROM category_instructions
		WHERE category = ? ORDER BY version DESC LIMIT 1`
	instructionsListSQL = `SELECT category, version, '' AS body, source, created_at FROM category_instructions
		WHERE category = ? ORDER BY version DESC`
	// instructionsAckSQL keeps the first confirmation of a version (not INSERT
	// IGNORE: that would hide an editor that does not exist as a warning).
	instructionsAckSQL = `INSERT INTO editor_instruction_acks (editor_id, category, version, ` + "`at`" + `)
		SELECT ?, category, version, NOW(3) FROM category_instructions WHERE category = ? AND version = ?
		ON DUPLICATE KEY UPDATE editor_instruction_acks.version = editor_instruction_acks.version`
	// instructionsLatestSQL is the current version of every category that has
	// instructions: one row per category, read by the primary key's order.
	instructionsLatestSQL = `SELECT category, MAX(version) FROM category_instructions GROUP BY category`
	// editorInstructionsSQL is the current version of each of the categories
	// given (IN list) with the latest version the editor confirmed.
	editorInstructionsSQL = `SELECT ci.category, ci.version, ci.body, ci.source, ci.created_at,
		COALESCE((SELECT MAX(a.version) FROM editor_instruction_acks a
			WHERE a.editor_id = ? AND a.category = ci.category), 0) AS confirmed
		FROM category_instructions ci
		WHERE ci.category IN (?) AND ci.version = (SELECT MAX(c2.version) FROM category_instructions c2 WHERE c2.category = ci.category)
		ORDER BY ci.category`
	// unconfirmedSQL names those of the categories given (IN list) whose
	// current version is not empty and not confirmed by the editor.
	unconfirmedSQL = `SELECT ci.category FROM category_instructions ci
		WHERE ci.category IN (?) AND ci.body <> ''
		AND ci.version = (SELECT MAX(c2.version) FROM category_instructions c2 WHERE c2.category = ci.category)
		AND NOT EXISTS (SELECT 1 FROM editor_instruction_acks a
			WHERE a.editor_id = ? AND a.category = ci.category AND a.version >= ci.version)
		ORDER BY ci.category`
)

// SetInstructions makes body the category's instructions: a new version,
// numbered one past the last, unless body is the current version's text, in
// which case nothing changes. It returns the current version and whether this
// call made it. Versions written at once each get their own number
// (the primary key refuses a repeat, which is tried again). Source is tasks.InstructionsFromConfig or
// tasks.InstructionsFromAPI. One transaction, by the primary key.
//
// It returns ErrInvalid for a category that tasks cannot have, a body that
// tasks.CheckInstructions refuses or an unknown source.
func (s *Store) SetInstructions(ctx context.Context, category, body, source string) (in tasks.Instructions, created bool, err error) {
	if err := tasks.CheckCategory(category); err != nil {
		return in, false, fmt.Errorf("set instructions: %w", err)
	}
	if err := tasks.CheckInstructions(body); err != nil {
		return in, false, fmt.Errorf("set instructions of %q: %w", category, err)
	}
	if source != tasks.InstructionsFromConfig && source != tasks.InstructionsFromAPI {
		return in, false, fmt.Errorf("set instructions of %q: %w: source %q", category, tasks.ErrInvalid, source)
	}
	for attempt := 1; ; attempt++ {
		err = s.inTx(ctx, func(tx *sqlx.Tx) error {
			created = false
			var last tasks.Instructions
			switch err := tx.GetContext(ctx, &last, instructionsLastSQL, category); {
			case err == nil && last.Body == body:
				in = last
				return nil
			case err != nil && !errors.Is(err, sql.ErrNoRows):
				return err
			}
			if _, err := tx.ExecContext(ctx, instructionsInsertSQL, category, last.Version+1, body, source); err != nil {
				return err
			}
			created = true
			return tx.GetContext(ctx, &in, instructionsVersionSQL, category, last.Version+1)
		})
		if err == nil || !mysqlErrorIs(err, erDupEntry) || attempt == instructionsAttempts {
			break
		}
	}
	if err != nil {
		return tasks.Instructions{}, false, fmt.Errorf("set instructions of %q: %w", category, refusedValue(err))
	}
	return in, created, nil
}

// Instructions returns a version of the category's instructions, the
// current one when version is 0. It returns ErrNotFound when the category has
// no instructions or no such version.
func (s *Store) Instructions(ctx context.Context, category string, version int) (*tasks.Instructions, error) {
	var in tasks.Instructions
	var err error
	if version == 0 {
		err = s.db.GetContext(ctx, &in, instructionsCurrentSQL, category)
	} else {
		err = s.db.GetContext(ctx, &in, instructionsVersionSQL, category, version)
	}
	if err != nil {
		return nil, fmt.Errorf("instructions of %q: %w", category, notFound(err))
	}
	return &in, nil
}

// InstructionVersions lists the versions of the category's instructions,
// newest first, without their text; empty when it has none.
func (s *Store) InstructionVersions(ctx context.Context, category string) ([]tasks.Instructions, error) {
	out := []tasks.Instructions{}
	if err := s.db.SelectContext(ctx, &out, instructionsListSQL, category); err != nil {
		return nil, fmt.Errorf("instruction versions of %q: %w", category, err)
	}
	return out, nil
}

// LatestInstructions maps each category that has instructions to its current
// version: one read of the whole table's primary key (a row per version).
func (s *Store) LatestInstructions(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, instructionsLatestSQL)
	if err != nil {
		return nil, fmt.Errorf("latest instructions: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int)
	for rows.Next() {
		var c string
		var v int
		if err := rows.Scan(&c, &v); err != nil {
			return nil, fmt.Errorf("latest instructions: %w", err)
		}
		out[c] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("latest instructions: %w", err)
	}
	return out, nil
}

// ConfirmInstructions records that the editor read and confirmed a version
// of the category's instructions; confirming one twice changes nothing. It
// returns ErrNotFound when the category has no such version (or the editor
// does not exist).
func (s *Store) ConfirmInstructions(ctx context.Context, editorID int64, category string, version int) error {
	if _, err := s.Instructions(ctx, category, version); err != nil {
		return fmt.Errorf("confirm instructions: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, instructionsAckSQL, editorID, category, version); err != nil {
		if mysqlErrorIs(err, erNoReferencedRow2) {
			return fmt.Errorf("confirm instructions of %q: editor %d: %w", category, editorID, tasks.ErrNotFound)
		}
		return fmt.Errorf("confirm instructions of %q: %w", category, err)
	}
	return nil
}

// EditorInstructions returns the current instructions of those of categories
// that have some, by name, each with the latest version the editor confirmed.
func (s *Store) EditorInstructions(ctx context.Context, editorID int64, categories []string) ([]tasks.EditorInstructions, error) {
	out := []tasks.EditorInstructions{}
	if len(categories) == 0 {
		return out, nil
	}
	q, args, err := sqlx.In(editorInstructionsSQL, editorID, categories)
	if err != nil {
		return nil, fmt.Errorf("editor instructions: %w", err)
	}
	if err := s.db.SelectContext(ctx, &out, q, args...); err != nil {
		return nil, fmt.Errorf("editor %d instructions: %w", editorID, err)
	}
	return out, nil
}

// UnconfirmedInstructions names those of categories whose current
// instructions (not empty) the editor has not confirmed, by name: the
// categories its next claim leaves out.
func (s *Store) UnconfirmedInstructions(ctx context.Context, editorID int64, categories []string) ([]string, error) {
	out := []string{}
	if len(categories) == 0 {
		return out, nil
	}
	q, args, err := sqlx.In(unconfirmedSQL, categories, editorID)
	if err != nil {
		return nil, fmt.Errorf("unconfirmed instructions: %w", err)
	}
	if err := s.db.SelectContext(ctx, &out, q, args...); err != nil {
		return nil, fmt.Errorf("editor %d unconfirmed instructions: %w", editorID, err)
	}
	return out, nil
}
