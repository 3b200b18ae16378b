package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
)

// TestBrowserHedgeDoneBySomeoneElse: a task near its due date whose holder
// went quiet is offered to a second editor too, who submits first; the
// holder's page, told at its submit, says the task was done by someone else
// and keeps the draft on screen until the holder goes on.
func TestBrowserHedgeDoneBySomeoneElse(t *testing.T) {
	cfg := liveClaims()
	cfg.Categories = []taskd.CategoryConfig{{Name: "news", Hedge: taskd.HedgeConfig{BeforeDue: 10 * time.Minute, InactiveFor: 2 * time.Minute}}}
	db := storetest.NewDB(t)
	s := startServer(t, cfg, taskd.WithDB(db))
	_, ada := s.editor("Ada Editor", "news")
	_, bo := s.editor("Bo Backup", "news")
	due := time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)
	s.admin("POST", "/v1/tasks", []map[string]any{{"category": "news", "title": "Due story", "payload": map[string]any{"text": "x"}, "due_at": due}}, http.StatusCreated, nil)

	tb := newTab(t, 1280, 900)
	tb.signIn(s, ada)
	tb.showing("Due story")
	const draft = "Half of my notes on the lede"
	tb.do("type a draft", chromedp.SendKeys(chromedp.CSS("#notes"), draft))
	// Ada went quiet three minutes ago, as far as the server knows.
	if _, err := db.ExecContext(t.Context(), `UPDATE tasks SET assigned_at = NOW(3) - INTERVAL 3 MINUTE WHERE status = 'assigned'`); err != nil {
		t.Fatal(err)
	}
	var hedge struct {
		Task struct {
			ID int64 `json:"id"`
		} `json:"task"`
		Fence int64 `json:"fence"`
		Hedge bool  `json:"hedge"`
	}
	editorCall(t, s, bo, "POST", "/v1/assignments/next", `{}`, http.StatusOK, &hedge)
	if !hedge.Hedge {
		t.Fatalf("Bo's assignment is not a hedge: %+v", hedge)
	}
	editorCall(t, s, bo, "POST", fmt.Sprintf("/v1/assignments/%d/submit", hedge.Task.ID),
		fmt.Sprintf(`{"fence": %d, "result": {"decision": "approve"}}`, hedge.Fence), http.StatusOK, nil)

	tb.do("submit", chromedp.Click(chromedp.CSS("#b-submit")))
	tb.waitJS("the done-by-someone-else notice", `document.getElementById("status").textContent.includes("Done by someone else")`)
	if got := eval[string](tb, `document.getElementById("notes").value`); got != draft {
		t.Errorf("notes %q after the refusal, want the draft %q kept", got, draft)
	}
	if got := eval[string](tb, `document.getElementById("t-title").textContent`); got != "Due story" {
		t.Errorf("title %q, want the task still on screen", got)
	}
	if got := eval[string](tb, `document.getElementById("submit-label").textContent`); got != "Next task" {
		t.Errorf("submit button %q, want Next task", got)
	}
	if msg := eval[string](tb, `document.getElementById("status").textContent`); !strings.Contains(msg, "draft stays below") {
		t.Errorf("notice %q does not say the draft is kept", msg)
	}
	if eval[bool](tb, `!document.getElementById("b-skip").hidden || !document.getElementById("b-release").hidden`) {
		t.Error("skip and release are offered for a task no longer held")
	}
	if got := eval[string](tb, `document.getElementById("t-lease").textContent`); got != "ended" {
		t.Errorf("lease %q for a claim another editor's submit ended, want ended", got)
	}
	tb.screenshot("workspace-done-by-someone-else")
	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.screenshot("workspace-done-by-someone-else-phone")
	tb.do("go on", chromedp.Click(chromedp.CSS("#b-submit")))
	tb.waitJS("waiting for work", `document.body.dataset.state === "waiting"`)
}

