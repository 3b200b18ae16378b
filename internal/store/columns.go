package store

import (
	"github.com/taskd/taskd/tasks"
)

// taskColumns selects a full Task; optional text and id columns read as zero values.
const taskColumns = `id, category, priority, title, payload, status, fence,
	COALESCE(holder, '') AS holder, COALESCE(editor_id, 0) AS editor_id,
	assigned_at, lease_expires_at, attempts, max_attempts, run_after,
	COALESCE(last_error, '') AS last_error, COALESCE(trace_context, '') AS trace_context,
	created_at, updated_at, done_at, COALESCE(task_key, '') AS task_key, due_at,
	stages, stage, COALESCE(group_id, 0) AS group_id, overlap, COALESCE(reserved_for, 0) AS reserved_for, reserved_until`

// claimOf builds the Claim view of an assigned task.
func claimOf(t tasks.Task) *tasks.Claim {
	c := &tasks.Claim{Task: t, Fence: t.Fence}
	if t.AssignedAt != nil {
		c.AssignedAt = *t.AssignedAt
	}
	if t.LeaseExpiresAt != nil {
		c.LeaseExpiresAt = *t.LeaseExpiresAt
	}
	return c
}
