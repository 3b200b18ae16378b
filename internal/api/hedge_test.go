package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// hedgeAssignment is an assignment with its hedge flag.
type hedgeAssignment struct {
	assignment
	Hedge bool `json:"hedge"`
}

// hedgeAPI has the category news hedging tasks due within 10m whose holder
// has been silent for 2m, a task due in 5m held by ann (silent), offered to
// bob as a hedge.
func hedgeAPI(t *testing.T) (b *bundle, ann, bob editorInfo, held, hedge hedgeAssignment) {
	t.Helper()
	wf := map[string]tasks.Workflow{"news": {Hedge: tasks.Hedge{BeforeDue: 10 * time.Minute, InactiveFor: 2 * time.Minute}}}
	b = setup(t, setupOpts{storeCfg: store.Config{Workflows: wf}, dispatcher: dispatcher.Config{Workflows: wf}})
	ann, bob = b.editor(t, "ann", "news"), b.editor(t, "bob", "news")
	b.add(t, newTask{Category: "news", Title: "near", DueAt: time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)})
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", ann.Token, ""), http.StatusOK, &held)
	if held.Hedge {
		t.Fatal("ann's own claim says hedge")
	}
	if _, err := b.db.ExecContext(t.Context(), `UPDATE tasks SET assigned_at = NOW(3) - INTERVAL 3 MINUTE WHERE id = ?`, held.Task.ID); err != nil {
		t.Fatal(err)
	}
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", bob.Token, ""), http.StatusOK, &hedge)
	if !hedge.Hedge || hedge.Task.ID != held.Task.ID || hedge.Fence != held.Fence+1 {
		t.Fatalf("bob's assignment = %+v, want a hedge of task %d with fence %d", hedge, held.Task.ID, held.Fence+1)
	}
	return b, ann, bob, held, hedge
}

// GET /v1/assignments lists a live hedge after the editor's claims, with
// hedge true.
func TestHedgeListedAPI(t *testing.T) {
	t.Parallel()
	b, _, bob, _, hedge := hedgeAPI(t)
	var got struct {
		Assignments []hedgeAssignment `json:"assignments"`
		Capacity    int               `json:"capacity"`
	}
	wantJSON(t, b.do(t, "GET", "/v1/assignments", bob.Token, ""), http.StatusOK, &got)
	if len(got.Assignments) != 1 || !got.Assignments[0].Hedge || got.Assignments[0].Task.ID != hedge.Task.ID || got.Assignments[0].Fence != hedge.Fence {
		t.Fatalf("bob's assignments = %+v, want his hedge of task %d fence %d", got.Assignments, hedge.Task.ID, hedge.Fence)
	}
}

func submitPath(id int64, what string) string {
	return fmt.Sprintf("/v1/assignments/%d/%s", id, what)
}

// The hedger submits first: the holder's submit, heartbeat and release are
// refused with 409 done_by_other, not stale_fence.
func TestHedgeHedgerWinsAPI(t *testing.T) {
	t.Parallel()
	b, ann, bob, held, hedge := hedgeAPI(t)
	wantStatus(t, b.do(t, "POST", submitPath(hedge.Task.ID, "heartbeat"), bob.Token, mustJSON(t, map[string]any{"fence": hedge.Fence})), http.StatusOK)
	wantStatus(t, b.do(t, "POST", submitPath(hedge.Task.ID, "submit"), bob.Token,
		mustJSON(t, map[string]any{"fence": hedge.Fence, "result": map[string]string{"by": "bob"}})), http.StatusOK)
	for _, what := range []string{"submit", "heartbeat", "release"} {
		body := map[string]any{"fence": held.Fence}
		if what == "submit" {
			body["result"] = map[string]string{"by": "ann"}
		}
		wantError(t, b.do(t, "POST", submitPath(held.Task.ID, what), ann.Token, mustJSON(t, body)), http.StatusConflict, "done_by_other")
	}
}

// The holder submits first: the hedger's submit and heartbeat are refused
// with 409 done_by_other.
func TestHedgeHolderWinsAPI(t *testing.T) {
	t.Parallel()
	b, ann, bob, held, hedge := hedgeAPI(t)
	wantStatus(t, b.do(t, "POST", submitPath(held.Task.ID, "submit"), ann.Token,
		mustJSON(t, map[string]any{"fence": held.Fence, "result": map[string]string{"by": "ann"}})), http.StatusOK)
	wantError(t, b.do(t, "POST", submitPath(hedge.Task.ID, "submit"), bob.Token,
		mustJSON(t, map[string]any{"fence": hedge.Fence, "result": map[string]string{"by": "bob"}})), http.StatusConflict, "done_by_other")
	wantError(t, b.do(t, "POST", submitPath(hedge.Task.ID, "heartbeat"), bob.Token, mustJSON(t, map[string]any{"fence": hedge.Fence})), http.StatusConflict, "done_by_other")
	if n := b.count(t, `SELECT COUNT(*) FROM task_results WHERE task_id = ?`, held.Task.ID); n != 1 {
		t.Fatalf("%d results, want 1", n)
	}
}

