package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/wire"
	"github.com/taskd/taskd/tasks"
)

// The editorial workflow's parts of the answers: stages, groups (overlap),
// reservations and the results of every stage. Each field is left out of a
// task, an assignment or a result that does not have it, so that answers
// about tasks of the default workflow are as they were before.

// workflowJSON is where a task is in its workflow, beside its claim state.
type workflowJSON struct {
	// Stages are the task's stages in order, and Stage the one it is at;
	// omitted for a task of one stage.
	Stages []string `json:"stages,omitempty"`
	Stage  string   `json:"stage,omitempty"`
	// GroupID (the group's first task) and Overlap (how many results the
	// group asks for), for a task of a group only.
	GroupID int64 `json:"group_id,omitempty"`
	Overlap int   `json:"overlap,omitempty"`
	// ReservedFor and ReservedUntil, while a task sent back is offered to one
	// editor alone (until ReservedUntil, by this process's clock).
	ReservedFor   int64   `json:"reserved_for,omitempty"`
	ReservedUntil *string `json:"reserved_until,omitempty"`
}

func workflowOf(t *tasks.Task) workflowJSON {
	w := workflowJSON{}
	if len(t.Stages) > 0 {
		w.Stages, w.Stage = t.Stages, t.StageName()
	}
	if t.GroupID != 0 {
		w.GroupID, w.Overlap = t.GroupID, t.Overlap
	}
	if t.ReservedFor != 0 && t.ReservedUntil != nil && t.ReservedUntil.After(time.Now()) {
		w.ReservedFor, w.ReservedUntil = t.ReservedFor, formatTimePtr(t.ReservedUntil)
	}
	return w
}

func resultsOf(rs []tasks.Result) []wire.Result {
	out := make([]wire.Result, len(rs))
	for i := range rs {
		out[i] = wire.ResultOf(&rs[i])
	}
	return out
}

// groupJSON is the group of a task that asks for several results.
type groupJSON struct {
	ID      int64           `json:"id"`
	Overlap int             `json:"overlap"`
	Tasks   []groupTaskJSON `json:"tasks"`
	// Done counts the group's done tasks.
	Done int `json:"done"`
	// Agree is whether the decisions of the done tasks' last results are all
	// equal; null while fewer than Overlap are done.
	Agree *bool `json:"agree"`
}

type groupTaskJSON struct {
	ID       int64        `json:"id"`
	Status   tasks.Status `json:"status"`
	EditorID int64        `json:"editor_id,omitempty"`
}

// groupOf describes the group of ts (its tasks, in id order) from the
// decisions of its done tasks (their accepted results', by task id).
func groupOf(groupID int64, overlap int, ts []tasks.Task, decisions map[int64]string) *groupJSON {
	g := &groupJSON{ID: groupID, Overlap: overlap, Tasks: make([]groupTaskJSON, len(ts))}
	done := map[int64]bool{}
	for i, t := range ts {
		g.Tasks[i] = groupTaskJSON{ID: t.ID, Status: t.Status, EditorID: t.EditorID}
		if t.Status == tasks.StatusDone {
			g.Done++
			done[t.ID] = true
		}
	}
	if g.Done >= overlap && overlap > 0 {
		agree, first, seen := true, "", false
		for id, d := range decisions {
			if !done[id] {
				continue
			}
			if seen && d != first {
				agree = false
			}
			first, seen = d, true
		}
		g.Agree = &agree
	}
	return g
}

// assignmentOf returns the JSON of c with its workflow, or nil for no claim:
// for a task with stages, its latest earlier results (each of its stages',
// oldest first, a page of tasks.TaskResultsLimitDefault) and the cursor of
// the older ones, read from the store; nothing is read for a task without
// stages.
func (a *api) assignmentOf(ctx context.Context, c *tasks.Claim) (*assignmentJSON, error) {
	out := assignmentOf(c)
	if out == nil {
		return nil, nil
	}
	t := &c.Task
	if len(t.Stages) > 0 {
		out.Stages, out.Stage = t.Stages, t.StageName()
		page, err := a.store.TaskResults(ctx, tasks.TaskResultsParams{TaskID: t.ID, Own: true})
		if err != nil {
			return nil, err
		}
		earlier := resultsOf(page.Results)
		out.Earlier, out.EarlierMore, out.EarlierBefore = &earlier, &page.More, page.Before
	}
	if t.GroupID != 0 {
		out.GroupID, out.Overlap = t.GroupID, t.Overlap
	}
	return out, nil
}

type assignmentsResponse struct {
	// Assignments are the editor's live claims, oldest first, then its live
	// hedges (hedge true), oldest first.
	Assignments []*assignmentJSON `json:"assignments"`
	// Capacity is how many claims the editor may hold at once.
	Capacity int `json:"capacity"`
}

