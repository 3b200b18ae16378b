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
	stages, stage, COALESCE(group_id, 0) AS group_id, overlap, COALESCE(reserved_for, 0) AS reserved_for, reserved_until,
	snoozes, COALESCE(limit_key, '') AS limit_key`

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

// taskFields returns the destinations in t of taskColumns' columns, in their
// order, for a Scan of them without reflection over the struct (the workers'
// batches read hundreds of rows per round trip).
func taskFields(t *tasks.Task) []any {
	return []any{&t.ID, &t.Category, &t.Priority, &t.Title, &t.Payload, &t.Status, &t.Fence,
		&t.Holder, &t.EditorID,
		&t.AssignedAt, &t.LeaseExpiresAt, &t.Attempts, &t.MaxAttempts, &t.RunAfter,
		&t.LastError, &t.TraceContext,
		&t.CreatedAt, &t.UpdatedAt, &t.DoneAt, &t.Key, &t.DueAt,
		&t.Stages, &t.Stage, &t.GroupID, &t.Overlap, &t.ReservedFor, &t.ReservedUntil,
		&t.Snoozes, &t.LimitKey}
}
