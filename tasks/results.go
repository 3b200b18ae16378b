package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Limits of ResultsParams.Limit.
const (
	// ResultsLimitDefault is the page size when ResultsParams.Limit is 0.
	ResultsLimitDefault = 1000
	// ResultsLimitMax is the largest page.
	ResultsLimitMax = 10_000
)

// Result is one accepted submission as the results feed has it.
type Result struct {
	// Cursor is the result's place in the feed (task_results.seq): resume after it
	// with ResultsParams.After to read the results that follow. 0 for a result
	// not numbered yet (only a read of the feed numbers results), which
	// TaskResults may return.
	Cursor   int64  `db:"seq"`
	TaskID   int64  `db:"task_id"`
	Fence    int64  `db:"fence"`
	Category string `db:"category"`
	Title    string `db:"title"`
	// Key is the task's key, "" when it has none.
	Key string `db:"task_key"`

	// Holder is who submitted it: "editor:<id>" or a worker's id.
	Holder string `db:"holder"`
	// EditorID is the editor who submitted it, or 0 for a worker.
	EditorID int64 `db:"editor_id"`
	// EditorName is that editor's name, as a task's results (TaskResults)
	// read it; "" for a worker, and in the results feed.
	EditorName  string          `db:"editor_name"`
	Result      json.RawMessage `db:"result"`
	SubmittedAt time.Time       `db:"submitted_at"`

	// Stage and StageName are the stage the result was submitted at (0 and ""
	// for a task without stages); Decision and Notes the submitter's, if any.
	Stage     int    `db:"stage"`
	StageName string `db:"stage_name"`
	Decision  string `db:"decision"`
	Notes     string `db:"notes"`
	// GroupID is the task's group, 0 for a task that asks for one result, and
	// Overlap how many results the group asks for (see Task.GroupID).
	GroupID int64 `db:"group_id"`
	Overlap int   `db:"overlap"`
	// ActiveMS is the active time of the claim that submitted it, in
	// milliseconds (see WorkingTime), nil when it was not measured; only the
	// results feed (Results) reads it.
	ActiveMS *int64 `db:"active_ms"`
}

// Pages of a task's results (TaskResults).
const (
	// TaskResultsLimitDefault is the results a page holds when
	// TaskResultsParams.Limit is 0: the latest ones. It covers a round through
	// every stage (MaxStages) and a send back.
	TaskResultsLimitDefault = 10
	// TaskResultsLimitMax is the most results one page holds.
	TaskResultsLimitMax = 100
)

// TaskResultsParams select a page of the results of a task.
type TaskResultsParams struct {
	TaskID int64
	// Own reads the task's own results only; otherwise, for a task of a group,
	// those of every task of its group.
	Own bool
	// Before, when not "", is the cursor: the page holds the results older than
	// those of the newer page whose TaskResultPage.Before it is. "" is the
	// latest.
	Before string
	// Limit is the most results of the page: 1..TaskResultsLimitMax, 0 means
	// TaskResultsLimitDefault.
	Limit int
}

// TaskResultPage is a page of the results of a task, in the order they were
// submitted (submitted_at, then task id and fence).
type TaskResultPage struct {
	// Results are the page's results, oldest first.
	Results []Result
	// More is set when older results exist: read them with Before.
	More bool
	// Before is the cursor of the next older page, "" when there is none.
	Before string
}

// ResultsParams are the arguments of Results.
type ResultsParams struct {
	// After is the cursor to read after: 0 for the start of the feed, else the Cursor
	// of the last result read. A cursor beyond the feed's end is ErrInvalid.
	After int64
	// Limit bounds the results read: 1..ResultsLimitMax, 0 for ResultsLimitDefault.
	Limit int
}

// ResultsPage is what one Results call read.
type ResultsPage struct {
	// Count is the number of results handed to the callback.
	Count int
	// Next is the cursor to read after next time: the Cursor of the last result
	// handed to the callback, or ResultsParams.After when there was none.
	Next int64
	// More is true when the page is full (Count == Limit): more results may follow
	// at once. When false, the reader has caught up with the results committed when
	// it read.
	More bool
}

// ErrCursorExpired is the results feed's answer to a cursor older than what
// retention kept: results past the cursor were purged, and reading on would
// skip them silently. Errors wrapping it are *CursorExpiredError values.
var ErrCursorExpired = errors.New("cursor expired")

// CursorExpiredError says which results a cursor can no longer read: those
// with a cursor after Cursor up to Oldest may have been purged by retention.
// Reading on from Oldest, the oldest cursor still kept, skips them knowingly.
type CursorExpiredError struct {
	// Cursor is the cursor asked for.
	Cursor int64
	// Oldest is the oldest cursor still kept: the highest cursor of a purged
	// result.
	Oldest int64
}

func (e *CursorExpiredError) Error() string {
	return fmt.Sprintf("%v: results after cursor %d up to %d may have been purged by retention; the oldest cursor still kept is %d",
		ErrCursorExpired, e.Cursor, e.Oldest, e.Oldest)
}

// Unwrap returns ErrCursorExpired.
func (e *CursorExpiredError) Unwrap() error { return ErrCursorExpired }
