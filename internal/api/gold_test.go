package api_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/tasks"
)

type goldPauseAnswer struct {
	EditorID   int64  `json:"editor_id"`
	EditorName string `json:"editor_name"`
	Category   string `json:"category"`
	Reason     string `json:"reason"`
	PausedAt   string `json:"paused_at"`
}

type goldAnswer struct {
	Since   string `json:"since"`
	Editors []struct {
		EditorID   int64            `json:"editor_id"`
		EditorName string           `json:"editor_name"`
		Category   string           `json:"category"`
		Answers    int              `json:"answers"`
		Correct    int              `json:"correct"`
		Accuracy   float64          `json:"accuracy"`
		Paused     *goldPauseAnswer `json:"paused"`
	} `json:"editors"`
	Pauses []goldPauseAnswer `json:"pauses"`
}

// TestGoldServedScoredPaused: with rate 1, an editor's claims are gold copies
// while there are any, shaped as every assignment; its wrong answers are
// scored, not results; under the floor it is paused from the category with a
// reason; an admin lifts the pause.
func TestGoldServedScoredPaused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{api: api.Config{Gold: map[string]tasks.GoldRule{
		"news": {Rule: tasks.GoldRuleDecision, Rate: 1, MinAccuracy: 0.5, MinAnswers: 2},
	}}})
	ids := b.addN(t, "news", 3)
	golds, plain := ids[:2], ids[2]
	for _, id := range golds {
		var g struct {
			TaskID   int64  `json:"task_id"`
			Category string `json:"category"`
			Answer   struct {
				Decision string `json:"decision"`
			} `json:"answer"`
			CreatedAt string `json:"created_at"`
		}
		wantJSON(t, b.do(t, "PUT", "/v1/admin/tasks/"+strconv.FormatInt(id, 10)+"/gold", adminToken, `{"decision":"reject"}`), http.StatusOK, &g)
		if g.TaskID != id || g.Category != "news" || g.Answer.Decision != "reject" || parseTime(t, g.CreatedAt).IsZero() {
			t.Fatalf("mark gold = %+v", g)
		}
	}
	e := b.editor(t, "ann", "news")
	seen := map[int64]bool{}
	a := b.next(t, e.Token)
	for range 2 {
		if slices.Contains(ids, a.Task.ID) || seen[a.Task.ID] || a.Task.Category != "news" || a.Fence != 1 {
			t.Fatalf("assignment %+v; want a gold copy: a new task of news, fence 1", a)
		}
		seen[a.Task.ID] = true
		var hb map[string]any
		wantJSON(t, b.do(t, "POST", "/v1/assignments/"+strconv.FormatInt(a.Task.ID, 10)+"/heartbeat", e.Token, `{"fence":1}`), http.StatusOK, &hb)
		res := b.do(t, "POST", "/v1/assignments/"+strconv.FormatInt(a.Task.ID, 10)+"/submit", e.Token, `{"fence":1,"result":{"ok":true},"decision":"approve"}`)
		var out struct {
			Next *assignment `json:"next"`
		}
		wantJSON(t, res, http.StatusOK, &out)
		if len(seen) == 2 {
			// Paused from news by the second wrong answer: no next.
			if out.Next != nil {
				t.Errorf("next after the pausing answer = %+v; want none", out.Next)
			}
			break
		}
		if out.Next == nil {
			t.Fatal("no next after the first gold answer; want the second gold copy")
		}
		a = *out.Next
	}
	wantStatus(t, b.do(t, "POST", "/v1/assignments/next", e.Token, ""), http.StatusNoContent)
	var g goldAnswer
	wantJSON(t, b.do(t, "GET", "/v1/admin/gold?category=news&window=7d", adminToken, ""), http.StatusOK, &g)
	if len(g.Editors) != 1 || g.Editors[0].EditorName != "ann" || g.Editors[0].Answers != 2 || g.Editors[0].Correct != 0 ||
		g.Editors[0].Paused == nil || g.Editors[0].Paused.Reason != "gold accuracy 0% < 50% over last 2" || len(g.Pauses) != 1 {
		t.Fatalf("gold = %+v; want ann 0/2, paused with its reason", g)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_results`); n != 0 {
		t.Errorf("%d results, want none: gold answers are not results", n)
	}
	feed := b.do(t, "GET", "/v1/results", adminToken, "")
	wantStatus(t, feed, http.StatusOK)
	if strings.Contains(string(feed.body), "task_id") {
		t.Errorf("results feed = %s, want no result", feed.body)
	}
	path := "/v1/admin/gold/pauses/" + strconv.FormatInt(e.ID, 10) + "/news"
	wantStatus(t, b.do(t, "DELETE", path, adminToken, ""), http.StatusNoContent)
	wantError(t, b.do(t, "DELETE", path, adminToken, ""), http.StatusNotFound, "not_found")
	// No gold task left for ann: the plain task.
	if got := b.next(t, e.Token); got.Task.ID != plain {
		t.Errorf("next after the lift = task %d, want the plain task %d", got.Task.ID, plain)
	}
}

// TestGoldBadInput: wrong input is a clear 4xx and changes nothing.
func TestGoldBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{api: api.Config{Gold: map[string]tasks.GoldRule{
		"facts": {Rule: tasks.GoldRuleFields, Fields: []string{"label"}, Rate: 0.5},
	}}})
	facts, other := b.addN(t, "facts", 1)[0], b.addN(t, "misc", 1)[0]
	fp := "/v1/admin/tasks/" + strconv.FormatInt(facts, 10) + "/gold"
	e := b.editor(t, "ann", "facts")
	for _, c := range []struct {
		path, token, body string
		status            int
		code              string
	}{
		{fp, adminToken, `{"result":{"label":"x"},"extra":1}`, 400, "bad_request"},
		{fp, adminToken, `{"decision":"approve"}`, 422, "invalid"},
		{fp, adminToken, `{"result":{"other":"x"}}`, 422, "invalid"},
		{fp, adminToken, `{"result":[1]}`, 422, "invalid"},
		{"/v1/admin/tasks/" + strconv.FormatInt(other, 10) + "/gold", adminToken, `{"decision":"approve"}`, 422, "invalid"},
		{"/v1/admin/tasks/999999999/gold", adminToken, `{"result":{"label":"x"}}`, 404, "not_found"},
		{fp, e.Token, `{"result":{"label":"x"}}`, 403, "forbidden"},
	} {
		wantError(t, b.do(t, "PUT", c.path, c.token, c.body), c.status, c.code)
	}
	for _, q := range []string{"window=0d", "window=400d", "window=soon", "cat=x"} {
		res := b.do(t, "GET", "/v1/admin/gold?"+q, adminToken, "")
		if res.status != 422 && res.status != 400 {
			t.Errorf("GET /v1/admin/gold?%s = %d, want 400 or 422", q, res.status)
		}
	}
	wantError(t, b.do(t, "DELETE", "/v1/admin/gold/pauses/x/facts", adminToken, ""), 400, "bad_request")
	if n := b.count(t, `SELECT COUNT(*) FROM gold_tasks`); n != 0 {
		t.Errorf("%d gold tasks after refusals, want none", n)
	}
	// A held task is refused with 409 until its claim ends.
	a := b.next(t, e.Token)
	wantError(t, b.do(t, "PUT", fp, adminToken, `{"result":{"label":"x"}}`), http.StatusConflict, "task_held")
	if a.Task.ID != facts {
		t.Errorf("next = %d, want %d", a.Task.ID, facts)
	}
}

// TestGoldRate: at rate 0.25 the share of gold copies among an editor's
// claims stays within a tolerance of it over a bounded count of claims.
func TestGoldRate(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{api: api.Config{Gold: map[string]tasks.GoldRule{
		"news": {Rule: tasks.GoldRuleDecision, Rate: 0.25},
	}}})
	const claims = 120
	ids := b.addN(t, "news", claims+60)
	for _, id := range ids[:60] {
		wantStatus(t, b.do(t, "PUT", "/v1/admin/tasks/"+strconv.FormatInt(id, 10)+"/gold", adminToken, `{"decision":"approve"}`), http.StatusOK)
	}
	e := b.editor(t, "ann", "news")
	a := b.next(t, e.Token)
	for i := 0; i < claims-1; i++ {
		res := b.do(t, "POST", "/v1/assignments/"+strconv.FormatInt(a.Task.ID, 10)+"/submit", e.Token, mustJSON(t, map[string]any{"fence": a.Fence, "result": map[string]int{"n": i}}))
		var out struct {
			Next *assignment `json:"next"`
		}
		wantJSON(t, res, http.StatusOK, &out)
		if out.Next == nil {
			t.Fatalf("no next after %d claims", i+1)
		}
		a = *out.Next
	}
	gold := b.count(t, `SELECT COUNT(*) FROM gold_copies WHERE editor_id = ?`, e.ID)
	// Binomial(120, 0.25): mean 30, standard deviation 4.7; 12..48 is
	// nearly four of them either side.
	if gold < 12 || gold > 48 {
		t.Errorf("%d gold copies in %d claims at rate 0.25, want 12..48", gold, claims)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_results`); n != claims-1-b.count(t, `SELECT COUNT(*) FROM gold_copies WHERE answered_at IS NOT NULL`) {
		t.Errorf("%d results, want one per submitted task that was no gold copy", n)
	}
}

