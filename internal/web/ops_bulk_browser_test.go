package web_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
)

// statusCounts counts the tasks of a category by status, from the database.
func statusCounts(t *testing.T, db *sqlx.DB, category string) map[string]int {
	t.Helper()
	var rows []struct {
		Status string `db:"status"`
		N      int    `db:"n"`
	}
	if err := db.SelectContext(t.Context(), &rows, `SELECT status, COUNT(*) AS n FROM tasks WHERE category = ? GROUP BY status`, category); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out
}

// TestBrowserOpsBulkActions: the task browser offers the filter's bulk
// actions with the count the API's dry run gives; a confirmation dismissed
// changes nothing; a confirmed one changes exactly the tasks counted (not one
// that came to match after the count, nor another category's).
func TestBrowserOpsBulkActions(t *testing.T) {
	db := storetest.NewDB(t)
	s := startServer(t, taskd.Config{}, taskd.WithDB(db))
	var dead []int64
	for i := range 6 {
		s.addTask("news", 1, fmt.Sprintf("News %d", i+1), map[string]any{"text": "x"})
	}
	for i := range 4 {
		dead = append(dead, s.addTask("news", 1, fmt.Sprintf("Failed news %d", i+1), map[string]any{"text": "x"}))
	}
	for i := range 2 {
		s.addTask("sport", 1, fmt.Sprintf("Sport %d", i+1), map[string]any{"text": "y"})
		dead = append(dead, s.addTask("sport", 1, fmt.Sprintf("Failed sport %d", i+1), map[string]any{"text": "y"}))
	}
	q, args, err := sqlx.In(`UPDATE tasks SET status = 'dead', attempts = max_attempts WHERE id IN (?)`, dead)
	if err != nil {
		t.Fatal(err)
	}
	db.MustExecContext(t.Context(), q, args...)

	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)
	tb.do("the task browser", chromedp.Navigate(s.base+"/ops#tasks"))
	tb.waitJS("the task list", `document.querySelectorAll("#tasks-table tbody tr").length === 14`)
	if !eval[bool](tb, `document.getElementById("bulk-cancel").disabled && document.getElementById("bulk-why").textContent.includes("category")`) {
		t.Errorf("bulk actions offered without a category filter")
	}
	tb.do("filter by news", chromedp.SendKeys(chromedp.CSS("#f-category"), "news"), chromedp.Click(chromedp.CSS(`#task-filters button[type="submit"]`)))
	tb.waitJS("news alone", `document.querySelectorAll("#tasks-table tbody tr").length === 10 && !document.getElementById("bulk-cancel").disabled`)

	// Cancel pending: the count, then a dismissed confirmation.
	tb.do("cancel pending", chromedp.Click(chromedp.CSS("#bulk-cancel")))
	tb.waitJS("the count", `document.getElementById("bulk-count").textContent === "6 pending tasks in news will be cancelled."`)
	confirm := `#bulk-confirm button`
	tb.do("press once", chromedp.Click(chromedp.CSS(confirm)))
	tb.waitJS("the question", `document.querySelector("`+confirm+`").textContent === "Confirm: cancel 6"`)
	tb.do("dismiss", chromedp.Click(chromedp.CSS("#bulk-dismiss")))
	tb.waitJS("dismissed", `document.getElementById("bulk-ask").hidden && document.querySelector("`+confirm+`") === null`)
	if got := statusCounts(t, db, "news"); got["pending"] != 6 || got["dead"] != 4 || got["cancelled"] != 0 {
		t.Fatalf("news after a dismissed confirmation: %v, want 6 pending and 4 dead", got)
	}

	// Counted, then one more comes to match: the confirmation cancels the six.
	tb.do("cancel pending again", chromedp.Click(chromedp.CSS("#bulk-cancel")))
	tb.waitJS("the count", `document.getElementById("bulk-count").textContent === "6 pending tasks in news will be cancelled."`)
	tb.screenshot("ops-bulk")
	late := s.addTask("news", 1, "Late news", map[string]any{"text": "x"})
	tb.do("cancel, and confirm", chromedp.Click(chromedp.CSS(confirm)))
	tb.waitJS("the question", `document.querySelector("`+confirm+`").textContent === "Confirm: cancel 6"`)
	tb.do("confirm", chromedp.Click(chromedp.CSS(confirm)))
	tb.waitJS("the notice", `document.getElementById("status").textContent === "6 of 6 pending tasks cancelled."`)
	if got := statusCounts(t, db, "news"); got["pending"] != 1 || got["cancelled"] != 6 || got["dead"] != 4 {
		t.Fatalf("news after the cancel: %v, want 6 cancelled, 4 dead and the late one pending", got)
	}
	var task struct {
		Status string `json:"status"`
	}
	s.admin("GET", fmt.Sprintf("/v1/tasks/%d", late), nil, http.StatusOK, &task)
	if task.Status != "pending" {
		t.Fatalf("the task added after the count is %s, want pending", task.Status)
	}

	// Requeue dead, filtered by status too, with a reason.
	tb.do("filter dead news",
		chromedp.SetValue(chromedp.CSS("#f-status"), "dead"),
		chromedp.Click(chromedp.CSS(`#task-filters button[type="submit"]`)))
	tb.waitJS("dead news alone", `document.querySelectorAll("#tasks-table tbody tr").length === 4 && document.getElementById("bulk-cancel").disabled && !document.getElementById("bulk-requeue").disabled`)
	tb.do("requeue dead", chromedp.Click(chromedp.CSS("#bulk-requeue")))
	tb.waitJS("the count", `document.getElementById("bulk-count").textContent === "4 dead tasks in news will be requeued."`)
	tb.do("a reason", chromedp.SendKeys(chromedp.CSS("#bulk-reason"), "upstream fixed"))
	tb.do("requeue", chromedp.Click(chromedp.CSS(confirm)))
	tb.waitJS("the question", `document.querySelector("`+confirm+`").textContent === "Confirm: requeue 4"`)
	tb.do("confirm", chromedp.Click(chromedp.CSS(confirm)))
	tb.waitJS("the notice", `document.getElementById("status").textContent === "4 of 4 dead tasks requeued."`)
	tb.waitJS("the list empty", `document.querySelectorAll("#tasks-table tbody tr").length === 0`)
	if got := statusCounts(t, db, "news"); got["pending"] != 5 || got["dead"] != 0 || got["cancelled"] != 6 {
		t.Fatalf("news after the requeue: %v, want 5 pending and 6 cancelled", got)
	}
	if got := statusCounts(t, db, "sport"); got["pending"] != 2 || got["dead"] != 2 {
		t.Fatalf("sport: %v, want untouched: 2 pending and 2 dead", got)
	}
	var n int
	if err := db.GetContext(t.Context(), &n, `SELECT COUNT(*) FROM task_events WHERE kind = 'requeued' AND detail = 'upstream fixed'`); err != nil || n != 4 {
		t.Fatalf("%d requeue events with the reason (%v), want 4", n, err)
	}
}

