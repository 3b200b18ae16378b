package tasks

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is the state of a task. The values match the ENUM of tasks.status in
// schema.sql.
type Status string

// Task states.
const (
	StatusPending  Status = "pending"  // in the pool, claimable once run_after passes
	StatusAssigned Status = "assigned" // held by a claim; claimable again once the lease passes
	StatusDone     Status = "done"     // a submission was accepted
	StatusDead     Status = "dead"     // failed with no attempts left; Requeue puts it back in the pool
	// StatusCancelled is final: an operator cancelled the task while it was pending
	// (Cancel), and it is never handed out.
	StatusCancelled Status = "cancelled"
)

// Statuses returns every status, in the order of the ENUM in schema.sql.
func Statuses() []Status {
	return []Status{StatusPending, StatusAssigned, StatusDone, StatusDead, StatusCancelled}
}

// EventKind names an audit event. The values match the ENUM of task_events.kind in
// schema.sql.
type EventKind string

// Audit event kinds.
const (
	EventClaimed   EventKind = "claimed"   // a claim started; fence is the new fence
	EventHeartbeat EventKind = "heartbeat" // the holder extended its lease: written by taskd before migration 0014 only (a heartbeat is no event since)
	EventSubmitted EventKind = "submitted" // the holder's result was accepted; task done
	EventReleased  EventKind = "released"  // the holder (or an operator: detail "forced") gave the task back
	EventSkipped   EventKind = "skipped"   // the editor gave the task back and is not offered it again for a while
	EventExpired   EventKind = "expired"   // the lease passed and a new claim took the task over
	EventRecycled  EventKind = "recycled"  // the lease passed and the task went back to the pool
	EventFailed    EventKind = "failed"    // the holder reported an error; task pending again after a backoff
	EventDead      EventKind = "dead"      // the holder reported an error and no attempts are left
	EventRequeued  EventKind = "requeued"  // an operator put the dead task back in the pool; fence and holder of its last claim
	EventCancelled EventKind = "cancelled" // an operator cancelled the pending task
	EventSnoozed   EventKind = "snoozed"   // the worker's handler asked to run the task later; task pending again, the attempt not counted, detail how long
)

// Task is a row of the tasks table. Optional columns read as zero values: Holder "",
// EditorID 0, LastError "", TraceContext "", and nil times.
type Task struct {
	ID       int64           `db:"id"`
	Category string          `db:"category"`
	Priority int             `db:"priority"`
	Title    string          `db:"title"`
	Payload  json.RawMessage `db:"payload"`
	Status   Status          `db:"status"`
	// Fence is the epoch of the current or last claim.
	Fence int64 `db:"fence"`
	// Holder holds the claim while assigned and is kept as the last holder once the
	// task is done or dead.
	Holder string `db:"holder"`
	// EditorID is set only while an editor holds the claim.
	EditorID       int64      `db:"editor_id"`
	AssignedAt     *time.Time `db:"assigned_at"`
	LeaseExpiresAt *time.Time `db:"lease_expires_at"`
	// Attempts counts the claims so far, but those a snooze ended.
	Attempts     int        `db:"attempts"`
	MaxAttempts  int        `db:"max_attempts"`
	RunAfter     time.Time  `db:"run_after"`
	LastError    string     `db:"last_error"`
	TraceContext string     `db:"trace_context"`
	CreatedAt    time.Time  `db:"created_at"`
	UpdatedAt    time.Time  `db:"updated_at"`
	DoneAt       *time.Time `db:"done_at"`
	// Key is the task's unique external id, or "" (see NewTask.Key).
	Key string `db:"task_key"`
	// DueAt is the task's deadline, or nil (see NewTask.DueAt).
	DueAt *time.Time `db:"due_at"`

	// Stages are the task's stages in order, nil for a task of one stage (see
	// Workflow.Stages); Stage is the one it is at, from 0.
	Stages Stages `db:"stages"`
	Stage  int    `db:"stage"`
	// GroupID is the id of the first task of the group of a task that asks for
	// several independent results, one task per result; 0 when it asks for one.
	// Overlap is how many results the group asks for (1 without a group).
	GroupID int64 `db:"group_id"`
	Overlap int   `db:"overlap"`
	// ReservedFor is the editor a task sent back is offered to alone until
	// ReservedUntil; 0 and nil when it is not reserved.
	ReservedFor   int64      `db:"reserved_for"`
	ReservedUntil *time.Time `db:"reserved_until"`
	// Snoozes counts the claims a snooze ended since the task was added or last
	// requeued (see Snooze).
	Snoozes int `db:"snoozes"`
	// LimitKey is the task's limit key (NewTask.LimitKey), empty for none.
	LimitKey string `db:"limit_key"`
}

// StageName is the name of the stage the task is at, "" for a task of one stage.
func (t *Task) StageName() string {
	if t.Stage < len(t.Stages) {
		return t.Stages[t.Stage]
	}
	return ""
}

// LastStage reports whether the task is at its last stage: a submit accepted
// there ends it.
func (t *Task) LastStage() bool { return t.Stage+1 >= len(t.Stages) }

// Stages is a list of stage names, kept comma-separated in the database.
type Stages []string

// String returns the stages comma-separated, as the database keeps them.
func (s Stages) String() string { return strings.Join(s, ",") }

// Scan implements sql.Scanner: NULL and "" are no stages.
func (s *Stages) Scan(src any) error {
	var text string
	switch v := src.(type) {
	case nil:
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		return fmt.Errorf("stages: cannot scan %T", src)
	}
	if text == "" {
		*s = nil
		return nil
	}
	*s = strings.Split(text, ",")
	return nil
}