// assignments answers an editor with its live claims, oldest first, then its
// live hedges, and its capacity (which both take).
func (a *api) assignments(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	if _, err := query(r); err != nil {
		return err
	}
	held, err := a.store.EditorClaims(r.Context(), e.ID)
	if err != nil {
		return err
	}
	hedges, err := a.d.HeldHedges(r.Context(), dispatcher.EditorClaimant(e))
	if err != nil {
		return err
	}
	out := assignmentsResponse{Assignments: make([]*assignmentJSON, 0, len(held.Held)+len(hedges)), Capacity: max(1, e.Capacity)}
	for _, c := range append(held.Held, hedges...) {
		aj, err := a.assignmentOf(r.Context(), c)
		if err != nil {
			return err
		}
		out.Assignments = append(out.Assignments, aj)
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// submission is the dispatcher's submission of a submit request.
func (req *submitRequest) submission() dispatcher.Submission {
	return dispatcher.Submission{Result: req.Result, Decision: req.Decision, Notes: req.Notes}
}

// resultPageJSON is a page of a task's results.
type resultPageJSON struct {
	// Results are oldest first.
	Results []wire.Result `json:"results"`
	// More is set when older results exist.
	More bool `json:"more"`
	// Before is the cursor of the next older page, null without one.
	Before *string `json:"before"`
}

// resultPage reads the page of task's results that q's before and limit ask
// for (own: the task's own only, else its group's too).
func (a *api) resultPage(r *http.Request, task int64, own bool, q map[string]string) (*resultPageJSON, error) {
	limit, err := positiveParam(q["limit"], "limit", tasks.TaskResultsLimitMax)
	if err != nil {
		return nil, err
	}
	before, ok := q["before"]
	if ok && before == "" {
		return nil, errorf(http.StatusUnprocessableEntity, codeInvalid, "before must be a cursor a page of results gave, not empty")
	}
	// A cursor the store did not give is ErrInvalid: 422.
	page, err := a.store.TaskResults(r.Context(), tasks.TaskResultsParams{TaskID: task, Own: own, Before: before, Limit: int(limit)})
	if err != nil {
		return nil, err
	}
	return &resultPageJSON{Results: resultsOf(page.Results), More: page.More, Before: orNull(page.Before)}, nil
}

// taskResults answers with a page of the results of a task, its group's
// included: the latest, or those older than the cursor before.
func (a *api) taskResults(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	q, err := query(r, "before", "limit")
	if err != nil {
		return err
	}
	page, err := a.resultPage(r, id, false, q)
	if err != nil {
		return err
	}
	// Without results: a task without any, or none at all.
	if len(page.Results) == 0 {
		if _, err := a.store.GetTask(r.Context(), id); errors.Is(err, tasks.ErrNotFound) {
			return errorf(http.StatusNotFound, codeNotFound, "task %d does not exist", id)
		} else if err != nil {
			return err
		}
	}
	a.writeJSON(w, r, http.StatusOK, page)
	return nil
}

// holdsHedge reports whether ref is a live hedge of e (see tasks.Hedge): read
// only for a ref that is not e's claim, and nothing is read when none of e's
// categories hedges.
func (a *api) holdsHedge(ctx context.Context, e *tasks.Editor, ref dispatcher.ClaimRef) (bool, error) {
	hedges, err := a.d.HeldHedges(ctx, dispatcher.EditorClaimant(e))
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(hedges, func(c *tasks.Claim) bool { return c.Task.ID == ref.TaskID && c.Fence == ref.Fence }), nil
}

// earlier answers an editor with a page of the earlier results of a task it
// holds under the query's fence, as its claim or its hedge: the latest, or
// those older than the cursor before (an assignment's earlier_before).
func (a *api) earlier(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	id, err := pathID(r, "task")
	if err != nil {
		return err
	}
	q, err := query(r, "fence", "before", "limit")
	if err != nil {
		return err
	}
	if q["fence"] == "" {
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "fence is required")
	}
	fence, err := positiveParam(q["fence"], "fence", math.MaxInt64)
	if err != nil {
		return err
	}
	ref := dispatcher.ClaimRef{TaskID: id, Fence: fence}
	t, err := a.store.GetTask(r.Context(), id)
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return errorf(http.StatusNotFound, codeNotFound, "task %d does not exist", id)
	case err != nil:
		return err
	case t.Status != tasks.StatusAssigned || t.Fence != fence || t.Holder != e.Holder():
		hedged, err := a.holdsHedge(r.Context(), e, ref)
		if err != nil {
			return err
		}
		if !hedged {
			return a.refused(r, e, ref, tasks.ErrStale)
		}
	}
	page, err := a.resultPage(r, id, true, q)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, page)
	return nil
}
