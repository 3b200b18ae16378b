package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

type nextRequest struct {
	WaitMS *int64 `json:"wait_ms"`
}

// next answers with the editor's assignment: the one it holds, a new one, or
// 204 when none came within wait_ms, or when the editor opened more than
// Config.MaxPollsPerEditor long polls in this process since (see polls).
func (a *api) next(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	var req nextRequest
	if _, err := deep(r, func() (struct{}, error) { return struct{}{}, decode(w, r, &req, true) }); err != nil {
		return err
	}
	var wait time.Duration
	if req.WaitMS != nil {
		if *req.WaitMS < 0 {
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "wait_ms must not be negative")
		}
		wait = a.maxWait
		if *req.WaitMS < a.maxWait.Milliseconds() {
			wait = time.Duration(*req.WaitMS) * time.Millisecond
		}
	}
	r, cancel := a.withWait(r, wait)
	defer cancel()
	// A replaced poll's end is not the request's: its answer is built
	// under the request's context.
	answer := r.Context()
	if wait > 0 {
		ctx, end := context.WithCancelCause(r.Context())
		defer end(nil)
		defer a.polls.hold(e.ID, end)()
		r = r.WithContext(ctx)
		a.log.DebugContext(ctx, "long poll held", "editor_id", e.ID, "wait", wait)
	}
	// The categories whose instructions the editor confirmed: read under
	// the poll's context, so a poll replaced meanwhile ends as below.
	c := dispatcher.EditorClaimant(e)
	var claim *tasks.Claim
	var err error
	if c.Categories, err = a.confirmedCategories(r.Context(), w, e); err == nil {
		c.Categories, err = a.goldUnpaused(r.Context(), e, c.Categories)
	}
	if err == nil {
		if gold := a.goldDraw(c.Categories); len(gold) > 0 {
			claim, err = a.claimGold(r.Context(), c, gold)
		}
	}
	if err == nil && claim == nil {
		claim, err = a.d.Next(r.Context(), c, wait)
	}
	err = timedOut(r.Context(), err)
	if errors.Is(err, dispatcher.ErrNoTask) || (err != nil && pollEnded(context.Cause(r.Context()))) {
		// A claim made as the poll ended was given back at once (see
		// dispatcher.Dispatcher.Next): nothing is left behind.
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	out, err := a.assignmentOf(answer, claim)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// fenceField is the fence every write about a claim carries.
type fenceField struct {
	Fence *int64 `json:"fence"`
}

func (f *fenceField) fence() *int64 { return f.Fence }

type heartbeatRequest struct {
	fenceField
	activeField
}

type heartbeatResponse struct {
	LeaseExpiresAt string `json:"lease_expires_at"`
}

// heartbeat extends the lease of the editor's claim.
func (a *api) heartbeat(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	var req heartbeatRequest
	ref, err := claimRequest(w, r, &req)
	if err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	c := dispatcher.EditorClaimant(e)
	expires, err := a.d.Heartbeat(r.Context(), c, ref)
	if errors.Is(err, tasks.ErrStale) {
		// Maybe a hedge's (see hedged).
		if until, herr := a.d.HeartbeatHedge(r.Context(), c, ref); !errors.Is(herr, dispatcher.ErrNotHedge) {
			expires, err = until, hedged(ref, herr)
		}
	}
	if err != nil {
		return a.refused(r, e, ref, err)
	}
	a.countBeat(r.Context(), e, ref, req.activeField)
	a.writeJSON(w, r, http.StatusOK, heartbeatResponse{LeaseExpiresAt: formatTime(expires)})
	return nil
}

type submitRequest struct {
	fenceField
	activeField
	Result json.RawMessage `json:"result"`
	// Decision is approve (the default) or send_back at a later stage, or
	// any other word kept with the result (see tasks.DecisionApprove);
	// Notes are the submitter's, such as a reviewer's to the editor.
	Decision string `json:"decision"`
	Notes    string `json:"notes"`
}

type submitResponse struct {
	Next *assignmentJSON `json:"next"`
}

// submit commits the editor's result and answers with its next assignment,
// or null when nothing is claimable now.
func (a *api) submit(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	var req submitRequest
	ref, err := claimRequest(w, r, &req)
	if err != nil {
		return err
	}
	if len(req.Result) == 0 || string(req.Result) == "null" {
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "result is required")
	}
	if err := req.check(); err != nil {
		return err
	}
	c := dispatcher.EditorClaimant(e)
	if c.Categories, err = a.confirmedCategories(r.Context(), w, e); err != nil {
		return err
	}
	if c.Categories, err = a.goldUnpaused(r.Context(), e, c.Categories); err != nil {
		return err
	}
	if len(a.gold) > 0 {
		if done, err := a.submitGold(w, r, e, c, ref, &req); done {
			return err
		}
	}
	// A next claim drawn to be a gold copy is made once the submit is
	// committed on its own (a claimant without categories claims nothing).
	sc, gold := c, a.goldDraw(c.Categories)
	if len(gold) > 0 {
		sc.Categories = nil
	}
	next, err := a.d.SubmitWith(r.Context(), sc, ref, req.submission())
	if errors.Is(err, tasks.ErrStale) && len(a.gold) == 0 {
		// Maybe a gold copy's, which the store refuses as an ordinary
		// submit: scored without this process's rules (see submitGold).
		if done, gerr := a.submitGold(w, r, e, c, ref, &req); done {
			return gerr
		}
	}
	if errors.Is(err, tasks.ErrStale) && !errors.Is(err, tasks.ErrDoneByOther) {
		// Maybe a hedge's (see hedged).
		if hnext, herr := a.d.SubmitHedge(r.Context(), sc, ref, req.submission()); !errors.Is(herr, dispatcher.ErrNotHedge) {
			next, err = hnext, hedged(ref, herr)
		}
	}
	if err != nil {
		return a.refused(r, e, ref, err)
	}
	if len(gold) > 0 {
		if next, err = a.nextAfterSubmit(r.Context(), c, gold); err != nil {
			a.log.WarnContext(r.Context(), "find next assignment after submit", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
			next = nil
		}
	}
	a.log.DebugContext(r.Context(), "submitted", "editor_id", e.ID, "task_id", ref.TaskID, "fence", ref.Fence, "decision", req.Decision)
	a.recordTime(r.Context(), e, ref, tasks.OutcomeSubmitted, req.activeField)
	out, err := a.assignmentOf(r.Context(), next)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, submitResponse{Next: out})
	return nil
}