// TestGoldAtInsert: a task inserted with a gold answer is never claimed as
// itself, and served as copies; a gold answer its category has no rule for is
// refused before anything is inserted.
func TestGoldAtInsert(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{api: api.Config{Gold: map[string]tasks.GoldRule{
		"news": {Rule: tasks.GoldRuleDecision, Rate: 1},
	}}})
	before := b.count(t, `SELECT COUNT(*) FROM tasks`)
	wantError(t, b.do(t, "POST", "/v1/tasks", adminToken, `[{"category":"misc","title":"x","gold":{"decision":"approve"}}]`), 422, "invalid")
	wantError(t, b.do(t, "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"x","gold":{}}]`), 422, "invalid")
	if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != before {
		t.Fatalf("%d tasks after refused inserts, want %d", n, before)
	}
	var out addResponse
	wantJSON(t, b.do(t, "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"known","gold":{"decision":"reject"}}]`), http.StatusCreated, &out)
	gold := out.IDs[0]
	if n := b.count(t, `SELECT COUNT(*) FROM gold_tasks WHERE task_id = ?`, gold); n != 1 {
		t.Fatalf("gold task %d not recorded", gold)
	}
	ann, bob := b.editor(t, "ann", "news"), b.editor(t, "bob", "news")
	for _, e := range []editorInfo{ann, bob} {
		a := b.next(t, e.Token)
		if a.Task.ID == gold || a.Task.Title != "known" {
			t.Errorf("%s's assignment = %+v; want a copy of the gold task", e.Name, a)
		}
	}
	if got := b.task(t, gold); got.Status != tasks.StatusPending {
		t.Errorf("gold task is %s, want pending: never claimed as itself", got.Status)
	}
}

// TestGoldCopyWithoutRules: a gold copy served while its category had a rule
// is scored, not made a result, when submitted to a process whose
// configuration has no gold rule (removed since, or a replica still on
// another configuration): no task_results row, no feed line.
func TestGoldCopyWithoutRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gold := b.addN(t, "news", 1)[0]
	rules := func(string) (tasks.GoldRule, bool) {
		return tasks.GoldRule{Rule: tasks.GoldRuleDecision, Rate: 1}, true
	}
	if _, err := b.store.MarkGold(t.Context(), gold, tasks.GoldAnswer{Decision: "reject"}, rules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	e := b.editor(t, "ann", "news")
	ed := tasks.Editor{ID: e.ID, Name: e.Name}
	cp, err := b.store.ClaimGold(t.Context(), tasks.GoldClaimParams{EditorID: e.ID, Holder: ed.Holder(), Categories: []string{"news"}, Lease: time.Minute})
	if err != nil {
		t.Fatalf("claim gold: %v", err)
	}
	var out struct {
		Next *assignment `json:"next"`
	}
	wantJSON(t, b.do(t, "POST", "/v1/assignments/"+strconv.FormatInt(cp.Task.ID, 10)+"/submit", e.Token, `{"fence":1,"result":{"ok":true},"decision":"reject"}`), http.StatusOK, &out)
	if n := b.count(t, `SELECT COUNT(*) FROM task_results`); n != 0 {
		t.Errorf("%d results, want none: a gold copy's answer is never a result", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM gold_copies WHERE copy_id = ? AND answered_at IS NOT NULL AND correct = 1`, cp.Task.ID); n != 1 {
		t.Errorf("%d answered gold copies, want the copy scored correct by its answer's decision", n)
	}
	if got := b.task(t, cp.Task.ID); got.Status != tasks.StatusDone {
		t.Errorf("copy after its submit: %s, want done", got.Status)
	}
}
