package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
)

// TestBrowserOpsTaskSnoozes: the console's task page says how many times a
// worker snoozed the task, beside its attempts, and lists its 'snoozed'
// events with how long each put it off.
func TestBrowserOpsTaskSnoozes(t *testing.T) {
	db := storetest.NewDB(t)
	s := startServer(t, taskd.Config{}, taskd.WithDB(db))
	id := s.addTask("news", 1, "Waits for the wire", map[string]any{"text": "x"})
	db.MustExecContext(t.Context(), `UPDATE tasks SET fence = 2, snoozes = 2 WHERE id = ?`, id)
	db.MustExecContext(t.Context(), `INSERT INTO task_events (task_id, kind, fence, holder, detail)
VALUES (?, 'claimed', 1, 'worker:w:0', NULL), (?, 'snoozed', 1, 'worker:w:0', '30s'),
	(?, 'claimed', 2, 'worker:w:0', NULL), (?, 'snoozed', 2, 'worker:w:0', '1m0s')`, id, id, id, id)

	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)
	tb.do("the task", chromedp.Navigate(s.base+"/ops#tasks/"+itoa(id)))
	tb.waitJS("the task's detail", `document.querySelector("#td-meta .status") !== null`)
	meta := eval[string](tb, `Array.from(document.querySelectorAll("#td-meta dt")).map(dt => dt.textContent + ": " + dt.nextElementSibling.textContent).join("; ")`)
	if want := "attempts: 0 of 5; snoozed: 2 times"; !strings.Contains(meta, want) {
		t.Errorf("task page says %q, want %q", meta, want)
	}
	history := eval[string](tb, `Array.from(document.querySelectorAll("#td-history tbody tr")).map(tr => tr.cells[1].textContent + " " + tr.cells[4].textContent).join(", ")`)
	if want := "snoozed 1m0s, claimed , snoozed 30s, claimed "; history != want {
		t.Errorf("task page's events %q, want %q", history, want)
	}
}