// TestBrowserOpsBulkCancelRunning: the console's bulk cancel counts the held
// tasks apart from the pending ones, cancels both, and says so; the editor
// who held one is refused as cancelled.
func TestBrowserOpsBulkCancelRunning(t *testing.T) {
	db := storetest.NewDB(t)
	s := startServer(t, taskd.Config{}, taskd.WithDB(db))
	for i := range 3 {
		s.addTask("news", 1, fmt.Sprintf("News %d", i+1), map[string]any{"text": "x"})
	}
	_, token := s.editor("eddie", "news")
	var held struct {
		Task struct {
			ID int64 `json:"id"`
		} `json:"task"`
		Fence int64 `json:"fence"`
	}
	editorCall(t, s, token, "POST", "/v1/assignments/next", `{}`, http.StatusOK, &held)

	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)
	tb.do("the task browser", chromedp.Navigate(s.base+"/ops#tasks"))
	tb.do("filter by news", chromedp.SendKeys(chromedp.CSS("#f-category"), "news"), chromedp.Click(chromedp.CSS(`#task-filters button[type="submit"]`)))
	tb.waitJS("news", `document.querySelectorAll("#tasks-table tbody tr").length === 3 && !document.getElementById("bulk-cancel").disabled`)
	tb.do("cancel", chromedp.Click(chromedp.CSS("#bulk-cancel")))
	tb.waitJS("the count", `document.getElementById("bulk-count").textContent.startsWith("3 tasks (2 pending, 1 running) in news will be cancelled. The running ones are stopped")`)
	tb.screenshot("ops-bulk-cancel-running")
	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.screenshot("ops-bulk-cancel-running-phone")
	tb.do("desktop viewport", chromedp.EmulateViewport(1280, 1000))
	tb.do("dismiss", chromedp.Click(chromedp.CSS("#bulk-dismiss")))

	tb.do("filter running news",
		chromedp.SetValue(chromedp.CSS("#f-status"), "assigned"),
		chromedp.Click(chromedp.CSS(`#task-filters button[type="submit"]`)))
	tb.waitJS("the held one", `document.querySelectorAll("#tasks-table tbody tr").length === 1 && !document.getElementById("bulk-cancel").disabled`)
	tb.do("cancel", chromedp.Click(chromedp.CSS("#bulk-cancel")))
	tb.waitJS("the count", `document.getElementById("bulk-count").textContent.startsWith("1 task (0 pending, 1 running) in news will be cancelled.")`)
	confirm := `#bulk-confirm button`
	tb.do("press once", chromedp.Click(chromedp.CSS(confirm)))
	tb.waitJS("the question", `document.querySelector("`+confirm+`").textContent === "Confirm: cancel 1"`)
	tb.do("confirm", chromedp.Click(chromedp.CSS(confirm)))
	tb.waitJS("the notice", `document.getElementById("status").textContent === "1 of 1 task (0 pending, 1 running) cancelled."`)
	if got := statusCounts(t, db, "news"); got["pending"] != 2 || got["cancelled"] != 1 {
		t.Fatalf("news after the cancel: %v, want the held one cancelled, 2 pending", got)
	}
	editorCall(t, s, token, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", held.Task.ID), fmt.Sprintf(`{"fence":%d}`, held.Fence), http.StatusConflict, nil)
}

