package tasks

import (
	"errors"
	"fmt"
	"time"
)

// An operator's actions on tasks: requeue a dead task, cancel a pending one (one at a
// time or by filter) or an assigned one (one at a time). Every change is a conditional UPDATE on
// (id, fence, status) of rows locked by primary key in id order (the project's lock
// order: an editor's row, then task rows by primary key; these take no editor's row),
// in one transaction with its audit records.

// ErrWrongStatus means a task is not in the status an operation needs (Requeue needs
// dead, Cancel pending or assigned). Errors that wrap it are *StatusError, which names both.
// Nothing was changed.
var ErrWrongStatus = errors.New("wrong status")

// StatusError is the error of an operation on a task in the wrong status. It wraps
// ErrWrongStatus.
type StatusError struct {
	TaskID int64
	// Status is the task's status when the operation locked its row.
	Status Status
	// Want is the status the operation needs: "pending or assigned" for
	// a cancel of one task.
	Want Status
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%v: task %d is %s, not %s", ErrWrongStatus, e.TaskID, e.Status, e.Want)
}

func (e *StatusError) Unwrap() error { return ErrWrongStatus }

// Bulk limits.
const (
	// BulkLimitDefault and BulkLimitMax bound BulkParams.Limit and the number of
	// BulkParams.IDs.
	BulkLimitDefault = 1000
	BulkLimitMax     = 10000
)

// Changed is a task an operator's action changed.
type Changed struct {
	TaskID   int64
	Category string
	// Fence is the task's fence, unchanged by the action.
	Fence int64
	// Holder is the holder of the claim a cancel of an assigned task ended
	// (the claim of Fence); empty for any other change.
	Holder string
}

// ChangeParams are the arguments of Requeue and Cancel.
type ChangeParams struct {
	TaskID int64
	// Reason is recorded in the audit event (truncated to 1024 characters); may be
	// empty.
	Reason string
	// By, when not empty, names who asks for the change ("admin" for the HTTP
	// API, "engine" for the embedder's Engine): the event's detail is then
	// "by <By>", followed by ": <Reason>" when there is a reason.
	By string
}

// BulkParams select the tasks of RequeueMatching and CancelMatching: tasks in the
// operation's statuses (dead, or pending and assigned) that match every filter given. Category or
// IDs is required, so that an empty filter never means every task.
type BulkParams struct {
	// Category, when not empty, selects the tasks of this category.
	Category string
	// IDs, when not empty, selects these tasks: at most BulkLimitMax; duplicates are
	// ignored, unknown ids match nothing.
	IDs []int64
	// Status, when not empty, selects the tasks in this one of the operation's
	// statuses only: pending or assigned for a cancel, dead for a requeue.
	Status Status
	// CreatedBefore, when not zero, selects the tasks created before it: a time in
	// 1000-01-01 .. 9999-12-31, the range of the created_at column.
	CreatedBefore time.Time
	// Limit is the most tasks one call matches: 1..BulkLimitMax, 0 means
	// BulkLimitDefault.
	Limit int
	// Reason is recorded in every audit event (truncated to 1024 characters).
	Reason string
	// DryRun changes nothing: the result counts and lists the tasks the filter
	// selects now (Matched, IDs, More), and Changed is 0. A call with IDs set to
	// those, and the same filter, changes exactly those still in the status.
	DryRun bool
}

// BulkResult is what a bulk operation did.
type BulkResult struct {
	// Matched counts the tasks the filter selected (at most the limit).
	Matched int
	// Changed counts those that were still in the operation's status when their row
	// was locked, and were changed. The others had moved on (a claim took a pending
	// task, say) and were left alone.
	Changed int
	// More is set when the call stopped at its limit and more tasks match: call
	// again to go on.
	More bool
	// ByCategory counts the changed tasks by category.
	ByCategory map[string]int
	// IDs lists the matched tasks of a dry run, in the order they were matched.
	IDs []int64
	// Running counts, of a cancel's Changed, the tasks that were assigned: a
	// holder was running them, and the cancel ended its claim too (in a dry
	// run, of Matched, those assigned now). Changed - Running were pending. 0
	// for a requeue.
	Running int
	// Claims are the claims a cancel of assigned tasks ended, with their
	// holders (Running of them); nil for a requeue and a dry run.
	Claims []Changed
}