type releaseRequest struct {
	fenceField
	activeField
	Reason string `json:"reason"`
	Skip   bool   `json:"skip"`
}

// release gives the editor's claim back to the pool now; with skip, the
// editor is not offered the task again for a while.
func (a *api) release(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	var req releaseRequest
	ref, err := claimRequest(w, r, &req)
	if err != nil {
		return err
	}
	if err := checkReason(req.Reason); err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	release := a.d.Release
	if req.Skip {
		release = a.d.Skip
	}
	c := dispatcher.EditorClaimant(e)
	err = release(r.Context(), c, ref, req.Reason)
	if errors.Is(err, tasks.ErrStale) {
		// Maybe a hedge's (see hedged).
		if herr := a.d.ReleaseHedge(r.Context(), c, ref, req.Skip); !errors.Is(herr, dispatcher.ErrNotHedge) {
			err = hedged(ref, herr)
		}
	}
	if err != nil {
		return a.refused(r, e, ref, err)
	}
	a.log.DebugContext(r.Context(), "released", "editor_id", e.ID, "task_id", ref.TaskID, "fence", ref.Fence, "skip", req.Skip)
	a.recordTime(r.Context(), e, ref, tasks.OutcomeReleased, req.activeField)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// claimRequest reads the task id from the path and the body into req, and
// returns the claim they name.
func claimRequest(w http.ResponseWriter, r *http.Request, req interface{ fence() *int64 }) (dispatcher.ClaimRef, error) {
	id, err := pathID(r, "task")
	if err != nil {
		return dispatcher.ClaimRef{}, err
	}
	if err := decode(w, r, req, false); err != nil {
		return dispatcher.ClaimRef{}, err
	}
	fence := req.fence()
	if fence == nil || *fence < 1 {
		return dispatcher.ClaimRef{}, errorf(http.StatusUnprocessableEntity, codeInvalid, "fence must be the positive fence of your assignment")
	}
	return dispatcher.ClaimRef{TaskID: id, Fence: *fence}, nil
}

// hedged is the answer to a refused write about ref that named a hedge the
// editor held (see tasks.Hedge): its write was refused for a reason of its own,
// which refused does not look up as for a claim.
func hedged(ref dispatcher.ClaimRef, err error) error {
	switch {
	case errors.Is(err, tasks.ErrDoneByOther):
		return errorf(http.StatusConflict, codeDoneByOther,
			"task %d was submitted by the editor who held it before your offer (fence %d) came through: your result is not kept; ask for your next assignment", ref.TaskID, ref.Fence)
	case errors.Is(err, tasks.ErrCancelled):
		return errorf(http.StatusConflict, codeTaskCancelled,
			"task %d was cancelled while you held it (fence %d): nothing you send about it is kept; ask for your next assignment", ref.TaskID, ref.Fence)
	case errors.Is(err, tasks.ErrStale):
		return errorf(http.StatusConflict, codeStaleFence,
			"task %d: your offer with fence %d is gone (its lease passed, you released it, or the task moved on); ask for your next assignment", ref.TaskID, ref.Fence)
	}
	return err
}

// refused explains a refused write about ref (see "Whose claim" in the
// package documentation). Errors other than tasks.ErrStale pass through.
func (a *api) refused(r *http.Request, e *tasks.Editor, ref dispatcher.ClaimRef, err error) error {
	if !errors.Is(err, tasks.ErrStale) {
		return err
	}
	holder, herr := a.store.ClaimHolder(r.Context(), ref.TaskID, ref.Fence)
	switch {
	case herr == nil && holder == e.Holder() && errors.Is(err, tasks.ErrDoneByOther):
		a.log.DebugContext(r.Context(), "claim done by another refused", "editor_id", e.ID, "task_id", ref.TaskID, "fence", ref.Fence)
		return errorf(http.StatusConflict, codeDoneByOther,
			"task %d was also offered to another editor near its due date, who submitted it first (your fence %d): your result is not kept; ask for your next assignment", ref.TaskID, ref.Fence)
	case herr == nil && holder == e.Holder() && errors.Is(err, tasks.ErrCancelled):
		a.log.DebugContext(r.Context(), "cancelled claim refused", "editor_id", e.ID, "task_id", ref.TaskID, "fence", ref.Fence)
		return errorf(http.StatusConflict, codeTaskCancelled,
			"task %d was cancelled while you held it (fence %d): nothing you send about it is kept; ask for your next assignment", ref.TaskID, ref.Fence)
	case herr == nil && holder == e.Holder():
		a.log.DebugContext(r.Context(), "stale claim refused", "editor_id", e.ID, "task_id", ref.TaskID, "fence", ref.Fence)
		return errorf(http.StatusConflict, codeStaleFence,
			"task %d: your claim with fence %d is gone (its lease passed, or it was released, submitted or revoked); ask for your next assignment", ref.TaskID, ref.Fence)
	case herr != nil && !errors.Is(herr, tasks.ErrNotFound):
		return herr
	}
	// Not a claim this editor ever held.
	if _, gerr := a.store.GetTask(r.Context(), ref.TaskID); errors.Is(gerr, tasks.ErrNotFound) {
		return errorf(http.StatusNotFound, codeNotFound, "task %d does not exist", ref.TaskID)
	} else if gerr != nil {
		return gerr
	}
	return errorf(http.StatusForbidden, codeForbidden, "task %d with fence %d was never your claim", ref.TaskID, ref.Fence)
}

// pathID parses the positive integer id in the path wildcard name.
func pathID(r *http.Request, name string) (int64, error) {
	s := r.PathValue(name)
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 || s[0] == '+' {
		return 0, errorf(http.StatusBadRequest, codeBadRequest, "%s id must be a positive integer, got %q", name, s)
	}
	return id, nil
}