// TestBrowserOpsTaskHistory: the task detail shows the latest 50 events,
// newest first, and "Show older events" pages back to the first.
func TestBrowserOpsTaskHistory(t *testing.T) {
	db := storetest.NewDB(t)
	s := startServer(t, taskd.Config{}, taskd.WithDB(db))
	id := s.addTask("news", 1, "A task with a long history", map[string]any{"text": "x"})
	db.MustExecContext(t.Context(), `INSERT INTO task_events (task_id, kind, fence, holder, detail)
SELECT ?, 'released', seq, 'w', CONCAT('reason ', seq) FROM seq_1_to_130`, id)

	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)
	tb.do("the task", chromedp.Navigate(s.base+fmt.Sprintf("/ops#tasks/%d", id)))
	rows := `document.querySelectorAll("#td-history tbody tr")`
	first := `document.querySelector("#td-history tbody tr").cells[4].textContent`
	last := `Array.from(` + rows + `).pop().cells[4].textContent`
	tb.waitJS("the latest 50", rows+`.length === 50 && !document.getElementById("td-older").hidden`)
	if got := eval[string](tb, first+` + "|" + `+last); got != "reason 130|reason 81" {
		t.Errorf("rows from %q, want the newest (130) to 81", got)
	}
	tb.screenshot("ops-history")
	tb.do("older", chromedp.Click(chromedp.CSS("#td-older")))
	tb.waitJS("100 events", rows+`.length === 100 && `+last+` === "reason 31"`)
	tb.do("older again", chromedp.Click(chromedp.CSS("#td-older")))
	tb.waitJS("all 130", rows+`.length === 130 && `+last+` === "reason 1" && document.getElementById("td-older").hidden`)
	if got := eval[string](tb, `document.getElementById("td-history-count").textContent`); got != "130 events" {
		t.Errorf("count %q, want 130 events", got)
	}
	// A refresh (every 5 s) keeps the older events on screen, and adds a new one.
	db.MustExecContext(t.Context(), `INSERT INTO task_events (task_id, kind, fence, holder, detail) VALUES (?, 'released', 131, 'w', 'reason 131')`, id)
	tb.waitJS("the new event on top", first+` === "reason 131" && `+rows+`.length === 131`)
}
