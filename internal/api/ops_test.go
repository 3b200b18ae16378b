package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// exec runs raw SQL, to arrange states such as a dead task.
func (b *bundle) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	if _, err := b.db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// count runs a COUNT query.
func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.GetContext(context.Background(), &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// makeDead makes tasks dead as a worker's last failure does.
func (b *bundle) makeDead(t *testing.T, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		b.exec(t, `UPDATE tasks SET status = 'dead', fence = fence + 1, holder = 'w1', attempts = max_attempts,
			done_at = NOW(3), last_error = 'boom' WHERE id = ?`, id)
	}
}

func TestRequeueAndCancelOneTask(t *testing.T) {
	t.Parallel()
	// A poll interval far longer than the test: only a wake-up can end the wait.
	b := setup(t, setupOpts{dispatcher: dispatcher.Config{PollInterval: time.Hour}})
	e := b.editor(t, "ada", "news")
	ids := b.addN(t, "news", 3)
	dead, pending, held := ids[0], ids[1], ids[2]
	b.makeDead(t, dead)
	b.exec(t, `UPDATE tasks SET status = 'cancelled' WHERE id = ?`, pending)
	a := b.next(t, e.Token) // the only claimable task
	if a.Task.ID != held {
		t.Fatalf("claimed %d, want %d", a.Task.ID, held)
	}
	b.exec(t, `UPDATE tasks SET status = 'pending' WHERE id = ?`, pending)
	path := func(id int64, op string) string { return fmt.Sprintf("/v1/admin/tasks/%d/%s", id, op) }

	before := b.snapshot(t)
	for _, c := range []struct {
		name, path, token, body string
		status                  int
		code, says              string
	}{
		{"requeue pending", path(pending, "requeue"), adminToken, "", 409, "wrong_status", "is pending, not dead"},
		{"requeue assigned", path(held, "requeue"), adminToken, "", 409, "wrong_status", "is assigned, not dead"},
		{"cancel dead", path(dead, "cancel"), adminToken, "", 409, "wrong_status", "is dead: it has ended"},
		{"requeue unknown", path(held+100, "requeue"), adminToken, "", 404, "not_found", "does not exist"},
		{"cancel unknown", path(held+100, "cancel"), adminToken, "", 404, "not_found", "does not exist"},
		{"bad id", "/v1/admin/tasks/x/requeue", adminToken, "", 400, "bad_request", "positive integer"},
		{"no token", path(dead, "requeue"), "", "", 401, "unauthorized", ""},
		{"editor token", path(dead, "requeue"), e.Token, "", 403, "forbidden", ""},
		{"editor token, cancel", path(pending, "cancel"), e.Token, "", 403, "forbidden", ""},
		{"unknown field", path(dead, "requeue"), adminToken, `{"why":"x"}`, 400, "bad_request", "unknown field"},
		{"malformed", path(pending, "cancel"), adminToken, `{"reason":`, 400, "bad_request", "malformed"},
		{"reason too long", path(dead, "requeue"), adminToken, mustJSON(t, map[string]string{"reason": strings.Repeat("é", 1025)}), 422, "invalid", "reason"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := wantError(t, b.do(t, "POST", c.path, c.token, c.body), c.status, c.code)
			if !strings.Contains(msg, c.says) {
				t.Errorf("message %q does not say %q", msg, c.says)
			}
		})
	}
	b.unchanged(t, before)

	// Cancel the pending task: nothing is claimable now.
	wantStatus(t, b.do(t, "POST", path(pending, "cancel"), adminToken, `{"reason":"duplicate"}`), http.StatusNoContent)
	if task := b.task(t, pending); task.Status != tasks.StatusCancelled || task.DoneAt == nil {
		t.Errorf("cancelled task: %+v", task)
	}
	msg := wantError(t, b.do(t, "POST", path(pending, "cancel"), adminToken, ""), 409, "wrong_status")
	if !strings.Contains(msg, "is cancelled") {
		t.Errorf("second cancel: %q does not name the status", msg)
	}

	// A second editor waits for news; the requeue wakes it with the dead task.
	bob := b.editor(t, "bob", "news")
	got := make(chan response, 1)
	go func() {
		res, err := b.doCtx(context.Background(), "POST", "/v1/assignments/next", bob.Token, `{"wait_ms":60000}`)
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	testenv.Eventually(t, 20*time.Second, "bob waits", func() bool { return b.d.Stats().Waiting > 0 })
	wantStatus(t, b.do(t, "POST", path(dead, "requeue"), adminToken, `{"reason":"parser fixed"}`), http.StatusNoContent)
	var ba assignment
	wantJSON(t, <-got, http.StatusOK, &ba)
	if ba.Task.ID != dead {
		t.Errorf("bob got task %d, want %d", ba.Task.ID, dead)
	}
	if task := b.task(t, dead); task.Attempts != 1 || task.LastError != "boom" {
		t.Errorf("requeued task: %+v, want attempts reset (1 after bob's claim)", task)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE task_id = ? AND kind = 'requeued' AND detail = 'parser fixed'`, dead); n != 1 {
		t.Errorf("%d requeued events with the reason, want 1", n)
	}
	// Nothing is left for a third editor.
	cy := b.editor(t, "cy", "news")
	wantStatus(t, b.do(t, "POST", "/v1/assignments/next", cy.Token, ""), http.StatusNoContent)

	var st struct {
		ByStatus map[string]int64 `json:"by_status"`
	}
	res := b.do(t, "GET", "/v1/stats", adminToken, "")
	if res.status != 200 {
		t.Fatalf("stats: %d %s", res.status, res.body)
	}
	if err := json.Unmarshal(res.body, &st); err != nil {
		t.Fatal(err)
	}
	if st.ByStatus["cancelled"] != 1 || len(st.ByStatus) != len(tasks.Statuses()) {
		t.Errorf("stats by status = %v, want every status and 1 cancelled", st.ByStatus)
	}
}

func TestCancelHeldTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ada := b.editor(t, "ada", "news")
	bob := b.editor(t, "bob", "news")
	ids := b.addN(t, "news", 2)
	a := b.next(t, ada.Token)
	held := a.Task.ID
	other := ids[0] + ids[1] - held
	claim := func(op string) string { return fmt.Sprintf("/v1/assignments/%d/%s", held, op) }
	fence := mustJSON(t, map[string]any{"fence": a.Fence})

	wantStatus(t, b.do(t, "POST", fmt.Sprintf("/v1/admin/tasks/%d/cancel", held), adminToken, `{"reason":"withdrawn"}`), http.StatusNoContent)
	task := b.task(t, held)
	if task.Status != tasks.StatusCancelled || task.Fence != a.Fence || task.EditorID != 0 {
		t.Fatalf("cancelled task: %+v, want cancelled at fence %d, held by no editor", task, a.Fence)
	}
	evs := b.history(t, held)
	if e := evs[len(evs)-1]; e.Kind != tasks.EventCancelled || e.Fence != a.Fence || e.Holder != fmt.Sprintf("editor:%d", ada.ID) ||
		e.Detail != "by admin: withdrawn" {
		t.Errorf("last event %+v, want cancelled at the claim's fence %d, ada's, by admin", e, a.Fence)
	}

	// Whatever ada still sends about the claim is refused, saying why, and
	// changes nothing; bob, who never held it, is told so.
	before := b.snapshot(t)
	for _, c := range []struct {
		name, path, token, body string
		status                  int
		code                    string
	}{
		{"heartbeat", claim("heartbeat"), ada.Token, fence, 409, "task_cancelled"},
		{"submit", claim("submit"), ada.Token, mustJSON(t, map[string]any{"fence": a.Fence, "result": map[string]bool{"ok": true}}), 409, "task_cancelled"},
		{"release", claim("release"), ada.Token, fence, 409, "task_cancelled"},
		{"another editor", claim("heartbeat"), bob.Token, fence, 403, "forbidden"},
		{"cancel again", fmt.Sprintf("/v1/admin/tasks/%d/cancel", held), adminToken, "", 409, "wrong_status"},
	} {
		msg := wantError(t, b.do(t, "POST", c.path, c.token, c.body), c.status, c.code)
		if c.code == "task_cancelled" && !strings.Contains(msg, "cancelled") {
			t.Errorf("%s: message %q does not say the task was cancelled", c.name, msg)
		}
	}
	b.unchanged(t, before)

	// ada moves on to the other task.
	if n := b.next(t, ada.Token); n.Task.ID != other {
		t.Errorf("ada's next is task %d, want %d", n.Task.ID, other)
	}
}

func TestBulkRequeueAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.addN(t, "bulk", 250)
	others := b.addN(t, "other", 5)
	b.makeDead(t, ids[:120]...)
	b.makeDead(t, others...)

	before := b.snapshot(t)
	for _, c := range []struct {
		name, token, path, body string
		status                  int
		code                    string
	}{
		{"empty filter", adminToken, "/v1/admin/tasks/requeue", `{}`, 422, "invalid"},
		{"only a limit", adminToken, "/v1/admin/tasks/cancel", `{"limit":10}`, 422, "invalid"},
		{"limit too large", adminToken, "/v1/admin/tasks/requeue", `{"category":"bulk","limit":10001}`, 422, "invalid"},
		{"negative limit", adminToken, "/v1/admin/tasks/cancel", `{"category":"bulk","limit":-1}`, 422, "invalid"},
		{"bad time", adminToken, "/v1/admin/tasks/requeue", `{"category":"bulk","created_before":"yesterday"}`, 422, "invalid"},
		{"year 0", adminToken, "/v1/admin/tasks/requeue", `{"category":"bulk","created_before":"0000-01-01T00:00:00Z"}`, 422, "invalid"},
		{"year 1", adminToken, "/v1/admin/tasks/cancel", `{"category":"bulk","created_before":"0001-01-01T00:00:00Z"}`, 422, "invalid"},
		{"year 9999 and a bit", adminToken, "/v1/admin/tasks/cancel", `{"category":"bulk","created_before":"9999-12-31T23:59:59.9999Z"}`, 422, "invalid"},
		{"bad category", adminToken, "/v1/admin/tasks/cancel", `{"category":" bulk"}`, 422, "invalid"},
		{"bad id", adminToken, "/v1/admin/tasks/cancel", `{"ids":[0]}`, 422, "invalid"},
		{"unknown field", adminToken, "/v1/admin/tasks/requeue", `{"category":"bulk","state":"dead"}`, 400, "bad_request"},
		{"a status a requeue does not start from", adminToken, "/v1/admin/tasks/requeue", `{"category":"bulk","status":"pending"}`, 422, "invalid"},
		{"a status a cancel does not start from", adminToken, "/v1/admin/tasks/cancel", `{"category":"bulk","status":"dead"}`, 422, "invalid"},
		{"no body", adminToken, "/v1/admin/tasks/requeue", ``, 400, "bad_request"},
		{"ids not an array", adminToken, "/v1/admin/tasks/cancel", `{"ids":5}`, 400, "bad_request"},
		{"no token", "", "/v1/admin/tasks/requeue", `{"category":"bulk"}`, 401, "unauthorized"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, b.do(t, "POST", c.path, c.token, c.body), c.status, c.code)
		})
	}
	b.unchanged(t, before)

	type bulk struct {
		Matched int  `json:"matched"`
		Changed int  `json:"changed"`
		More    bool `json:"more"`
		Pending int  `json:"pending"`
		Running int  `json:"running"`
	}
	call := func(path, body string) bulk {
		t.Helper()
		var out bulk
		wantJSON(t, b.do(t, "POST", path, adminToken, body), http.StatusOK, &out)
		return out
	}
	// A client loops while more is set.
	var calls, requeued int
	for {
		res := call("/v1/admin/tasks/requeue", `{"category":"bulk","limit":50,"reason":"retry all"}`)
		calls++
		requeued += res.Changed
		if res.Matched != res.Changed || res.Matched > 50 {
			t.Errorf("call %d: %+v", calls, res)
		}
		if !res.More || calls > 10 {
			break
		}
	}
	if requeued != 120 || calls != 3 {
		t.Errorf("requeued %d in %d calls, want 120 in 3", requeued, calls)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE category = 'other' AND status = 'dead'`); n != 5 {
		t.Errorf("%d tasks of another category still dead, want 5", n)
	}
	// Cancel by ids, with an old cutoff: nothing matches; a cutoff in the future: all.
	body := mustJSON(t, map[string]any{"ids": ids[:10], "created_before": "2000-01-01T00:00:00Z"})
	if res := call("/v1/admin/tasks/cancel", body); res != (bulk{}) {
		t.Errorf("cancel created before 2000 = %+v, want nothing", res)
	}
	body = mustJSON(t, map[string]any{"ids": ids[:10], "created_before": time.Now().Add(time.Hour).Format(time.RFC3339)})
	if res := call("/v1/admin/tasks/cancel", body); res != (bulk{Matched: 10, Changed: 10, Pending: 10}) {
		t.Errorf("cancel by ids = %+v, want 10", res)
	}
	if res := call("/v1/admin/tasks/cancel", `{"category":"bulk","limit":10000}`); res != (bulk{Matched: 240, Changed: 240, Pending: 240}) {
		t.Errorf("cancel the category = %+v, want the other 240", res)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'cancelled'`); n != 250 {
		t.Errorf("%d cancelled events, want 250", n)
	}
}

// TestBulkCancelEndsHeldTasks: a cancel by filter cancels the held tasks with
// the pending ones, says how many of each, and the holders' writes are 409
// task_cancelled afterwards.
func TestBulkCancelEndsHeldTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ada := b.editor(t, "ada", "news")
	bob := b.editor(t, "bob", "news")
	b.addN(t, "news", 5)
	a, o := b.next(t, ada.Token), b.next(t, bob.Token)
	type bulk struct {
		Matched int     `json:"matched"`
		Changed int     `json:"changed"`
		More    bool    `json:"more"`
		Pending *int    `json:"pending"`
		Running *int    `json:"running"`
		IDs     []int64 `json:"ids"`
	}
	var dry, res bulk
	wantJSON(t, b.do(t, "POST", "/v1/admin/tasks/cancel", adminToken, `{"category":"news","dry_run":true}`), http.StatusOK, &dry)
	if dry.Matched != 5 || dry.Pending == nil || *dry.Pending != 3 || dry.Running == nil || *dry.Running != 2 || len(dry.IDs) != 5 {
		t.Errorf("dry run = %+v, want 5 matched: 3 pending, 2 running", dry)
	}
	body := mustJSON(t, map[string]any{"category": "news", "ids": dry.IDs, "limit": len(dry.IDs), "reason": "withdrawn"})
	wantJSON(t, b.do(t, "POST", "/v1/admin/tasks/cancel", adminToken, body), http.StatusOK, &res)
	if res.Changed != 5 || res.Pending == nil || *res.Pending != 3 || res.Running == nil || *res.Running != 2 || res.More {
		t.Errorf("cancel = %+v, want 5 cancelled: 3 pending, 2 running", res)
	}
	for _, c := range []struct {
		token string
		claim assignment
	}{{ada.Token, a}, {bob.Token, o}} {
		path := fmt.Sprintf("/v1/assignments/%d/heartbeat", c.claim.Task.ID)
		wantError(t, b.do(t, "POST", path, c.token, mustJSON(t, map[string]any{"fence": c.claim.Fence})), http.StatusConflict, "task_cancelled")
		if e := b.history(t, c.claim.Task.ID); e[len(e)-1].Kind != tasks.EventCancelled || e[len(e)-1].Detail != "withdrawn" {
			t.Errorf("task %d's last event %+v, want cancelled, withdrawn", c.claim.Task.ID, e[len(e)-1])
		}
	}
	// A requeue's answer has no such counts.
	var rq map[string]any
	wantJSON(t, b.do(t, "POST", "/v1/admin/tasks/requeue", adminToken, `{"category":"news"}`), http.StatusOK, &rq)
	if _, ok := rq["running"]; ok {
		t.Errorf("requeue answered %v, want no running count", rq)
	}
}

// TestBulkDryRun: dry_run counts and lists what a bulk action would change
// and changes nothing; the listed ids, sent back with the filter, change
// exactly those tasks, and not one that came to match in between.
func TestBulkDryRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.addN(t, "bulk", 30)
	b.makeDead(t, ids[:12]...)
	type bulk struct {
		Matched int     `json:"matched"`
		Changed int     `json:"changed"`
		More    bool    `json:"more"`
		IDs     []int64 `json:"ids"`
		Pending int     `json:"pending"`
		Running int     `json:"running"`
	}
	before := b.snapshot(t)
	var dry bulk
	wantJSON(t, b.do(t, "POST", "/v1/admin/tasks/requeue", adminToken, `{"category":"bulk","dry_run":true}`), http.StatusOK, &dry)
	if dry.Matched != 12 || dry.Changed != 0 || dry.More || len(dry.IDs) != 12 {
		t.Fatalf("dry run: %+v, want 12 matched and listed, none changed", dry)
	}
	var limited bulk
	wantJSON(t, b.do(t, "POST", "/v1/admin/tasks/cancel", adminToken, `{"category":"bulk","dry_run":true,"limit":10}`), http.StatusOK, &limited)
	if limited.Matched != 10 || !limited.More || len(limited.IDs) != 10 {
		t.Fatalf("dry run of cancel with limit 10: %+v, want 10 and more", limited)
	}
	var none bulk
	wantJSON(t, b.do(t, "POST", "/v1/admin/tasks/requeue", adminToken, `{"category":"nothing","dry_run":true}`), http.StatusOK, &none)
	if none.Matched != 0 || none.IDs == nil {
		t.Fatalf("dry run matching nothing: %+v, want 0 and an empty list", none)
	}
	b.unchanged(t, before)

	// Another task dies after the count: the confirmed call leaves it alone.
	b.makeDead(t, ids[20])
	var done bulk
	wantJSON(t, b.do(t, "POST", "/v1/admin/tasks/requeue", adminToken, mustJSON(t, map[string]any{"category": "bulk", "ids": dry.IDs})), http.StatusOK, &done)
	if done.Matched != 12 || done.Changed != 12 {
		t.Fatalf("requeue of the counted ids: %+v", done)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'dead'`); n != 1 {
		t.Fatalf("%d dead tasks left, want the one that died after the count", n)
	}
}
