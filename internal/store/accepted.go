package store

import (
	"context"
	"fmt"

	"github.com/taskd/taskd/tasks"
)

// acceptedResultSQL reads the result of a done task's last claim: task_results by
// primary key (task_id, fence).
const acceptedResultSQL = `SELECT r.task_id, r.fence, r.holder, COALESCE(r.editor_id, 0) AS editor_id, r.result, r.submitted_at
FROM tasks t JOIN task_results r ON r.task_id = t.id AND r.fence = t.fence
WHERE t.id = ? AND t.status = 'done'`

// AcceptedResult returns the accepted result of a done task, or ErrNotFound when the
// task is not done (or does not exist).
func (s *Store) AcceptedResult(ctx context.Context, taskID int64) (*tasks.AcceptedResult, error) {
	var r tasks.AcceptedResult
	if err := s.db.GetContext(ctx, &r, acceptedResultSQL, taskID); err != nil {
		return nil, fmt.Errorf("accepted result of task %d: %w", taskID, notFound(err))
	}
	return &r, nil
}
