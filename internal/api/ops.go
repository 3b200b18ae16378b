package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/taskd/taskd/internal/textrule"
	"github.com/taskd/taskd/tasks"
)

// codeWrongStatus answers an operator's action on a task in another status
// than the action needs.
const codeWrongStatus = "wrong_status"

// changeRequest is the optional body of a requeue or cancel of one task.
type changeRequest struct {
	Reason string `json:"reason"`
}

// checkReason refuses a reason longer than the audit record keeps, and one
// that is not a single line of text (see textrule.OneLine): a control
// character (C0, line breaks and tabs included, DEL or C1), a line or
// paragraph separator (U+2028, U+2029) or a bidi control (U+202A..U+202E,
// U+2066..U+2069). The error names the first such character and where it is.
func checkReason(reason string) error {
	if utf8.RuneCountInString(reason) > MaxReasonLen {
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "reason must be at most %d characters", MaxReasonLen)
	}
	if err := textrule.OneLine(reason); err != nil {
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "reason %s", err)
	}
	return nil
}

// requeueTask puts a dead task back in the pool.
func (a *api) requeueTask(w http.ResponseWriter, r *http.Request) error {
	return a.changeTask(w, r, "requeue", a.d.Requeue)
}

// cancelTask cancels a task for good, pending or assigned: the claim of an
// assigned one ends with it, and its holder is refused from then on
// (task_cancelled).
func (a *api) cancelTask(w http.ResponseWriter, r *http.Request) error {
	return a.changeTask(w, r, "cancel", func(ctx context.Context, p tasks.ChangeParams) error {
		p.By = "admin"
		return a.d.Cancel(ctx, p)
	})
}

func (a *api) changeTask(w http.ResponseWriter, r *http.Request, op string, change func(context.Context, tasks.ChangeParams) error) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var req changeRequest
	if err := decode(w, r, &req, true); err != nil {
		return err
	}
	if err := checkReason(req.Reason); err != nil {
		return err
	}
	err = change(r.Context(), tasks.ChangeParams{TaskID: id, Reason: req.Reason})
	var se *tasks.StatusError
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return errorf(http.StatusNotFound, codeNotFound, "task %d does not exist", id)
	case errors.As(err, &se):
		return wrongStatus(op, se)
	case err != nil:
		return err
	}
	a.log.InfoContext(r.Context(), "task "+pastTense(op), "task_id", id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// wrongStatus is the 409 of an operator's action on a task in the wrong
// status, saying what to do where there is something to do.
func wrongStatus(op string, se *tasks.StatusError) *apiError {
	msg := fmt.Sprintf("task %d is %s, not %s: only a %s task can be %s", se.TaskID, se.Status, se.Want, se.Want, pastTense(op))
	if op == "cancel" {
		msg = fmt.Sprintf("task %d is %s: it has ended, and only a pending or assigned task can be cancelled", se.TaskID, se.Status)
	}
	return errorf(http.StatusConflict, codeWrongStatus, "%s", msg)
}

func pastTense(op string) string {
	if op == "cancel" {
		return "cancelled"
	}
	return op + "d"
}

// bulkRequest selects tasks for a requeue or cancel by filter. Category or
// ids is required: an empty filter never means every task.
type bulkRequest struct {
	// Category selects the tasks of one category.
	Category string `json:"category"`
	// IDs selects these tasks (at most tasks.BulkLimitMax).
	IDs []int64 `json:"ids"`
	// Status selects the tasks of one of the operation's statuses only
	// (a cancel's pending or assigned).
	Status string `json:"status"`
	// CreatedBefore, RFC 3339, selects the tasks created before it.
	CreatedBefore string `json:"created_before"`
	// Limit is the most tasks one call matches: 1..tasks.BulkLimitMax,
	// default tasks.BulkLimitDefault.
	Limit  int    `json:"limit"`
	Reason string `json:"reason"`
	// DryRun counts and lists the tasks the call would change, and changes
	// none.
	DryRun bool `json:"dry_run"`
}

// bulkResponse reports a bulk action; the client calls again while more is
// set.
type bulkResponse struct {
	Matched int  `json:"matched"`
	Changed int  `json:"changed"`
	More    bool `json:"more"`
	// IDs lists the matched tasks of a dry run; absent otherwise.
	IDs *[]int64 `json:"ids,omitempty"`
	// Pending and Running split a cancel's changed tasks (in a dry run, its
	// matched ones) by the status they had: waiting in the pool, or held by
	// a holder whose claim the cancel ended. Absent for a requeue.
	Pending *int `json:"pending,omitempty"`
	Running *int `json:"running,omitempty"`
}

// requeueMatching requeues the dead tasks a filter selects, up to its limit.
func (a *api) requeueMatching(w http.ResponseWriter, r *http.Request) error {
	return a.changeMatching(w, r, "requeue", a.d.RequeueMatching)
}

// cancelMatching cancels the pending and assigned tasks a filter selects, up to
// its limit, ending the claims of the assigned ones as cancelTask does.
func (a *api) cancelMatching(w http.ResponseWriter, r *http.Request) error {
	return a.changeMatching(w, r, "cancel", a.d.CancelMatching)
}

func (a *api) changeMatching(w http.ResponseWriter, r *http.Request, op string,
	change func(context.Context, tasks.BulkParams) (*tasks.BulkResult, error)) error {
	var req bulkRequest
	if err := decode(w, r, &req, false); err != nil {
		return err
	}
	if err := checkReason(req.Reason); err != nil {
		return err
	}
	p := tasks.BulkParams{Category: req.Category, IDs: req.IDs, Status: tasks.Status(req.Status), Limit: req.Limit, Reason: req.Reason, DryRun: req.DryRun}
	if req.CreatedBefore != "" {
		t, err := time.Parse(time.RFC3339Nano, req.CreatedBefore)
		if err != nil {
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "created_before must be an RFC 3339 time, got %q", req.CreatedBefore)
		}
		if t.IsZero() {
			t = t.Add(-time.Nanosecond) // the store takes a zero time for none; this one it refuses
		}
		p.CreatedBefore = t
	}
	res, err := change(r.Context(), p)
	if err != nil {
		if res != nil && res.Changed > 0 {
			a.log.WarnContext(r.Context(), "bulk "+op+" stopped", "changed", res.Changed, "err", err)
		}
		return err
	}
	var pending, running *int
	if op == "cancel" {
		n := res.Changed
		if req.DryRun {
			n = res.Matched
		}
		pending, running = ptr(n-res.Running), ptr(res.Running)
	}
	if req.DryRun {
		ids := res.IDs
		if ids == nil {
			ids = []int64{}
		}
		a.writeJSON(w, r, http.StatusOK, bulkResponse{Matched: res.Matched, More: res.More, IDs: &ids, Pending: pending, Running: running})
		return nil
	}
	a.log.InfoContext(r.Context(), "bulk "+op, "category", req.Category, "ids", len(req.IDs),
		"matched", res.Matched, "changed", res.Changed, "running", res.Running, "more", res.More)
	a.writeJSON(w, r, http.StatusOK, bulkResponse{Matched: res.Matched, Changed: res.Changed, More: res.More, Pending: pending, Running: running})
	return nil
}

