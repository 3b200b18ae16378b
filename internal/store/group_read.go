package store

import (
	"context"
	"fmt"

	"github.com/taskd/taskd/tasks"
)

// groupTasksSQL reads the tasks of a group, one range of tasks_group.
const groupTasksSQL = `SELECT ` + taskColumns + ` FROM tasks FORCE INDEX (tasks_group)
WHERE group_id = ? ORDER BY id`

// GroupTasks returns the tasks of the group groupID (see Task.GroupID), in id
// order, the first being the group's own: one query by tasks_group. A group that
// does not exist has none.
func (s *Store) GroupTasks(ctx context.Context, groupID int64) ([]tasks.Task, error) {
	out := []tasks.Task{}
	if err := s.db.SelectContext(ctx, &out, groupTasksSQL, groupID); err != nil {
		return nil, fmt.Errorf("tasks of group %d: %w", groupID, err)
	}
	return out, nil
}