// A hedge released: its later writes are stale_fence (it was the editor's),
// and the holder keeps its claim.
func TestHedgeReleasedAPI(t *testing.T) {
	t.Parallel()
	b, ann, bob, held, hedge := hedgeAPI(t)
	wantStatus(t, b.do(t, "POST", submitPath(hedge.Task.ID, "release"), bob.Token, mustJSON(t, map[string]any{"fence": hedge.Fence})), http.StatusNoContent)
	wantError(t, b.do(t, "POST", submitPath(hedge.Task.ID, "heartbeat"), bob.Token, mustJSON(t, map[string]any{"fence": hedge.Fence})), http.StatusConflict, "stale_fence")
	wantStatus(t, b.do(t, "POST", submitPath(held.Task.ID, "submit"), ann.Token,
		mustJSON(t, map[string]any{"fence": held.Fence, "result": map[string]string{"by": "ann"}})), http.StatusOK)
}

// A hedge of a task at its second stage carries the same earlier results as
// the holder's assignment, in POST /v1/assignments/next and GET
// /v1/assignments, and GET /v1/assignments/{task}/earlier answers the hedge's
// fence.
func TestHedgeOfStagedTaskHasEarlierAPI(t *testing.T) {
	t.Parallel()
	wf := map[string]tasks.Workflow{"desk": {Stages: []string{"edit", "review"},
		Hedge: tasks.Hedge{BeforeDue: 10 * time.Minute, InactiveFor: 2 * time.Minute}}}
	b := setup(t, setupOpts{storeCfg: store.Config{Workflows: wf}, dispatcher: dispatcher.Config{Workflows: wf}})
	ann, cy, dan := b.editor(t, "ann", "desk"), b.editor(t, "cy", "desk"), b.editor(t, "dan", "desk")
	b.add(t, newTask{Category: "desk", Title: "near", DueAt: time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)})
	var edit flowAssignment
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", ann.Token, ""), http.StatusOK, &edit)
	wantStatus(t, b.do(t, "POST", submitPath(edit.Task.ID, "submit"), ann.Token,
		mustJSON(t, map[string]any{"fence": edit.Fence, "result": map[string]string{"text": "edited"}})), http.StatusOK)
	var review flowAssignment
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", cy.Token, ""), http.StatusOK, &review)
	if review.Task.ID != edit.Task.ID || review.Stage != "review" || review.Earlier == nil || len(*review.Earlier) != 1 {
		t.Fatalf("cy's assignment = %+v, want the review of task %d with ann's edit", review, edit.Task.ID)
	}
	if _, err := b.db.ExecContext(t.Context(), `UPDATE tasks SET assigned_at = NOW(3) - INTERVAL 3 MINUTE WHERE id = ?`, review.Task.ID); err != nil {
		t.Fatal(err)
	}
	var hedge struct {
		flowAssignment
		Hedge bool `json:"hedge"`
	}
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", dan.Token, ""), http.StatusOK, &hedge)
	if !hedge.Hedge || hedge.Task.ID != review.Task.ID || hedge.Fence != review.Fence+1 {
		t.Fatalf("dan's assignment = %+v, want a hedge of task %d", hedge, review.Task.ID)
	}
	same := func(what string, got flowAssignment) {
		t.Helper()
		if got.Stage != "review" || strings.Join(got.Stages, ",") != "edit,review" || got.Earlier == nil ||
			len(*got.Earlier) != 1 || string((*got.Earlier)[0].Result) != string((*review.Earlier)[0].Result) ||
			(*got.Earlier)[0].Stage != "edit" || got.EarlierMore == nil || *got.EarlierMore {
			t.Errorf("%s = stage %q of %v, earlier %v (more %v); want the review stage with ann's edit, as cy's: %v",
				what, got.Stage, got.Stages, got.Earlier, got.EarlierMore, *review.Earlier)
		}
	}
	same("dan's hedge", hedge.flowAssignment)
	var listed struct {
		Assignments []struct {
			flowAssignment
			Hedge bool `json:"hedge"`
		} `json:"assignments"`
		Capacity int `json:"capacity"`
	}
	wantJSON(t, b.do(t, "GET", "/v1/assignments", dan.Token, ""), http.StatusOK, &listed)
	if len(listed.Assignments) != 1 || !listed.Assignments[0].Hedge {
		t.Fatalf("dan's assignments = %+v, want his hedge", listed.Assignments)
	}
	same("dan's listed hedge", listed.Assignments[0].flowAssignment)
	var page struct {
		Results []resultOut `json:"results"`
		More    bool        `json:"more"`
		Before  *string     `json:"before"`
	}
	wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/assignments/%d/earlier?fence=%d", hedge.Task.ID, hedge.Fence), dan.Token, ""), http.StatusOK, &page)
	if len(page.Results) != 1 || page.Results[0].Stage != "edit" {
		t.Errorf("dan's earlier page = %+v, want ann's edit", page.Results)
	}
	// A fence dan never held is still refused.
	wantStatus(t, b.do(t, "GET", fmt.Sprintf("/v1/assignments/%d/earlier?fence=%d", hedge.Task.ID, hedge.Fence+1), dan.Token, ""), http.StatusForbidden)
}
