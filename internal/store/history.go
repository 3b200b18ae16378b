package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"

	"github.com/taskd/taskd/tasks"
)

// A task's history is its task_events rows and the events that records stand
// for when a claim wrote none (see logClaimsSQL): for a claim that succeeded,
// the 'claimed' and 'submitted' events its result row stands for; for a live
// claim made without its 'claimed' event, that event, which the task's row
// stands for. Derived events are shown as the events would have been (the
// same kind, fence, holder, editor, detail, trace id and time) in the place
// they would have had. That place is by fence: the events of a claim come
// after those of every earlier fence and before those of its own fence and
// later ones written after its result (a cancel of the task at its next
// stage). A derived event has no task_events row, so its id is none of
// theirs: DerivedEventID's, from 2^52 up (past any row's in practice, and
// exact as a number in JavaScript), which TaskEvents takes back as a cursor.
// That, and the place of a claim's derived events (a claim taken over, or
// ended, writes its 'claimed' event at the end, with a new id), are the
// only differences from events written at once.

// derivedEventBase is the least id of a derived event: 2^52.
const derivedEventBase = 1 << 52

// DerivedEventID is the id of the derived 'claimed' (submitted false) or
// 'submitted' event of the claim of a task with fence fence.
func DerivedEventID(fence int64, submitted bool) int64 {
	id := derivedEventBase + 2*fence
	if submitted {
		id++
	}
	return id
}

// taskEventsSQL reads a page of a task's events and the result rows that stand
// for events, each newest first, from before a cursor: a range of
// task_events_task (task_id, id) read backwards, stopped by LIMIT, and a range
// of task_results' primary key (task_id, fence), read backwards too, with the
// fence of the event the cursor names as its bound. A page costs its rows
// whatever the history's length, but one after a derived event, whose events
// are read by fence: their range also holds the events newer than the cursor.
const taskEventsSQL = `(SELECT 0 AS derived, id, task_id, kind, fence, COALESCE(holder, '') AS holder,
	COALESCE(editor_id, 0) AS editor_id, COALESCE(detail, '') AS detail,
	COALESCE(LOWER(HEX(trace_id)), '') AS trace_id, ` + "`at`" + `, '' AS submit_trace_id, NULL AS submitted_at
FROM task_events FORCE INDEX (task_events_task)
WHERE task_id = ? AND id < ? AND fence < ? ORDER BY id DESC LIMIT ?)
UNION ALL
(SELECT 1, 0, task_id, 'submitted', fence, holder, COALESCE(editor_id, 0), '',
	COALESCE(LOWER(HEX(claim_trace_id)), ''), claimed_at, COALESCE(LOWER(HEX(trace_id)), ''), submitted_at
FROM task_results FORCE INDEX (PRIMARY)
WHERE task_id = ? AND fence <= ` + historyBoundSQL + `
	AND claimed_at IS NOT NULL ORDER BY fence DESC LIMIT ?)
UNION ALL
(SELECT 2, 0, id, 'claimed', fence, holder, COALESCE(editor_id, 0), '',
	COALESCE(LOWER(HEX(` + claimTraceSQL + `)), ''), assigned_at, '', NULL
FROM tasks FORCE INDEX (PRIMARY)
WHERE id = ? AND claim_unlogged = 1 AND fence <= ` + historyBoundSQL + `)`

// historyBoundSQL is the highest fence of the derived events before a
// cursor: the fence of the first event from the cursor's id on, or the
// fence of a derived cursor (or the largest), its arguments the task's id,
// the cursor's and the latter.
const historyBoundSQL = `COALESCE((SELECT e.fence FROM task_events e FORCE INDEX (task_events_task)
		WHERE e.task_id = ? AND e.id >= ? ORDER BY e.id LIMIT 1), ?)`

// historyRow is a row of taskEventsSQL: an event (Derived 0), a result row
// standing for a claim's two events (1), or a task's row standing for the
// 'claimed' event of its live claim (2).
type historyRow struct {
	Derived int `db:"derived"`
	tasks.Event
	SubmitTraceID string       `db:"submit_trace_id"`
	SubmittedAt   sql.NullTime `db:"submitted_at"`
}

