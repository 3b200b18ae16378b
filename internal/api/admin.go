package api

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"

	"github.com/taskd/taskd/internal/wire"
	"github.com/taskd/taskd/tasks"
)

type createEditorRequest struct {
	Name       string   `json:"name"`
	Categories []string `json:"categories"`
	// Capacity is how many claims the editor may hold at once,
	// 1..tasks.MaxCapacity; absent means 1.
	Capacity *int `json:"capacity"`
	// Stages limits the editor to some stages of some of its categories;
	// absent: every stage of every category.
	Stages map[string][]string `json:"stages"`
}

type createEditorResponse struct {
	ID         int64    `json:"id"`
	Name       string   `json:"name"`
	Categories []string `json:"categories"`
	editorWorkJSON
	// Token is shown here once; the store keeps only its hash.
	Token string `json:"token"`
}

// createEditor creates an editor and answers with its token.
func (a *api) createEditor(w http.ResponseWriter, r *http.Request) error {
	var req createEditorRequest
	if err := decode(w, r, &req, false); err != nil {
		return err
	}
	if err := checkCapacity(req.Capacity); err != nil {
		return err
	}
	token, hash := tasks.NewToken()
	p := tasks.CreateEditorParams{Name: req.Name, Categories: req.Categories, TokenHash: hash, Stages: req.Stages}
	if req.Capacity != nil {
		p.Capacity = *req.Capacity
	}
	e, err := a.store.CreateEditor(r.Context(), p)
	if err != nil {
		return err
	}
	a.tokenMade(r.Context(), hash)
	a.log.InfoContext(r.Context(), "editor created", "editor_id", e.ID, "categories", len(e.Categories))
	a.writeJSON(w, r, http.StatusCreated, createEditorResponse{
		ID: e.ID, Name: e.Name, Categories: e.Categories, Token: token,
		editorWorkJSON: editorWorkJSON{Capacity: max(1, e.Capacity), Stages: stagesOrNil(e.Stages)},
	})
	return nil
}

// newTaskRequest is a task of POST /v1/tasks: a new task as `taskd import`
// reads it, and its workflow.
type newTaskRequest struct {
	wire.NewTask
	// Stages, when given (not null), are the task's own stages in order; []
	// is one stage, whatever its category says. Absent: its category's.
	Stages []string `json:"stages"`
	// Overlap, when given, is how many independent results the task asks
	// for, 1..tasks.MaxOverlap. Absent: its category's.
	Overlap *int `json:"overlap"`
	// Gold, when given, is the task's known answer: the task is a gold task
	// from its insert on (see markGold), never claimable as itself.
	Gold *markGoldRequest `json:"gold"`
}

// insertedJSON says what became of one task of POST /v1/tasks.
type insertedJSON struct {
	ID int64 `json:"id"`
	// Created is false when a task held the same key: id is that task's.
	Created bool `json:"created"`
	// Slots are the ids of the tasks of its group (overlap above 1), one per
	// result, id first; left out for a task without a group.
	Slots []int64 `json:"slots,omitempty"`
}

type addTasksResponse struct {
	// IDs are the tasks' ids in request order: for a key that was held, the
	// holder's.
	IDs      []int64        `json:"ids"`
	Tasks    []insertedJSON `json:"tasks"`
	Created  int            `json:"created"`
	Existing int            `json:"existing"`
}

