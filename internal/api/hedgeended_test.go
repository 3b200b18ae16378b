package api_test

import (
	"net/http"
	"testing"
)

// A hedge that lapsed and that the task's next hedge replaced, at the same
// fence, was its editor's all the same: its late writes are 409 stale_fence,
// not 403, as any claim the editor once held.
func TestHedgeReplacedIsStaleAPI(t *testing.T) {
	t.Parallel()
	b, _, bob, _, hedge := hedgeAPI(t)
	carol := b.editor(t, "carol", "news")
	b.exec(t, `UPDATE task_hedges SET expires_at = NOW(3) - INTERVAL 1 SECOND WHERE task_id = ?`, hedge.Task.ID)
	var next hedgeAssignment
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", carol.Token, ""), http.StatusOK, &next)
	if !next.Hedge || next.Task.ID != hedge.Task.ID || next.Fence != hedge.Fence {
		t.Fatalf("carol's assignment = %+v, want a hedge of task %d at fence %d", next, hedge.Task.ID, hedge.Fence)
	}
	wantError(t, b.do(t, "POST", submitPath(hedge.Task.ID, "heartbeat"), bob.Token, mustJSON(t, map[string]any{"fence": hedge.Fence})),
		http.StatusConflict, "stale_fence")
	wantError(t, b.do(t, "POST", submitPath(hedge.Task.ID, "submit"), bob.Token,
		mustJSON(t, map[string]any{"fence": hedge.Fence, "result": map[string]string{"by": "bob"}})), http.StatusConflict, "stale_fence")
	// Never held by an editor that was never offered it: still 403.
	dan := b.editor(t, "dan", "news")
	wantError(t, b.do(t, "POST", submitPath(hedge.Task.ID, "heartbeat"), dan.Token, mustJSON(t, map[string]any{"fence": hedge.Fence})),
		http.StatusForbidden, "forbidden")
}