// TestBrowserHedgeOffered: the other side of a hedge. Bo's page is offered
// two tasks whose holder went quiet near their due dates. Bo submits the
// first before its holder, who is then refused done_by_other; the holder
// submits the second before Bo, whose page says the task was done by someone
// else and keeps Bo's draft on screen.
func TestBrowserHedgeOffered(t *testing.T) {
	cfg := liveClaims()
	cfg.Categories = []taskd.CategoryConfig{{Name: "news", Hedge: taskd.HedgeConfig{BeforeDue: 10 * time.Minute, InactiveFor: 2 * time.Minute}}}
	db := storetest.NewDB(t)
	s := startServer(t, cfg, taskd.WithDB(db))
	adaID, ada := s.editorWith("Ada Editor", 2, nil, "news")
	boID, bo := s.editor("Bo Backup", "news")
	due := time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)
	s.admin("POST", "/v1/tasks", []map[string]any{
		{"category": "news", "title": "Due story", "payload": map[string]any{"text": "x"}, "due_at": due},
		{"category": "news", "title": "Due brief", "payload": map[string]any{"text": "y"}, "due_at": due},
	}, http.StatusCreated, nil)
	type claim struct {
		Task struct {
			ID    int64  `json:"id"`
			Title string `json:"title"`
		} `json:"task"`
		Fence int64 `json:"fence"`
	}
	held := map[int64]claim{}
	for range 2 {
		var c claim
		editorCall(t, s, ada, "POST", "/v1/assignments/next", `{}`, http.StatusOK, &c)
		held[c.Task.ID] = c
	}
	if len(held) != 2 {
		t.Fatalf("Ada holds %d tasks, want both", len(held))
	}
	// Ada went quiet three minutes ago, as far as the server knows.
	if _, err := db.ExecContext(t.Context(), `UPDATE tasks SET assigned_at = NOW(3) - INTERVAL 3 MINUTE WHERE status = 'assigned'`); err != nil {
		t.Fatal(err)
	}
	adaSubmit := func(id int64, want int) {
		t.Helper()
		editorCall(t, s, ada, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id),
			fmt.Sprintf(`{"fence": %d, "result": {"decision": "approve"}}`, held[id].Fence), want, nil)
	}

	tb := newTab(t, 1280, 900)
	tb.signIn(s, bo)
	tb.waitJS("a hedged task", `document.body.dataset.state === "task"`)
	first := int64(eval[float64](tb, `Number(document.getElementById("t-id").textContent)`))
	if _, ok := held[first]; !ok {
		t.Fatalf("Bo is shown task %d, not one of Ada's", first)
	}
	// Bo first: Bo's result is kept, Ada's refused.
	tb.do("submit first", chromedp.Click(chromedp.CSS("#b-submit")))
	tb.waitJS("the next hedged task", `document.body.dataset.state === "task" && document.getElementById("t-id").textContent !== `+js(fmt.Sprint(first)))
	adaSubmit(first, http.StatusConflict)
	acceptedBy(t, s, first, boID)

	// Ada first: Ada's result is kept, Bo's page says so and keeps the draft.
	second := int64(eval[float64](tb, `Number(document.getElementById("t-id").textContent)`))
	const draft = "Bo's half-done notes"
	tb.do("type a draft", chromedp.SendKeys(chromedp.CSS("#notes"), draft))
	adaSubmit(second, http.StatusOK)
	tb.do("submit second", chromedp.Click(chromedp.CSS("#b-submit")))
	tb.waitJS("the done-by-someone-else notice", `document.getElementById("status").textContent.includes("Done by someone else")`)
	if got := eval[string](tb, `document.getElementById("notes").value`); got != draft {
		t.Errorf("notes %q after the refusal, want the draft %q kept", got, draft)
	}
	acceptedBy(t, s, second, adaID)
}

// acceptedBy checks that task id is done with editor's result.
func acceptedBy(t *testing.T, s *server, id, editor int64) {
	t.Helper()
	var task struct {
		Status string `json:"status"`
		Result *struct {
			EditorID int64 `json:"editor_id"`
		} `json:"result"`
	}
	s.admin("GET", fmt.Sprintf("/v1/tasks/%d", id), nil, http.StatusOK, &task)
	if task.Status != "done" || task.Result == nil || task.Result.EditorID != editor {
		t.Errorf("task %d: status %s, result %+v; want done with editor %d's result", id, task.Status, task.Result, editor)
	}
}