// addTasks inserts a batch of tasks, all or none, and wakes editors waiting
// for their categories. A task whose key is held is not inserted again: the
// answer names the holder. 201 when any task was made, 200 when every key
// was held.
func (a *api) addTasks(w http.ResponseWriter, r *http.Request) error {
	var req []newTaskRequest
	if err := decode(w, r, &req, false); err != nil {
		return err
	}
	if len(req) == 0 || len(req) > MaxTasksPerRequest {
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "send 1..%d tasks, not %d", MaxTasksPerRequest, len(req))
	}
	ts := make([]tasks.NewTask, len(req))
	for i, t := range req {
		var err error
		ts[i], err = t.Task()
		var te *wire.TimeError
		switch {
		case errors.Is(err, wire.ErrEmptyKey):
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "task %d: key must be 1..%d characters, or left out", i, tasks.MaxKeyLen)
		case errors.As(err, &te):
			return errorf(http.StatusUnprocessableEntity, codeInvalid,
				"task %d: %s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not %q", i, te.Field, te.Value)
		case errors.Is(err, tasks.ErrInvalid):
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "task %d: %s", i, err)
		case err != nil:
			return err
		}
		if t.Overlap != nil && (*t.Overlap < 1 || *t.Overlap > tasks.MaxOverlap) {
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "task %d: overlap must be 1..%d, got %d", i, tasks.MaxOverlap, *t.Overlap)
		}
		if err := tasks.CheckStages(t.Stages); err != nil {
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "task %d: %s", i, err)
		}
		ts[i].Stages = t.Stages
		if t.Overlap != nil {
			ts[i].Overlap = *t.Overlap
		}
		if t.Gold != nil {
			if err := a.checkGold(ts[i], t.Gold.answer()); err != nil {
				return errorf(http.StatusUnprocessableEntity, codeInvalid, "task %d: %s", i, err)
			}
			// A gold task from the insert on, in its transaction.
			ans := t.Gold.answer()
			ts[i].Gold = &ans
		}
	}
	ins, err := a.d.AddTasks(r.Context(), ts)
	if err != nil {
		return err
	}
	out := addTasksResponse{IDs: make([]int64, len(ins)), Tasks: make([]insertedJSON, len(ins))}
	for i, in := range ins {
		out.IDs[i] = in.ID
		out.Tasks[i] = insertedJSON{ID: in.ID, Created: in.Created, Slots: in.Slots}
		if in.Created {
			out.Created++
		} else {
			out.Existing++
		}
	}
	a.log.DebugContext(r.Context(), "tasks added", "created", out.Created, "existing", out.Existing)
	status := http.StatusCreated
	if out.Created == 0 {
		status = http.StatusOK
	}
	a.writeJSON(w, r, status, out)
	return nil
}

// taskDetailJSON is a task with its claim state and audit trail, for the
// admin. Absent values are null.
type taskDetailJSON struct {
	Task taskJSON `json:"task"`
	taskStateJSON
	// Snoozes counts the claims a worker's snooze ended, which Attempts
	// leaves out (tasks.Task.Snoozes).
	Snoozes int     `json:"snoozes"`
	Key     *string `json:"key"`
	// LimitKey is the task's limit key, null for none.
	LimitKey *string `json:"limit_key"`
	// Result is the accepted result of a done task; null otherwise.
	Result *acceptedJSON `json:"result"`
	// History holds the latest tasks.EventsLimitDefault events, oldest
	// first; older ones are read with GET /v1/tasks/{id}/events?before=
	// HistoryBefore.
	History []eventJSON `json:"history"`
	// HistoryMore is set when older events exist.
	HistoryMore bool `json:"history_more"`
	// HistoryBefore is the cursor of the older events, null without any.
	HistoryBefore *int64 `json:"history_before"`
	// Results are, for a task with stages or of a group, its latest
	// tasks.TaskResultsLimitDefault results, its group's included, oldest
	// first; older ones are read with GET /v1/tasks/{id}/results?before=
	// ResultsBefore. Omitted for other tasks, as are ResultsMore and
	// ResultsBefore.
	Results *[]wire.Result `json:"results,omitempty"`
	// ResultsMore is set when older results exist.
	ResultsMore *bool `json:"results_more,omitempty"`
	// ResultsBefore is the cursor of the older results, omitted without any.
	ResultsBefore string `json:"results_before,omitempty"`
	// Group is the group of a task of a group; omitted otherwise.
	Group *groupJSON `json:"group,omitempty"`
}