// Claim is a live claim: the task as of the claim, the claim's fence and its lease,
// all computed by the database.
type Claim struct {
	Task           Task
	Fence          int64
	AssignedAt     time.Time
	LeaseExpiresAt time.Time
	// TookOver is set when Claim took the task over from a claim whose lease had
	// passed (an 'expired' event records it).
	TookOver bool
	// Hedge says the claim is a hedge: the task is held by another editor
	// too, near its due_at, and whoever submits first wins (see Hedge).
	// Fence is then the hedge's own.
	Hedge bool
}

// EditorClaims are an editor's live claims and the tasks reserved for it.
type EditorClaims struct {
	// Held are the editor's live claims, oldest first: at most its capacity.
	Held []*Claim
	// Reserved are tasks a reviewer sent back to the editor, pending and offered
	// to it alone for now (see Task.ReservedFor): to claim before any other.
	Reserved []Candidate
}

// Event is a row of the append-only audit trail, task_events, or an event a
// record stands for: a worker's claim that succeeded writes no events, and its
// result is shown as its 'claimed' and 'submitted' events (a live one's row as
// its 'claimed' event), alike but for their IDs, which are 2^52 + 2 × fence
// (+1 for 'submitted') and work as a page's cursor as any other.
type Event struct {
	ID     int64     `db:"id"`
	TaskID int64     `db:"task_id"`
	Kind   EventKind `db:"kind"`
	// Fence is the fence of the claim the event is about.
	Fence    int64  `db:"fence"`
	Holder   string `db:"holder"`
	EditorID int64  `db:"editor_id"`
	Detail   string `db:"detail"`
	// TraceID is the W3C trace id (32 lowercase hex digits) of the sampled span the
	// event was written under, such as the claim's or the submit's; empty when the
	// operation was not traced or not sampled, and for events written before the
	// store kept trace ids.
	TraceID string    `db:"trace_id"`
	At      time.Time `db:"at"`
}

// Editor is a person who is handed tasks from its categories. The token hash is not
// part of it: look editors up by hash with EditorByTokenHash.
type Editor struct {
	ID         int64     `db:"id"`
	Name       string    `db:"name"`
	Categories []string  `db:"-"`
	CreatedAt  time.Time `db:"created_at"`
	// DisabledAt is when the editor was disabled (DisableEditor), or nil while it
	// is enabled.
	DisabledAt *time.Time `db:"disabled_at"`
	// Capacity is how many claims the editor may hold at once (1 by default).
	Capacity int `db:"capacity"`
	// Stages limits the editor to some stages of some of its categories: by
	// category, the stages it may take. A category not in it: every stage.
	Stages map[string][]string `db:"-"`
	// SessionEpoch counts the editor's disables (0 for an editor never
	// disabled). A page session keeps the value its sign-in read, and is
	// refused once the editor's has passed it: none outlives a disable.
	SessionEpoch int64 `db:"session_epoch"`
}

// MayTake reports whether the editor may take the stage of a task of category
// (any stage of a category Stages does not limit).
func (e *Editor) MayTake(category, stage string) bool {
	allowed, limited := e.Stages[category]
	return !limited || slices.Contains(allowed, stage)
}

// Holder is the holder string that identifies the editor's claims in tasks.holder.
func (e *Editor) Holder() string { return EditorHolder(e.ID) }

// Disabled reports whether the editor is disabled: its token is to be refused, and
// the store refuses it any claim.
func (e *Editor) Disabled() bool { return e.DisabledAt != nil }

// Candidate is a task that was claimable when Candidates read it, with the fence and
// status to pass to Claim.
type Candidate struct {
	ID       int64 `db:"id"`
	Fence    int64 `db:"fence"`
	Priority int   `db:"priority"`
	// Due is the task's due_at, or NoDue when it has none: within a priority,
	// candidates come in Due order, then oldest (lowest id) first.
	Due time.Time `db:"due_order"`
	// Status is StatusPending, or StatusAssigned for a claim whose lease has passed.
	Status Status `db:"status"`
	// Category is the task's category, set by EditorClaims (Candidates read one
	// category at a time and leave it empty).
	Category string `db:"-"`
	// Workflow says the task has stages, a group or a reservation: its claim
	// reads the workflow's checks (pass it on as ClaimParams.Workflow).
	Workflow bool `db:"workflow"`
	// LimitKey is the task's limit key, "" when it has none (pass it on as
	// ClaimParams.LimitKey).
	LimitKey string `db:"limit_key"`
}

// NoDue is Candidate.Due of a task without a due_at: later than any due_at, so that
// tasks with a deadline come first. It matches the far future of tasks.due_order in
// schema.sql.
var NoDue = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)

// Ended describes a claim that Submit, Release or Fail just ended, as the store read
// it under the row lock.
type Ended struct {
	TaskID int64
	// Holder held the claim that ended.
	Holder   string
	Category string
	// Status is the task's status now: done after Submit (pending when the
	// submit moved the task to another of its stages), pending after Release,
	// pending or dead after Fail.
	Status     Status
	AssignedAt time.Time
	// EndedAt is when the claim ended, by the database clock.
	EndedAt time.Time
	// TraceContext is the W3C traceparent stored with the claim, if any.
	TraceContext string
	// Stage, after a submit that moved the task to another stage (Status
	// pending), is the stage the task is at now, back in the pool.
	Stage string
	// Withheld is how long, from EndedAt, the task is not offered to the editor
	// whose claim ended: the store's SkipFor after a skip, the store's ReleaseCooldown after
	// a release. Zero otherwise.
	Withheld time.Duration
}