// pauseJSON is a category's pause state.
type pauseJSON struct {
	Category string `json:"category"`
	Paused   bool   `json:"paused"`
	// PausedAt is when the pause began; null once resumed.
	PausedAt *string `json:"paused_at"`
	// Changed is false when the category already was in the state asked for.
	Changed bool `json:"changed"`
}

// pauseCategory pauses a category: nothing in it is handed out until it is
// resumed. Pausing a paused category changes nothing (changed: false).
func (a *api) pauseCategory(w http.ResponseWriter, r *http.Request) error {
	cat := r.PathValue("category")
	if err := decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	p, changed, err := a.d.PauseCategory(r.Context(), cat)
	if err != nil {
		return err
	}
	if changed {
		a.log.InfoContext(r.Context(), "category paused", "category", cat)
	}
	a.writeJSON(w, r, http.StatusOK, pauseJSON{Category: cat, Paused: true, PausedAt: formatTimePtr(&p.PausedAt), Changed: changed})
	return nil
}

// resumeCategory ends a category's pause and wakes the editors waiting for
// it. Resuming a category that is not paused changes nothing (changed: false).
func (a *api) resumeCategory(w http.ResponseWriter, r *http.Request) error {
	cat := r.PathValue("category")
	if err := decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	changed, err := a.d.ResumeCategory(r.Context(), cat)
	if err != nil {
		return err
	}
	if changed {
		a.log.InfoContext(r.Context(), "category resumed", "category", cat)
	}
	a.writeJSON(w, r, http.StatusOK, pauseJSON{Category: cat, Paused: false, Changed: changed})
	return nil
}

type pausedCategoryJSON struct {
	Category string `json:"category"`
	PausedAt string `json:"paused_at"`
}

type pausedListJSON struct {
	Paused []pausedCategoryJSON `json:"paused"`
}

// pausedCategories lists the paused categories, by name.
func (a *api) pausedCategories(w http.ResponseWriter, r *http.Request) error {
	list, err := a.store.PausedCategories(r.Context())
	if err != nil {
		return err
	}
	out := pausedListJSON{Paused: make([]pausedCategoryJSON, len(list))}
	for i, p := range list {
		out.Paused[i] = pausedCategoryJSON{Category: p.Category, PausedAt: formatTime(p.PausedAt)}
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// ptr is a pointer to n, for a field JSON leaves out when nil.
func ptr(n int) *int { return &n }
