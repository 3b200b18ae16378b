package api_test

import (
	"fmt"
	"net/http"
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