// acceptedJSON is the accepted submission of a done task.
type acceptedJSON struct {
	Fence       int64           `json:"fence"`
	Holder      string          `json:"holder"`
	EditorID    *int64          `json:"editor_id"`
	SubmittedAt string          `json:"submitted_at"`
	Result      json.RawMessage `json:"result"`
}

type eventJSON struct {
	ID       int64           `json:"id"`
	Kind     tasks.EventKind `json:"kind"`
	Fence    int64           `json:"fence"`
	Holder   *string         `json:"holder"`
	EditorID *int64          `json:"editor_id"`
	Detail   *string         `json:"detail"`
	At       string          `json:"at"`
	// TraceID is the trace id of the operation that wrote the event (the
	// claim's, the submit's...: 32 lowercase hex digits); omitted when it was
	// not traced, and for events written before the store kept trace ids.
	TraceID string `json:"trace_id,omitempty"`
}

// getTask answers with a task, its claim state and the latest page of its
// history.
func (a *api) getTask(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	t, err := a.store.GetTask(r.Context(), id)
	if errors.Is(err, tasks.ErrNotFound) {
		return errorf(http.StatusNotFound, codeNotFound, "task %d does not exist", id)
	}
	if err != nil {
		return err
	}
	page, err := a.store.TaskEvents(r.Context(), tasks.TaskEventsParams{TaskID: id})
	if err != nil {
		return err
	}
	d := taskDetailOf(t, page.Events)
	d.HistoryMore, d.HistoryBefore = page.More, orNull(page.Before)
	if t.Status == tasks.StatusDone {
		res, err := a.store.AcceptedResult(r.Context(), id)
		switch {
		case err == nil:
			d.Result = &acceptedJSON{
				Fence: res.Fence, Holder: res.Holder, EditorID: orNull(res.EditorID),
				SubmittedAt: formatTime(res.SubmittedAt), Result: res.Result,
			}
		case !errors.Is(err, tasks.ErrNotFound): // not done any more: no result
			return err
		}
	}
	if len(t.Stages) > 0 || t.GroupID != 0 {
		page, err := a.store.TaskResults(r.Context(), tasks.TaskResultsParams{TaskID: id})
		if err != nil {
			return err
		}
		results := resultsOf(page.Results)
		d.Results, d.ResultsMore, d.ResultsBefore = &results, &page.More, page.Before
		if t.GroupID != 0 {
			ts, err := a.store.GroupTasks(r.Context(), t.GroupID)
			if err != nil {
				return err
			}
			decisions, err := a.store.GroupDecisions(r.Context(), t.GroupID)
			if err != nil {
				return err
			}
			d.Group = groupOf(t.GroupID, t.Overlap, ts, decisions)
		}
	}
	a.writeJSON(w, r, http.StatusOK, d)
	return nil
}

func taskDetailOf(t *tasks.Task, evs []tasks.Event) taskDetailJSON {
	return taskDetailJSON{Task: taskOf(t), taskStateJSON: taskStateOf(t), Snoozes: t.Snoozes, Key: orNull(t.Key), LimitKey: orNull(t.LimitKey), History: eventsOf(evs)}
}

// eventsOf is the JSON of a task's events.
func eventsOf(evs []tasks.Event) []eventJSON {
	out := make([]eventJSON, len(evs))
	for i, ev := range evs {
		out[i] = eventJSON{
			ID: ev.ID, Kind: ev.Kind, Fence: ev.Fence, Holder: orNull(ev.Holder),
			EditorID: orNull(ev.EditorID), Detail: orNull(ev.Detail), At: formatTime(ev.At),
			TraceID: ev.TraceID,
		}
	}
	return out
}

