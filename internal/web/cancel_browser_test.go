package web_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/taskd/taskd"
)

// TestBrowserOpsCancelRunning: the console's task page cancels a task an
// editor holds, after a confirmation; the task ends cancelled and its audit
// trail names the claim's holder and who cancelled.
func TestBrowserOpsCancelRunning(t *testing.T) {
	s := startServer(t, liveClaims())
	_, ada := s.editor("Ada Editor", "news")
	s.addTask("news", 1, "Withdrawn story", map[string]any{"text": "x"})
	id, fence := claimFor(t, s, ada)

	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)
	tb.do("open the held task", chromedp.Navigate(s.base+"/ops#tasks/"+itoa(id)))
	cancel := `#td-actions button[data-key="cancel:` + itoa(id) + `"]`
	tb.waitJS("the cancel button beside force release", `document.querySelector('`+cancel+`') !== null && document.querySelector('#td-actions button[data-key="release:`+itoa(id)+`"]') !== null`)
	tb.do("cancel", chromedp.SendKeys(chromedp.CSS("#td-actions input"), "withdrawn"), chromedp.Click(chromedp.CSS(cancel)))
	tb.waitJS("the confirm question", `document.querySelector('`+cancel+`').textContent === "Confirm cancel"`)
	if got := eval[string](tb, `document.querySelector("#td-meta .status").textContent`); got != "assigned" {
		t.Fatalf("status %q before the confirmation, want assigned", got)
	}
	tb.screenshot("ops-cancel-running-confirm")
	tb.do("confirm", chromedp.Click(chromedp.CSS(cancel)))
	tb.waitJS("cancelled", `document.querySelector("#td-meta .status").textContent === "cancelled" && Array.from(document.querySelectorAll("#td-history td")).some(c => c.textContent === "by admin: withdrawn")`)
	row := eval[string](tb, `Array.from(document.querySelector("#td-history tbody tr").cells).slice(1, 4).map(c => c.textContent).join("|")`)
	if want := "cancelled|" + itoa(fence) + "|Ada Editor"; row != want {
		t.Errorf("the audit trail's newest row %q, want %q", row, want)
	}
	if msg := eval[string](tb, `document.getElementById("status").textContent`); !strings.Contains(msg, "Ada Editor's claim on it ended") {
		t.Errorf("notice %q does not say whose claim ended", msg)
	}
	tb.screenshot("ops-cancel-running")
	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.screenshot("ops-cancel-running-phone")
	var task struct {
		Status string `json:"status"`
	}
	s.admin("GET", fmt.Sprintf("/v1/tasks/%d", id), nil, http.StatusOK, &task)
	if task.Status != "cancelled" {
		t.Errorf("task %s, want cancelled", task.Status)
	}
}

// TestBrowserCancelledWhileHeld: a task cancelled while the workspace shows
// it is reported as cancelled on the page's next heartbeat, or on its
// submit, and the page moves on to the next task.
func TestBrowserCancelledWhileHeld(t *testing.T) {
	for _, c := range []struct {
		name  string
		lease time.Duration
		act   func(tb *tab)
	}{
		// Heartbeats every second: the next one is told.
		{"heartbeat", 3 * time.Second, func(*tab) {}},
		// A lease too long for a heartbeat within the test: the submit is told.
		{"submit", 10 * time.Minute, func(tb *tab) { tb.do("submit", chromedp.Click(chromedp.CSS("#b-submit"))) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := taskd.Config{}
			cfg.Dispatch.LeaseTTL = c.lease
			s := startServer(t, cfg)
			_, token := s.editor("Bo", "news")
			id := s.addTask("news", 5, "Withdrawn story", map[string]any{"text": "x"})
			s.addTask("news", 1, "The next one", map[string]any{"text": "y"})

			tb := newTab(t, 1280, 900)
			tb.signIn(s, token)
			tb.showing("Withdrawn story")
			s.admin("POST", fmt.Sprintf("/v1/admin/tasks/%d/cancel", id), map[string]any{}, http.StatusNoContent, nil)
			c.act(tb)
			tb.waitJS("the cancelled notice", `document.getElementById("status").textContent.includes("Task #`+strconv.FormatInt(id, 10)+` was cancelled by an operator")`)
			tb.showing("The next one")
			if msg := eval[string](tb, `document.getElementById("status").textContent`); !strings.Contains(msg, "Moving on") || strings.Contains(msg, "was lost") {
				t.Errorf("notice %q: want the cancel, and that it moves on", msg)
			}
			tb.screenshot("workspace-cancelled-" + c.name)
			tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
			tb.screenshot("workspace-cancelled-" + c.name + "-phone")
		})
	}
}
