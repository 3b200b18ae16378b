package tasks

import (
	"time"
)

// List limits.
const (
	// ListLimitDefault and ListLimitMax bound ListParams.Limit.
	ListLimitDefault = 50
	ListLimitMax     = 500
)

// ListParams are the arguments of ListTasks. Zero fields do not filter.
type ListParams struct {
	// Status keeps tasks in this status; one of Statuses.
	Status Status
	// Category keeps tasks of this category.
	Category string
	// Holder keeps tasks whose holder (current, or last once done or dead) is this.
	Holder string
	// EditorID keeps the task this editor holds (tasks.editor_id is set only
	// while an editor holds a claim).
	EditorID int64
	// Key keeps the task with this key.
	Key string
	// CreatedAfter and CreatedBefore keep tasks created at or after, and before,
	// these times.
	CreatedAfter, CreatedBefore time.Time
	// DoneAfter and DoneBefore keep tasks that ended (done or dead) at or after,
	// and before, these times. With either, the list is ordered by done_at
	// instead of created_at.
	DoneAfter, DoneBefore time.Time
	// Oldest lists the oldest first; the default is the newest first.
	Oldest bool
	// Cursor continues the list after the last task of the page that returned
	// it (TaskPage.NextCursor), with the same filters and order. Empty: from the
	// start.
	Cursor string
	// Limit is the page size: 1..ListLimitMax, 0 means ListLimitDefault.
	Limit int
}

// TaskPage is a page of ListTasks.
type TaskPage struct {
	// Tasks are the page's tasks, without their payloads (Payload is nil).
	Tasks []Task
	// NextCursor continues the list (ListParams.Cursor), or is "" after the last
	// page.
	NextCursor string
}