// traceIDOf is the trace id of a W3C traceparent (version-traceid-spanid-
// flags), or "" when tp is not one or its trace id is invalid (all zeros).
func traceIDOf(tp string) string {
	parts := strings.Split(tp, "-")
	if len(parts) < 4 || len(parts[1]) != 32 || parts[1] == strings.Repeat("0", 32) {
		return ""
	}
	for _, c := range parts[1] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	return parts[1]
}

// eventsParams are the query parameters of GET /v1/tasks/{id}/events.
var eventsParams = map[string]bool{"before": true, "limit": true}

// eventPageJSON is a page of a task's history.
type eventPageJSON struct {
	// Events are oldest first.
	Events []eventJSON `json:"events"`
	// More is set when older events exist.
	More bool `json:"more"`
	// Before is the cursor of the next older page, null without one.
	Before *int64 `json:"before"`
}

// taskEvents answers with a page of a task's history: the latest events, or
// those older than the event id before.
func (a *api) taskEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	for name, vals := range q {
		if !eventsParams[name] {
			return errorf(http.StatusBadRequest, codeBadRequest, "unknown query parameter %q", name)
		}
		if len(vals) > 1 {
			return errorf(http.StatusBadRequest, codeBadRequest, "query parameter %q is given %d times", name, len(vals))
		}
	}
	before, err := positiveParam(q.Get("before"), "before", math.MaxInt64)
	if err != nil {
		return err
	}
	limit, err := positiveParam(q.Get("limit"), "limit", tasks.EventsLimitMax)
	if err != nil {
		return err
	}
	page, err := a.store.TaskEvents(r.Context(), tasks.TaskEventsParams{TaskID: id, Before: before, Limit: int(limit)})
	if err != nil {
		return err
	}
	// Without events: a task without history, or none at all.
	if len(page.Events) == 0 {
		_, err = a.store.GetTask(r.Context(), id)
		if errors.Is(err, tasks.ErrNotFound) {
			return errorf(http.StatusNotFound, codeNotFound, "task %d does not exist", id)
		} else if err != nil {
			return err
		}
	}
	a.writeJSON(w, r, http.StatusOK, eventPageJSON{Events: eventsOf(page.Events), More: page.More, Before: orNull(page.Before)})
	return nil
}

// forceRelease takes a task back from whoever holds it; the fence is bumped,
// so the old holder's writes are refused from now on.
func (a *api) forceRelease(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	err = a.d.ForceRelease(r.Context(), id)
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return errorf(http.StatusNotFound, codeNotFound, "task %d does not exist", id)
	case errors.Is(err, tasks.ErrStale):
		return errorf(http.StatusConflict, codeNotAssigned, "task %d is not assigned", id)
	case err != nil:
		return err
	}
	a.log.InfoContext(r.Context(), "task force-released", "task_id", id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// statsJSON is a snapshot of the pool, and this process's dispatcher totals.
type statsJSON struct {
	ByStatus map[tasks.Status]int64 `json:"by_status"`
	// ByCategory has every status for every category that has tasks.
	ByCategory       map[string]map[tasks.Status]int64 `json:"by_category"`
	Holders          int64                             `json:"holders"`
	Live             int64                             `json:"live"`
	Expired          int64                             `json:"expired"`
	ExpiringSoon     int64                             `json:"expiring_soon"`
	ExpiringWithinMS int64                             `json:"expiring_within_ms"`
	// ByStage counts the tasks with stages by category, stage and status
	// (every status, 0 included, for each category and stage that has
	// tasks); omitted when no task has stages.
	ByStage map[string]map[string]map[tasks.Status]int64 `json:"by_stage,omitempty"`
	// Paused lists the paused categories by name.
	Paused     []string     `json:"paused"`
	Dispatcher countersJSON `json:"dispatcher"`
	// Webhooks is there when webhooks are configured.
	Webhooks *webhooksJSON `json:"webhooks,omitempty"`
	// Storage is there when the engine reports it.
	Storage *storageJSON `json:"storage,omitempty"`
}

// storageJSON is what the finished data takes.
type storageJSON struct {
	Tables []tableJSON `json:"tables"`
	// OldestFinishedMS is how long ago the oldest task kept of each ended
	// status ended, in milliseconds; a status with none is absent.
	OldestFinishedMS map[tasks.Status]int64 `json:"oldest_finished_ms"`
}

// tableJSON is a table's size.
type tableJSON struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	Rows  int64  `json:"rows"`
}

