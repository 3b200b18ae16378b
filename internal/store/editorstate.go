package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

const (
	// disableEditorSQL disables the editor and raises its session epoch, so
	// that every page session begun before ends, even one whose sign-in read
	// the editor enabled just before this commit.
	disableEditorSQL = `UPDATE editors SET disabled_at = COALESCE(disabled_at, NOW(3)), session_epoch = session_epoch + 1 WHERE id = ?`
	// editorTaskRevokeLockSQL locks the task lockEditor found, if it still names the
	// editor: a release or a submit of the editor's, which do not lock the editor's
	// row, may have ended the claim in the meantime.
	editorTaskRevokeLockSQL = `SELECT fence, COALESCE(holder, '') AS holder, category, assigned_at,
	COALESCE(trace_context, '') AS trace_context, NOW(3) AS db_now, ` + goldCopyColumnSQL + `
FROM tasks WHERE id = ? AND editor_id = ? AND status = 'assigned' FOR UPDATE`
	enableEditorSQL = `UPDATE editors SET disabled_at = NULL WHERE id = ?`
)

// DisableEditor disables an editor and revokes its claims, in one transaction that
// locks the editor's row and then the tasks it holds, the order of a claim. From its
// commit on, the store refuses the editor every claim (ErrEditorDisabled); its token
// is for callers to refuse (Editor.Disabled). Each claim the editor held, live or
// with its lease passed, goes back to the pool with its fence bumped, as ForceRelease
// does, so whatever the editor still sends about it is stale; a 'released' event
// with detail "forced: editor disabled" records it. Each disable raises the
// editor's SessionEpoch, which ends its page sessions for good: every one begun
// before, the enable after brings none back.
//
// It returns the revoked claims, oldest task first, none if the editor held none;
// ErrNotFound for an unknown editor. Disabling a disabled editor keeps its
// DisabledAt and revokes any claim it still holds.
func (s *Store) DisableEditor(ctx context.Context, id int64) ([]tasks.Revoked, error) {
	var revoked []tasks.Revoked
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		revoked = nil // a deadlock victim runs again
		ed, err := s.lockEditor(ctx, tx, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, disableEditorSQL, id); err != nil {
			return err
		}
		for _, taskID := range ed.Held {
			r, err := s.revokeEditorClaim(ctx, tx, id, taskID)
			if err != nil {
				return err
			}
			if r != nil {
				revoked = append(revoked, *r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("disable editor %d: %w", id, err)
	}
	return revoked, nil
}

// revokeEditorClaim revokes the editor's claim of task taskID, if it still holds
// it: the caller holds the editor's row.
func (s *Store) revokeEditorClaim(ctx context.Context, tx *sqlx.Tx, editorID, taskID int64) (*tasks.Revoked, error) {
	var row struct {
		Fence        int64      `db:"fence"`
		Holder       string     `db:"holder"`
		Category     string     `db:"category"`
		AssignedAt   *time.Time `db:"assigned_at"`
		TraceContext string     `db:"trace_context"`
		DBNow        time.Time  `db:"db_now"`
		GoldCopy     bool       `db:"gold_copy"`
	}
	if err := tx.GetContext(ctx, &row, editorTaskRevokeLockSQL, taskID, editorID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil // released or submitted in the meantime
		}
		return nil, err
	}
	res, err := tx.ExecContext(ctx, forceReleaseSQL, taskID, row.Fence)
	if err != nil {
		return nil, err
	}
	if err := expectOne(res); err != nil {
		return nil, err
	}
	revoked := &tasks.Revoked{Fence: row.Fence, Ended: tasks.Ended{
		TaskID: taskID, Holder: row.Holder, Category: row.Category, Status: tasks.StatusPending,
		EndedAt: row.DBNow, TraceContext: row.TraceContext,
	}}
	if row.AssignedAt != nil {
		revoked.AssignedAt = *row.AssignedAt
	}
	return revoked, s.insertEvents(ctx, tx, event{
		taskID: taskID, kind: tasks.EventReleased, fence: row.Fence, holder: row.Holder, editorID: editorID,
		detail: "forced: editor disabled", category: row.Category, cause: tasks.WebhookForce, goldCopy: row.GoldCopy,
	})
}

// EnableEditor enables a disabled editor: it may claim again, and its token is good
// again. Enabling an enabled editor changes nothing. It returns ErrNotFound for an
// unknown editor.
func (s *Store) EnableEditor(ctx context.Context, id int64) error {
	res, err := s.db.ExecContext(ctx, enableEditorSQL, id)
	if err != nil {
		return fmt.Errorf("enable editor %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("enable editor %d: %w", id, err)
	} else if n != 1 {
		return fmt.Errorf("enable editor %d: %w", id, tasks.ErrNotFound)
	}
	return nil
}