// TaskEvents returns a page of the audit trail of a task: the latest events, or
// those before p.Before, oldest first within the page, the claims a result row
// records shown as their events (see DerivedEventID). A task without events (or an
// unknown id) has an empty page. One round trip; its cost is the page's rows, read
// from the index (task_id, id) and the results' primary key, not the history's
// length (but after a derived event: see taskEventsSQL).
//
// It returns ErrInvalid for a limit or cursor out of range.
func (s *Store) TaskEvents(ctx context.Context, p tasks.TaskEventsParams) (*tasks.EventPage, error) {
	limit := p.Limit
	if limit == 0 {
		limit = tasks.EventsLimitDefault
	}
	if limit < 1 || limit > tasks.EventsLimitMax {
		return nil, fmt.Errorf("task events %d: %w: limit must be 1..%d, got %d", p.TaskID, tasks.ErrInvalid, tasks.EventsLimitMax, p.Limit)
	}
	if p.Before < 0 {
		return nil, fmt.Errorf("task events %d: %w: before must be a positive event id, got %d", p.TaskID, tasks.ErrInvalid, p.Before)
	}
	// The cursor's place: before an event (real events below its id, derived
	// ones up to the fence of the first event from it on), or before a
	// derived event (events of earlier fences, derived ones before it).
	before, belowFence, from, upToFence := int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64)
	var cursor *historyKey
	switch {
	case p.Before >= derivedEventBase:
		k := historyKey{fence: (p.Before - derivedEventBase) / 2, order: (p.Before - derivedEventBase) % 2}
		cursor = &k
		belowFence, upToFence = k.fence, k.fence
	case p.Before > 0:
		before, from = p.Before, p.Before
	}
	var rows []historyRow
	err := s.db.SelectContext(ctx, &rows, taskEventsSQL, p.TaskID, before, belowFence, limit+1,
		p.TaskID, p.TaskID, from, upToFence, limit+1,
		p.TaskID, p.TaskID, from, upToFence)
	if err != nil {
		return nil, fmt.Errorf("task events %d: %w", p.TaskID, err)
	}
	var real, derived []tasks.Event
	for _, r := range rows {
		if r.Derived == 0 {
			real = append(real, r.Event)
			continue
		}
		claimed := r.Event
		claimed.Kind, claimed.ID = tasks.EventClaimed, DerivedEventID(r.Fence, false)
		evs := []tasks.Event{claimed}
		if r.Derived == 1 {
			submitted := claimed
			submitted.Kind, submitted.ID, submitted.TraceID = tasks.EventSubmitted, DerivedEventID(r.Fence, true), r.SubmitTraceID
			if r.SubmittedAt.Valid {
				submitted.At = r.SubmittedAt.Time
			}
			evs = []tasks.Event{submitted, claimed} // newest first
		}
		for _, ev := range evs {
			if cursor == nil || derivedKey(ev).less(*cursor) {
				derived = append(derived, ev)
			}
		}
	}
	// Oldest first, the derived events in their places among the others.
	slices.Reverse(real)
	slices.Reverse(derived)
	evs := make([]tasks.Event, 0, len(real)+len(derived))
	for len(real) > 0 || len(derived) > 0 {
		if len(derived) > 0 && (len(real) == 0 || derived[0].Fence <= real[0].Fence) {
			evs, derived = append(evs, derived[0]), derived[1:]
		} else {
			evs, real = append(evs, real[0]), real[1:]
		}
	}
	page := &tasks.EventPage{More: len(evs) > limit}
	if page.More {
		evs = evs[len(evs)-limit:]
		page.Before = evs[0].ID
	}
	page.Events = evs
	return page, nil
}

// historyKey is a derived event's place among the derived events of a task.
type historyKey struct {
	fence int64
	order int64 // 0 'claimed', 1 'submitted'
}

func derivedKey(ev tasks.Event) historyKey {
	return historyKey{fence: ev.Fence, order: (ev.ID - derivedEventBase) % 2}
}

func (k historyKey) less(o historyKey) bool {
	return k.fence < o.fence || k.fence == o.fence && k.order < o.order
}