// webhooksJSON is the webhook backlog.
type webhooksJSON struct {
	// Backlog counts events still to be delivered: New plus every pending
	// delivery.
	Backlog int64 `json:"backlog"`
	// New counts events not fanned out to deliveries yet.
	New int64 `json:"new"`
	// Pending and Failed count deliveries by webhook.
	Pending map[string]int64 `json:"pending"`
	Failed  map[string]int64 `json:"failed"`
}

type countersJSON struct {
	Assignments   int64 `json:"assignments"`
	Conflicts     int64 `json:"conflicts"`
	RefusedClaims int64 `json:"refused_claims"`
	RefusedWrites int64 `json:"refused_writes"`
}

// stats answers with counts by status and category and the live claims.
func (a *api) stats(w http.ResponseWriter, r *http.Request) error {
	st, err := a.store.PoolStats(r.Context(), tasks.ExpiringWithinDefault)
	if err != nil {
		return err
	}
	out := statsJSON{
		ByStatus:         st.ByStatus,
		ByCategory:       make(map[string]map[tasks.Status]int64),
		Holders:          st.Holders,
		Live:             st.Live,
		Expired:          st.Expired,
		ExpiringSoon:     st.ExpiringSoon,
		ExpiringWithinMS: tasks.ExpiringWithinDefault.Milliseconds(),
		Paused:           st.Paused,
	}
	for _, c := range st.ByCategory {
		counts := out.ByCategory[c.Category]
		if counts == nil {
			counts = make(map[tasks.Status]int64, len(st.ByStatus))
			for status := range st.ByStatus {
				counts[status] = 0
			}
			out.ByCategory[c.Category] = counts
		}
		counts[c.Status] += c.Count
	}
	for _, c := range st.ByStage {
		if out.ByStage == nil {
			out.ByStage = make(map[string]map[string]map[tasks.Status]int64)
		}
		stages := out.ByStage[c.Category]
		if stages == nil {
			stages = make(map[string]map[tasks.Status]int64)
			out.ByStage[c.Category] = stages
		}
		counts := stages[c.Stage]
		if counts == nil {
			counts = make(map[tasks.Status]int64, len(st.ByStatus))
			for status := range st.ByStatus {
				counts[status] = 0
			}
			stages[c.Stage] = counts
		}
		counts[c.Status] += c.Count
	}
	if a.backlog != nil {
		b, err := a.backlog(r.Context())
		if err != nil {
			return err
		}
		out.Webhooks = &webhooksJSON{Backlog: b.PendingTotal(), New: b.New, Pending: b.Pending, Failed: b.Failed}
	}
	if a.storage != nil {
		st, err := a.storage(r.Context())
		if err != nil {
			return err
		}
		sj := &storageJSON{Tables: make([]tableJSON, 0, len(st.Tables)), OldestFinishedMS: make(map[tasks.Status]int64, len(st.Oldest))}
		for _, t := range st.Tables {
			sj.Tables = append(sj.Tables, tableJSON{Name: t.Name, Bytes: t.Bytes, Rows: t.Rows})
		}
		for s, age := range st.Oldest {
			sj.OldestFinishedMS[s] = age.Milliseconds()
		}
		out.Storage = sj
	}
	c := a.d.Stats()
	out.Dispatcher = countersJSON{
		Assignments: c.Assignments, Conflicts: c.Conflicts,
		RefusedClaims: c.RefusedClaims, RefusedWrites: c.RefusedWrites,
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}
