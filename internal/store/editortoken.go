package store

import (
	"context"
	"fmt"

	"github.com/taskd/taskd/tasks"
)

const setEditorTokenSQL = `UPDATE editors SET token_hash = ? WHERE id = ?`

// SetEditorToken replaces the editor's token by the one whose hash is given (see
// NewToken): from its commit on, EditorByTokenHash finds the editor by the new hash
// only. The editor's claim is kept: claims belong to the editor, not to a token. It
// returns ErrNotFound for an unknown editor, ErrInvalid for a zero hash and
// ErrDuplicate for a hash another editor has.
func (s *Store) SetEditorToken(ctx context.Context, id int64, hash [32]byte) error {
	if hash == [32]byte{} {
		return fmt.Errorf("set editor token %d: %w: token hash must be set", id, tasks.ErrInvalid)
	}
	res, err := s.db.ExecContext(ctx, setEditorTokenSQL, hash[:], id)
	if mysqlErrorIs(err, erDupEntry) {
		return fmt.Errorf("set editor token %d: %w: token is taken", id, tasks.ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("set editor token %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set editor token %d: %w", id, err)
	} else if n != 1 {
		return fmt.Errorf("set editor token %d: %w", id, tasks.ErrNotFound)
	}
	return nil
}
