package store

import (
	"context"
	"fmt"

	"github.com/taskd/taskd/tasks"
)

// freeKeysSQL frees the keys held for a period whose period has passed: a range of
// tasks_key_free, which holds only such tasks' times (NULL for every other task).
// key_hold_secs = 0 makes key_held NULL, which frees the key in tasks_key_held, and
// key_free_at NULL, which takes the task out of the range. The rows are ended tasks,
// which no claim, submit or heartbeat locks; updated_at keeps the task's last change.
const freeKeysSQL = `UPDATE tasks FORCE INDEX (tasks_key_free) SET key_hold_secs = 0, updated_at = updated_at
WHERE key_free_at < NOW(3) ORDER BY key_free_at LIMIT ?`

// FreeKeys frees up to limit keys held for a period (tasks.KeyHoldFor) whose
// period has passed, and returns how many it freed: an insert with such a key makes
// a new task. limit 0 means RecycleLimitDefault. The sweeper calls it once a sweep.
// It returns ErrInvalid for a limit out of 1..RecycleLimitMax.
func (s *Store) FreeKeys(ctx context.Context, limit int) (int, error) {
	if limit == 0 {
		limit = tasks.RecycleLimitDefault
	}
	if limit < 1 || limit > tasks.RecycleLimitMax {
		return 0, fmt.Errorf("free keys: %w: limit must be 1..%d", tasks.ErrInvalid, tasks.RecycleLimitMax)
	}
	var n int64
	err := s.retryDeadlocks(ctx, func() error {
		res, err := s.db.ExecContext(ctx, freeKeysSQL, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("free keys: %w", err)
	}
	return int(n), nil
}
