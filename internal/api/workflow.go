package api

import (
	"context"
	"net/http"
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

// groupOf describes the group of ts (its tasks, in id order) from its results
// (every result of the group, oldest first).
func groupOf(groupID int64, overlap int, ts []tasks.Task, results []tasks.Result) *groupJSON {
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
		last := map[int64]string{} // each done task's last decision
		for _, r := range results {
			if done[r.TaskID] {
				last[r.TaskID] = r.Decision
			}
		}
		agree, first, seen := true, "", false
		for _, d := range last {
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
// for a task with stages, its earlier results (each of its stages', oldest
// first), read from the store; nothing is read for a task without stages.
func (a *api) assignmentOf(ctx context.Context, c *tasks.Claim) (*assignmentJSON, error) {
	out := assignmentOf(c)
	if out == nil {
		return nil, nil
	}
	t := &c.Task
	if len(t.Stages) > 0 {
		out.Stages, out.Stage = t.Stages, t.StageName()
		rs, err := a.store.TaskResults(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		earlier := []wire.Result{}
		for i := range rs {
			if rs[i].TaskID == t.ID {
				earlier = append(earlier, wire.ResultOf(&rs[i]))
			}
		}
		out.Earlier = &earlier
	}
	if t.GroupID != 0 {
		out.GroupID, out.Overlap = t.GroupID, t.Overlap
	}
	return out, nil
}

type assignmentsResponse struct {
	// Assignments are the editor's live claims, oldest first.
	Assignments []*assignmentJSON `json:"assignments"`
	// Capacity is how many claims the editor may hold at once.
	Capacity int `json:"capacity"`
}

// assignments answers an editor with its live claims, oldest first, and its
// capacity.
func (a *api) assignments(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	if _, err := query(r); err != nil {
		return err
	}
	held, err := a.store.EditorClaims(r.Context(), e.ID)
	if err != nil {
		return err
	}
	out := assignmentsResponse{Assignments: make([]*assignmentJSON, 0, len(held.Held)), Capacity: max(1, e.Capacity)}
	for _, c := range held.Held {
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
