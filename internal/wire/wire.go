// Package wire holds the JSON shapes the HTTP API (internal/api) and the
// taskd command share, so that the command's files keep the API's form: a
// new task as POST /v1/tasks takes it and `taskd import` reads it from JSON
// lines, and an accepted result as GET /v1/results streams it and `taskd
// export` writes it. internal/api/openapi.yaml describes both (NewTask,
// ResultLine).
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/taskd/taskd/tasks"
)

// TimeFormat is how times are written: RFC 3339 in UTC to the millisecond,
// the precision of the database's DATETIME(3) columns.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatTime formats t in TimeFormat.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// NewTask is a task to add: one element of POST /v1/tasks, one JSON line
// of `taskd import`.
type NewTask struct {
	Category    string          `json:"category"`
	Priority    int             `json:"priority"`
	Title       string          `json:"title"`
	Payload     json.RawMessage `json:"payload"`
	MaxAttempts int             `json:"max_attempts"`
	// Key, when set, is the task's unique external id; null or absent for
	// none, never "".
	Key *string `json:"key"`
	// KeyHold, when set, says how long the task holds its key (see
	// tasks.KeyHold): "forever", "live" or a duration such as "24h"; null or
	// absent for the default, forever.
	KeyHold *string `json:"key_hold"`
	// RunAfter and DueAt are RFC 3339 times; null or absent for none.
	RunAfter *string `json:"run_after"`
	DueAt    *string `json:"due_at"`
	// LimitKey, when set and not "", is the task's limit key (see
	// tasks.NewTask.LimitKey); null, "" or absent for none.
	LimitKey *string `json:"limit_key"`
}

// ErrEmptyKey is returned by NewTask.Task for a key of "" (leave it out for
// none).
var ErrEmptyKey = errors.New("key must not be empty")

// TimeError is returned by NewTask.Task for a time that is not RFC 3339.
type TimeError struct {
	// Field is the JSON name of the field: run_after or due_at.
	Field string
	// Value is the text given.
	Value string
	Err   error
}

func (e *TimeError) Error() string {
	return fmt.Sprintf("%s: want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", e.Field, e.Value)
}

func (e *TimeError) Unwrap() error { return e.Err }

// Task returns t as the store takes it: a null payload is the default ({}),
// and the times parsed. It checks the form only (ErrEmptyKey, *TimeError, an empty key_hold: ErrInvalid);
// the rest is tasks.NewTask.Validate's.
func (t NewTask) Task() (tasks.NewTask, error) {
	if string(t.Payload) == "null" {
		t.Payload = nil
	}
	nt := tasks.NewTask{
		Category: t.Category, Priority: t.Priority, Title: t.Title,
		Payload: t.Payload, MaxAttempts: t.MaxAttempts,
	}
	if t.Key != nil {
		if *t.Key == "" {
			return nt, ErrEmptyKey
		}
		nt.Key = *t.Key
	}
	if t.KeyHold != nil {
		if *t.KeyHold == "" {
			return nt, fmt.Errorf("%w: key_hold must not be empty (leave it out for the default)", tasks.ErrInvalid)
		}
		nt.KeyHold = tasks.KeyHold(*t.KeyHold)
	}
	if t.LimitKey != nil {
		nt.LimitKey = *t.LimitKey
	}
	var err error
	if nt.RunAfter, err = ParseTime("run_after", t.RunAfter); err != nil {
		return nt, err
	}
	if nt.DueAt, err = ParseTime("due_at", t.DueAt); err != nil {
		return nt, err
	}
	return nt, nil
}

// ParseTime parses the optional RFC 3339 time of the field named field; nil
// is the zero time, and anything else a *TimeError.
func ParseTime(field string, s *string) (time.Time, error) {
	if s == nil {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}, &TimeError{Field: field, Value: *s, Err: err}
	}
	return t, nil
}

// Result is an accepted result: one line of GET /v1/results, an element of a
// task's results and of an assignment's earlier ones, one JSON line of `taskd
// export`.
type Result struct {
	// Cursor is the result's place in the feed, a decimal string; omitted for
	// a result not numbered yet (a task's results, an assignment's earlier
	// ones: only a read of the feed numbers results).
	Cursor   string `json:"cursor,omitempty"`
	TaskID   int64  `json:"task_id"`
	Fence    int64  `json:"fence"`
	Category string `json:"category"`
	Title    string `json:"title"`
	// Key is the task's key, null when it has none.
	Key *string `json:"key"`

	Holder string `json:"holder"`
	// EditorID is the editor who submitted it, null for a worker.
	EditorID *int64 `json:"editor_id"`
	// EditorName is that editor's name, in a task's results and an
	// assignment's earlier ones; omitted for a worker and in the feed.
	EditorName  string          `json:"editor_name,omitempty"`
	Result      json.RawMessage `json:"result"`
	SubmittedAt string          `json:"submitted_at"`

	// Stage is the stage the result was submitted at; Decision and Notes the
	// submitter's. Omitted when empty.
	Stage    string `json:"stage,omitempty"`
	Decision string `json:"decision,omitempty"`
	Notes    string `json:"notes,omitempty"`
	// GroupID and Overlap, for a result of a task of a group.
	GroupID int64 `json:"group_id,omitempty"`
	Overlap int   `json:"overlap,omitempty"`
	// ActiveMS is the claim's active time in the feed, when it was measured.
	ActiveMS *int64 `json:"active_ms,omitempty"`
}

// ResultOf returns r as its line, its result JSON as the store holds it.
func ResultOf(r *tasks.Result) Result {
	out := Result{
		TaskID: r.TaskID, Fence: r.Fence, Category: r.Category, Title: r.Title,
		Key: orNull(r.Key), Holder: r.Holder, EditorID: orNull(r.EditorID), EditorName: r.EditorName, Result: r.Result,
		SubmittedAt: FormatTime(r.SubmittedAt),
		Stage:       r.StageName, Decision: r.Decision, Notes: r.Notes, ActiveMS: r.ActiveMS,
	}
	if r.Cursor != 0 {
		out.Cursor = strconv.FormatInt(r.Cursor, 10)
	}
	if r.GroupID != 0 {
		out.GroupID, out.Overlap = r.GroupID, r.Overlap
	}
	return out
}

// orNull returns nil (JSON null) for a zero value, else a pointer to v.
func orNull[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
