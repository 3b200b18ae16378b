package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/testenv"
)

// The editorial workflow in the pages: the tests' category "desk" has the
// stages edit and review, "panel" asks for two results (testCategories).

// editorWith creates an editor with a capacity (0: the default) and stage
// limits (nil: none) and returns its id and token.
func (s *server) editorWith(name string, capacity int, stages map[string][]string, categories ...string) (int64, string) {
	s.t.Helper()
	body := map[string]any{"name": name, "categories": categories}
	if capacity != 0 {
		body["capacity"] = capacity
	}
	if stages != nil {
		body["stages"] = stages
	}
	var ed struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	s.admin("POST", "/v1/editors", body, http.StatusCreated, &ed)
	return ed.ID, ed.Token
}

// flowResult is a result as a task's detail lists it.
type flowResult struct {
	TaskID   int64           `json:"task_id"`
	Stage    string          `json:"stage"`
	Decision string          `json:"decision"`
	Notes    string          `json:"notes"`
	EditorID *int64          `json:"editor_id"`
	Result   json.RawMessage `json:"result"`
}

// flowTask is the workflow part of GET /v1/tasks/{id}.
type flowTask struct {
	Status      string       `json:"status"`
	EditorID    *int64       `json:"editor_id"`
	Stage       string       `json:"stage"`
	ReservedFor int64        `json:"reserved_for"`
	Results     []flowResult `json:"results"`
}

func (s *server) flowTask(id int64) flowTask {
	s.t.Helper()
	var ft flowTask
	s.admin("GET", fmt.Sprintf("/v1/tasks/%d", id), nil, http.StatusOK, &ft)
	return ft
}

// stageOf is the JavaScript for the workspace's stage tag, "" when hidden.
const stageOf = `(document.getElementById("t-stage").hidden ? "" : document.getElementById("t-stage").textContent)`

// TestBrowserReviewSendBack: an editor edits a task of a category with
// stages; the reviewer sees the stage and the edit's result, cannot send
// back without notes, sends back with notes; the editor is offered the task
// again and sees the notes, edits again, and the reviewer approves. Each
// submit carries its decision and notes, as the task's results show.
func TestBrowserReviewSendBack(t *testing.T) {
	s := startServer(t, taskd.Config{})
	edID, edToken := s.editorWith("Ada Editor", 0, map[string][]string{"desk": {"edit"}}, "desk")
	_, revToken := s.editorWith("Rex Reviewer", 0, map[string][]string{"desk": {"review"}}, "desk")
	const title = "Council approves the harbour budget"
	id := s.addTask("desk", 5, title, map[string]any{
		"text":   "The council voted 7 to 2 on Tuesday.\n\n\"It is a good day for the harbour,\" the mayor said.",
		"source": "wire",
	})

	ed := newTab(t, 1280, 900)
	ed.signIn(s, edToken)
	ed.showing(title)
	if got := eval[string](ed, stageOf); got != "Edit · stage 1 of 2" {
		t.Errorf("the editor's stage %q, want Edit · stage 1 of 2", got)
	}
	// The edit stage takes the edited text, from the payload's, and no
	// decision.
	if got := eval[string](ed, `[document.getElementById("t-earlier").hidden, document.getElementById("review-decision").hidden, document.querySelector("fieldset.decision").hidden, document.getElementById("edit-fields").hidden].join()`); got != "true,true,true,false" {
		t.Errorf("at the edit stage, earlier/review/decision/edit hidden = %s, want true,true,true,false", got)
	}
	if got := eval[string](ed, `document.getElementById("edited").value`); !strings.HasPrefix(got, "The council voted 7 to 2 on Tuesday.") {
		t.Errorf("the text to edit starts %q, want the payload's text", got)
	}
	if got := eval[string](ed, `document.getElementById("shortcuts").innerText`); strings.Contains(got, "Alt+1") || !strings.HasSuffix(got, "Alt+R release.") {
		t.Errorf("the editor's shortcuts %q, want none for decisions at the edit stage", got)
	}
	ed.screenshot("workspace-edit")
	const edited = "The council voted 7 to 2 on Tuesday to approve the harbour budget."
	ed.do("edit and submit",
		chromedp.SetValue(chromedp.CSS("#edited"), edited),
		chromedp.SendKeys(chromedp.CSS("#notes"), "Trimmed the quote."),
		chromedp.Click(chromedp.CSS("#b-submit")))
	ed.waitJS("the editor waits", `document.body.dataset.state === "waiting"`)
	if ft := s.flowTask(id); ft.Status != "pending" || ft.Stage != "review" || len(ft.Results) != 1 || ft.Results[0].Decision != "" || ft.Results[0].Notes != "Trimmed the quote." {
		t.Fatalf("after the edit: %+v, want pending at review with the edit's notes and no decision", ft)
	}
	var res struct {
		Results []struct {
			Result struct {
				Text string `json:"text"`
			} `json:"result"`
		} `json:"results"`
	}
	s.admin("GET", "/v1/tasks/"+itoa(id)+"/results", nil, http.StatusOK, &res)
	if len(res.Results) != 1 || res.Results[0].Result.Text != edited {
		t.Fatalf("the edit's result %+v, want the edited text", res.Results)
	}

	rev := newTab(t, 1280, 900)
	rev.signIn(s, revToken)
	rev.showing(title)
	if got := eval[string](rev, stageOf); got != "Review · stage 2 of 2" {
		t.Errorf("the reviewer's stage %q, want Review · stage 2 of 2", got)
	}
	items := `Array.from(document.querySelectorAll("#earlier-list > li"))`
	if got := eval[string](rev, items+`.map(li => li.querySelector(".earlier-head").textContent + " | " + ((li.querySelector(".earlier-notes") || {}).textContent || "")).join(" / ")`); !strings.HasPrefix(got, "Edit by Ada Editor · ") || !strings.HasSuffix(got, " | Trimmed the quote.") {
		t.Errorf("the reviewer's earlier results %q, want the edit by Ada Editor (by name, not id), with its notes", got)
	}
	if got := eval[string](rev, `[document.getElementById("review-decision").hidden, document.querySelector("fieldset.decision").hidden, document.getElementById("submit-label").textContent].join()`); got != "false,true,Approve" {
		t.Errorf("at review, review/decision hidden and the button = %s, want false,true,Approve", got)
	}
	if got := eval[string](rev, `document.getElementById("shortcuts").textContent`); !strings.HasSuffix(got, "Alt+1–2 review.") {
		t.Errorf("the reviewer's shortcuts %q, want Alt+1–2 for its two choices", got)
	}

	// Send back without notes: refused in the page, the claim kept.
	rev.do("send back without notes",
		chromedp.Click(chromedp.CSS(`input[name="review"][value="send_back"]`)),
		chromedp.Click(chromedp.CSS("#b-submit")))
	rev.waitJS("the call for notes", `document.getElementById("status").textContent.includes("sent back with notes") && document.getElementById("notes").getAttribute("aria-invalid") === "true" && document.activeElement.id === "notes"`)
	if got := eval[string](rev, `document.getElementById("submit-label").textContent`); got != "Send back" {
		t.Errorf("the button says %q with send back chosen", got)
	}
	if ft := s.flowTask(id); ft.Status != "assigned" || len(ft.Results) != 1 {
		t.Fatalf("after a send back without notes: %+v, want still assigned with one result", ft)
	}
	rev.do("the notes", chromedp.SendKeys(chromedp.CSS("#notes"), "Check the second quote with the mayor's office."))
	rev.waitJS("the call for notes answered", `document.getElementById("status").hidden && !document.getElementById("notes").hasAttribute("aria-invalid")`)
	rev.screenshot("workspace-review")
	rev.do("phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	rev.waitJS("the phone layout", `window.innerWidth === 390`)
	if w := eval[int](rev, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the review is %dpx wide at a 390px viewport", w)
	}
	if d := eval[string](rev, `getComputedStyle(document.getElementById("shortcuts")).display`); d != "none" {
		t.Errorf("the shortcuts shown (display %s) on a phone", d)
	}
	rev.screenshot("workspace-review-phone")
	rev.do("desktop width", chromedp.EmulateViewport(1280, 900))
	rev.do("send back", chromedp.Click(chromedp.CSS("#b-submit")))
	rev.waitJS("the reviewer waits", `document.body.dataset.state === "waiting" && document.getElementById("status").textContent.includes("sent back to its edit stage")`)
	// The editor's waiting page may have claimed it already.
	ft := s.flowTask(id)
	offered := ft.Status == "pending" && ft.ReservedFor == edID || ft.Status == "assigned" && ft.EditorID != nil && *ft.EditorID == edID
	if !offered || ft.Stage != "edit" || len(ft.Results) != 2 ||
		ft.Results[1].Decision != "send_back" || ft.Results[1].Notes != "Check the second quote with the mayor's office." {
		t.Fatalf("after the send back: %+v, want at edit, offered to or held by editor %d, with the notes", ft, edID)
	}

	// The editor's waiting page is offered the task again, with the notes.
	ed.showing(title)
	if got := eval[string](ed, `document.getElementById("t-sent-back").hidden ? "" : document.getElementById("t-sent-back").textContent`); !strings.Contains(got, "Rex Reviewer") || !strings.HasSuffix(got, ": Check the second quote with the mayor's office.") {
		t.Errorf("the sent-back notice %q, want the reviewer and its notes", got)
	}
	if got := eval[string](ed, stageOf+` + " | " + `+items+`.map(li => li.className + ":" + li.querySelector("b").textContent).join(",")`); got != "Edit · stage 1 of 2 | earlier-item:Edit,earlier-item sent-back:Review" {
		t.Errorf("the editor's second look: %q", got)
	}
	if got := eval[string](ed, `document.querySelector(".earlier-item b").nextSibling.textContent`); !strings.HasPrefix(got, " by you · ") {
		t.Errorf("the editor's own edit is by %q, want you", got)
	}
	if got := eval[string](ed, `document.getElementById("edited").value`); got != edited {
		t.Errorf("the sent-back edit starts from %q, want the last edit", got)
	}
	ed.screenshot("workspace-sent-back")
	ed.do("edit again", chromedp.SendKeys(chromedp.CSS("#notes"), "Quote checked."), chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	ed.waitJS("the editor waits again", `document.body.dataset.state === "waiting"`)

	rev.showing(title)
	if n := eval[int](rev, `document.querySelectorAll("#earlier-list > li").length`); n != 3 {
		t.Errorf("the reviewer sees %d earlier results, want 3", n)
	}
	rev.do("approve with Alt+1", chromedp.KeyEvent("1", chromedp.KeyModifiers(chromedp.ModifierAlt)), chromedp.Click(chromedp.CSS("#b-submit")))
	rev.waitJS("the reviewer waits", `document.body.dataset.state === "waiting"`)
	ft = s.flowTask(id)
	var got []string
	for _, r := range ft.Results {
		got = append(got, r.Stage+"/"+r.Decision)
	}
	if ft.Status != "done" || strings.Join(got, " ") != "edit/ review/send_back edit/ review/approve" {
		t.Fatalf("the task at the end: %s with results %v, want done after edit, send back, edit, approve", ft.Status, got)
	}
}

// TestBrowserCapacitySwitch: an editor who may hold two claims takes a
// second task beside the first, switches between them with what it typed
// kept for each, and both claims stay alive while only one is shown.
func TestBrowserCapacitySwitch(t *testing.T) {
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 3 * time.Second // heartbeats every second
	s := startServer(t, cfg)
	edID, token := s.editorWith("Kay", 2, nil, "news")
	first := s.addTask("news", 9, "First held", map[string]any{"text": "a"})
	second := s.addTask("news", 5, "Second held", map[string]any{"text": "b"})
	s.addTask("news", 1, "Third in line", map[string]any{"text": "c"})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("First held")
	tb.waitJS("the held claims", `!document.getElementById("held").hidden && document.getElementById("held-count").textContent === "Your tasks · 1 of 2" && !document.getElementById("b-another").hidden`)
	tb.do("take another", chromedp.Click(chromedp.CSS("#b-another")))
	tb.showing("Second held")
	tb.waitJS("two held", `document.getElementById("held-count").textContent === "Your tasks · 2 of 2" && document.getElementById("b-another").hidden`)
	claimButtons := `Array.from(document.querySelectorAll("#held-list button")).map(b => b.dataset.task + ":" + b.getAttribute("aria-pressed")).join(",")`
	if got, want := eval[string](tb, claimButtons), itoa(first)+":false,"+itoa(second)+":true"; got != want {
		t.Errorf("claim buttons %q, want %q", got, want)
	}
	var editor struct {
		Capacity int `json:"capacity"`
		Holding  int `json:"holding"`
	}
	s.admin("GET", "/v1/editors/"+itoa(edID), nil, http.StatusOK, &editor)
	if editor.Capacity != 2 || editor.Holding != 2 {
		t.Fatalf("the editor holds %d of %d, want 2 of 2", editor.Holding, editor.Capacity)
	}

	tb.do("notes for the second", chromedp.SendKeys(chromedp.CSS("#notes"), "draft two"),
		chromedp.Click(chromedp.CSS(`#held-list button[data-task="`+itoa(first)+`"]`)))
	tb.showing("First held")
	if got := eval[string](tb, `document.getElementById("notes").value + "|" + document.getElementById("task").dataset.task`); got != "|"+itoa(first) {
		t.Errorf("the first task's notes|id %q, want empty notes on task %d", got, first)
	}
	// The second claim is kept alive while the first is shown: its lease
	// moves on.
	var before struct {
		LeaseExpiresAt string `json:"lease_expires_at"`
	}
	s.admin("GET", "/v1/tasks/"+itoa(second), nil, http.StatusOK, &before)
	testenv.Eventually(t, 20*time.Second, "the second claim's lease extended while the first is shown", func() bool {
		var now struct {
			Status         string `json:"status"`
			LeaseExpiresAt string `json:"lease_expires_at"`
		}
		s.admin("GET", "/v1/tasks/"+itoa(second), nil, http.StatusOK, &now)
		b, err1 := time.Parse(time.RFC3339Nano, before.LeaseExpiresAt)
		n, err2 := time.Parse(time.RFC3339Nano, now.LeaseExpiresAt)
		if err1 != nil || err2 != nil {
			t.Fatalf("leases %q, %q: %v, %v", before.LeaseExpiresAt, now.LeaseExpiresAt, err1, err2)
		}
		return now.Status == "assigned" && n.After(b)
	})
	tb.screenshot("workspace-held")
	tb.do("phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.waitJS("the phone layout", `window.innerWidth === 390`)
	if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the workspace with two claims is %dpx wide at a 390px viewport", w)
	}
	tb.screenshot("workspace-held-phone")
	tb.do("desktop width", chromedp.EmulateViewport(1280, 900))

	tb.do("back to the second", chromedp.Click(chromedp.CSS(`#held-list button[data-task="`+itoa(second)+`"]`)))
	tb.showing("Second held")
	if got := eval[string](tb, `document.getElementById("notes").value`); got != "draft two" {
		t.Errorf("the second task's notes %q, want the draft kept", got)
	}
	tb.do("submit the second", chromedp.Click(chromedp.CSS("#b-submit")))
	tb.waitJS("another shown", `document.body.dataset.state === "task" && document.getElementById("task").dataset.task !== `+js(itoa(second)))
	tb.waitJS("the first still held", `document.querySelector('#held-list button[data-task="`+itoa(first)+`"]') !== null && document.querySelector('#held-list button[data-task="`+itoa(second)+`"]') === null`)
	var done struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	s.admin("GET", "/v1/tasks/"+itoa(second), nil, http.StatusOK, &done)
	if done.Status != "done" || !strings.Contains(string(done.Result), "draft two") {
		t.Fatalf("the second task %s with %s, want done with its draft's notes", done.Status, done.Result)
	}
	var first1 struct {
		Status string `json:"status"`
	}
	s.admin("GET", "/v1/tasks/"+itoa(first), nil, http.StatusOK, &first1)
	if first1.Status != "assigned" {
		t.Fatalf("the first task is %s, want still assigned", first1.Status)
	}
}

// submitAs submits the editor's claim of task id at fence with a decision
// and notes, through the API.
func submitAs(t *testing.T, s *server, token string, id, fence int64, decision, notes string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"fence": fence, "result": map[string]any{"decision": decision, "notes": notes}, "decision": decision, "notes": notes})
	editorCall(t, s, token, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), string(body), http.StatusOK, nil)
}

// TestBrowserOpsWorkflow: the console counts a category's tasks by stage,
// shows a task's stages with the current one marked, every stage's result
// with its decision and notes, and its group's progress (done, each task's
// status and editor, whether they agree); the editors' list and detail show
// capacity and load, and the edit form changes capacity and stage limits,
// showing the API's refusal of a bad capacity.
func TestBrowserOpsWorkflow(t *testing.T) {
	s := startServer(t, liveClaims())
	adaID, ada := s.editorWith("Ada Editor", 0, map[string][]string{"desk": {"edit"}}, "desk")
	_, rex := s.editorWith("Rex Reviewer", 0, map[string][]string{"desk": {"review"}}, "desk")
	_, flo := s.editorWith("Flo", 0, map[string][]string{"desk": {"edit"}}, "desk")
	_, pat := s.editor("Pat", "panel")
	_, quinn := s.editor("Quinn", "panel")
	kayID, kay := s.editorWith("Kay", 3, nil, "news")

	// Ada edits a task of desk, which waits for its review.
	s.addTask("desk", 5, "Story A", map[string]any{"text": "a"})
	a, fa := claimFor(t, s, ada)
	submitAs(t, s, ada, a, fa, "approve", "")
	// A group of two tasks of desk, each edited then reviewed, and a task of
	// desk alone.
	var added struct {
		IDs []int64 `json:"ids"`
	}
	s.admin("POST", "/v1/tasks", []map[string]any{{"category": "desk", "priority": 9, "title": "Budget explainer", "overlap": 2,
		"payload": map[string]any{"text": "What the budget means for the harbour."}}}, http.StatusCreated, &added)
	group := added.IDs[0]

	// Ada edits one of the group's tasks (a submit claims the editor's
	// next: there is none for her), Rex sends it back to her and is handed
	// Story A to review; Flo holds the group's other task at its edit.
	x, fence := claimFor(t, s, ada)
	submitAs(t, s, ada, x, fence, "approve", "Tightened the lede.")
	if got, f := claimFor(t, s, rex); got != x {
		t.Fatalf("the reviewer got task %d, want %d", got, x)
	} else {
		submitAs(t, s, rex, x, f, "send_back", "Cite the source of the figures.")
	}
	y, _ := claimFor(t, s, flo)
	if y == x || y == a {
		t.Fatalf("Flo got task %d, want the group's other task", y)
	}
	s.addTask("desk", 1, "Story B", map[string]any{"text": "b"})
	// A poll both panel editors answered, differently.
	s.admin("POST", "/v1/tasks", []map[string]any{{"category": "panel", "priority": 1, "title": "Is the headline fair?", "payload": map[string]any{"text": "p"}}}, http.StatusCreated, &added)
	p1, pf1 := claimFor(t, s, pat)
	p2, pf2 := claimFor(t, s, quinn)
	submitAs(t, s, pat, p1, pf1, "yes", "")
	const hostileNotes = `Loaded wording. <img src=x onerror=alert(8)>`
	submitAs(t, s, quinn, p2, pf2, "no", hostileNotes)
	// Kay, of capacity 3, holds two.
	s.addTask("news", 1, "News one", map[string]any{"text": "n"})
	s.addTask("news", 1, "News two", map[string]any{"text": "n"})
	claimFor(t, s, kay)
	claimFor(t, s, kay)

	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)
	stageCell := func(cat, stage, status string) string {
		return `(document.querySelector('#pool-table tr[data-stage-of="` + cat + `"][data-stage="` + stage + `"] td[data-status="` + status + `"]') || {}).textContent`
	}
	tb.waitJS("desk by stage", stageCell("desk", "edit", "pending")+` === "2" && `+stageCell("desk", "edit", "assigned")+` === "1" && `+
		stageCell("desk", "review", "pending")+` === "0" && `+stageCell("desk", "review", "assigned")+` === "1" && `+cell("desk", "pending")+` === "2"`)
	if n := eval[int](tb, `document.querySelectorAll('#pool-table tr[data-stage-of="news"], #pool-table tr[data-stage-of="panel"]').length`); n != 0 {
		t.Errorf("%d stage rows for categories without stages", n)
	}
	if got := eval[string](tb, `Array.from(document.querySelectorAll("#pool-table tbody tr")).map(r => r.dataset.category || "↳" + r.dataset.stage).join(",")`); got != "desk,↳edit,↳review,news,panel" {
		t.Errorf("pool rows %q, want each stage under its category", got)
	}
	tb.screenshot("ops-pool-stages")

	// The task sent back: at edit again, offered to Ada, with two results.
	tb.do("the task", chromedp.Navigate(s.base+"/ops#tasks/"+itoa(x)))
	tb.waitJS("its results", `!document.getElementById("task-detail").hidden && document.querySelectorAll("#td-results > li").length === 2`)
	if got := eval[string](tb, `Array.from(document.querySelectorAll("#td-meta ol.stages li")).map(li => li.textContent + (li.getAttribute("aria-current") === "step" ? "*" : "")).join(",")`); got != "edit*,review" {
		t.Errorf("stages %q, want edit*,review (back at edit)", got)
	}
	if got := eval[string](tb, `Array.from(document.querySelectorAll("#td-meta dt")).filter(dt => dt.textContent === "offered to").map(dt => dt.nextElementSibling.textContent).join()`); !strings.HasPrefix(got, "Ada Editor alone, until ") {
		t.Errorf("offered to %q, want Ada Editor alone", got)
	}
	// Not held: the time of its last claim, the review's, under its own name.
	if got := eval[string](tb, `Array.from(document.querySelectorAll("#td-meta dt")).map(dt => dt.textContent).filter(l => l === "assigned" || l === "last claimed").join()`); got != "last claimed" {
		t.Errorf("claim time labelled %q, want last claimed", got)
	}
	results := eval[string](tb, `Array.from(document.querySelectorAll("#td-results > li")).map(li => li.dataset.stage + "/" + ((li.querySelector(".verdict") || {}).textContent || "") + "/" + ((li.querySelector(".notes") || {}).textContent || "")).join(" | ")`)
	if want := "edit/approved/Tightened the lede. | review/sent back/Cite the source of the figures."; results != want {
		t.Errorf("results %q, want %q", results, want)
	}
	if got := eval[string](tb, `document.querySelector("#td-results > li").textContent`); !strings.Contains(got, "Ada Editor") {
		t.Errorf("the first result %q does not name its editor", got)
	}
	tb.waitJS("the group", `!document.getElementById("td-group-box").hidden && document.getElementById("td-group-done").textContent === "0 of 2" && document.getElementById("td-group-agree").textContent === "pending"`)
	groupRows := eval[string](tb, `Array.from(document.querySelectorAll("#td-group tbody tr")).map(r => r.dataset.task + ":" + r.cells[1].textContent + ":" + r.cells[2].textContent).join(",")`)
	if !strings.Contains(groupRows, itoa(x)+":pending:–") || !strings.Contains(groupRows, itoa(y)+":assigned:Flo") || strings.Count(groupRows, ",") != 1 {
		t.Errorf("group rows %q, want %d pending and %d assigned to Flo", groupRows, x, y)
	}
	if got := eval[string](tb, `document.getElementById("td-meta").textContent`); !strings.Contains(got, "task #"+itoa(group)+" (2 results asked)") {
		t.Errorf("task meta %q does not name the group", got)
	}
	if !eval[bool](tb, `document.getElementById("td-result-box").hidden`) {
		t.Errorf("the single result box shows beside the results")
	}
	tb.screenshot("ops-task-stages")
	tb.do("phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.waitJS("the phone layout", `window.innerWidth === 390`)
	if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the task view is %dpx wide at a 390px viewport", w)
	}
	tb.screenshot("ops-task-stages-phone")
	tb.do("desktop width", chromedp.EmulateViewport(1280, 1000))

	// The poll: both done, and they disagree.
	tb.do("the poll", chromedp.Navigate(s.base+"/ops#tasks/"+itoa(p2)))
	tb.waitJS("the poll's group", `document.getElementById("td-title").textContent.startsWith("#`+itoa(p2)+` ") && document.getElementById("td-group-done").textContent === "2 of 2" && document.getElementById("td-group-agree").textContent === "no"`)
	if got := eval[string](tb, `Array.from(document.querySelectorAll("#td-results > li .verdict")).map(v => v.textContent).join(",")`); got != "yes,no" {
		t.Errorf("the poll's decisions %q, want yes,no", got)
	}
	// Notes are text, never markup.
	if got := eval[string](tb, `Array.from(document.querySelectorAll("#td-results .notes")).map(n => n.textContent).join() + "|" + document.querySelectorAll("#task-detail img").length`); got != hostileNotes+"|0" {
		t.Errorf("the poll's notes %q, want them as text and no image", got)
	}

	// Editors: load and capacity, stage limits.
	tb.do("the editors", chromedp.Navigate(s.base+"/ops#editors/"+itoa(kayID)))
	row := func(id int64) string {
		return `document.querySelector('#editors-table tr[data-editor="` + itoa(id) + `"]')`
	}
	tb.waitJS("Kay's load", row(kayID)+` !== null && `+row(kayID)+`.cells[2].textContent.startsWith("2 of 3 · #")`)
	if got := eval[string](tb, row(adaID)+`.cells[1].textContent`); got != "desk (edit)" {
		t.Errorf("Ada's categories %q, want desk (edit)", got)
	}
	tb.waitJS("Kay's detail", `document.getElementById("ed-title").textContent === "Kay" && document.querySelectorAll("#ed-meta ul.held-claims li").length === 2`)
	if got := eval[string](tb, `Array.from(document.querySelectorAll("#ed-meta dt")).map(dt => dt.textContent + "=" + dt.nextElementSibling.textContent).filter(s => /^(capacity|stage limits)=/.test(s)).join("|")`); got != "capacity=3 (holds 2 of 3)|stage limits=none: every stage" {
		t.Errorf("Kay's capacity and limits %q", got)
	}
	if got := eval[string](tb, `document.getElementById("ed-capacity").value`); got != "3" {
		t.Errorf("the capacity field says %q, want 3", got)
	}

	// A capacity the API refuses: its message, in the form.
	var refusal struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	s.admin("PATCH", "/v1/editors/"+itoa(kayID), map[string]any{"capacity": 101}, http.StatusUnprocessableEntity, &refusal)
	tb.do("capacity 101",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("ed-capacity").value = "101"`),
		chromedp.Click(chromedp.CSS(`#ed-work-form button[type="submit"]`)))
	tb.waitJS("the refusal", `!document.getElementById("ed-work-error").hidden && document.getElementById("ed-work-error").textContent === `+js(refusal.Error.Message))
	// Stage limits that do not read: said in the page, nothing sent.
	tb.do("stage limits without a colon",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("ed-capacity").value = "4"; document.getElementById("ed-stages").value = "news edit"`),
		chromedp.Click(chromedp.CSS(`#ed-work-form button[type="submit"]`)))
	tb.waitJS("the form's complaint", `document.getElementById("ed-work-error").textContent.includes("category: stage, stage")`)
	tb.do("capacity 4, no limits",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("ed-stages").value = ""`),
		chromedp.Click(chromedp.CSS(`#ed-work-form button[type="submit"]`)))
	tb.waitJS("saved", `document.getElementById("status").textContent.includes("Saved: capacity 4, stage limits none") && document.getElementById("ed-work-error").hidden`)
	tb.waitJS("the new load", row(kayID)+`.cells[2].textContent.startsWith("2 of 4")`)
	var kayNow struct {
		Capacity int `json:"capacity"`
	}
	s.admin("GET", "/v1/editors/"+itoa(kayID), nil, http.StatusOK, &kayNow)
	if kayNow.Capacity != 4 {
		t.Fatalf("Kay's capacity %d, want 4", kayNow.Capacity)
	}

	// Ada may review as well as edit.
	tb.do("Ada", chromedp.Navigate(s.base+"/ops#editors/"+itoa(adaID)))
	tb.waitJS("Ada's form", `document.getElementById("ed-title").textContent === "Ada Editor" && document.getElementById("ed-stages").value === "desk: edit"`)
	tb.do("desk: edit, review",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("ed-stages").value = ""`),
		chromedp.SendKeys(chromedp.CSS("#ed-stages"), "desk: edit, review"+kb.Enter))
	tb.waitJS("saved", `document.getElementById("status").textContent.includes("desk: edit, review") && `+row(adaID)+`.cells[1].textContent === "desk (edit, review)"`)
	tb.screenshot("ops-editor-workflow")
	var adaNow struct {
		Stages map[string][]string `json:"stages"`
	}
	s.admin("GET", "/v1/editors/"+itoa(adaID), nil, http.StatusOK, &adaNow)
	if strings.Join(adaNow.Stages["desk"], ",") != "edit,review" {
		t.Fatalf("Ada's stage limits %v, want desk: edit, review", adaNow.Stages)
	}
}

// TestAppAssignments: the workspace lists the editor's claims through GET
// /app/v1/assignments, for its session's editor only, and without a session
// it answers 401.
func TestAppAssignments(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	_, kay := s.editorWith("kay", 2, nil, "news")
	_, lu := s.editor("lu", "news")
	first := s.addTask("news", 2, "first", map[string]any{"text": "a"})
	second := s.addTask("news", 1, "second", map[string]any{"text": "b"})
	claimFor(t, s, kay)
	claimFor(t, s, kay)

	var list struct {
		Assignments []struct {
			Task struct {
				ID int64 `json:"id"`
			} `json:"task"`
		} `json:"assignments"`
		Capacity int `json:"capacity"`
	}
	read := func(token string) {
		t.Helper()
		c := browserClient(t)
		if res := s.signIn(c, token); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in: %d", res.StatusCode)
		}
		st, body := do(t, c, "GET", s.base+"/app/v1/assignments", "", "")
		if st != http.StatusOK {
			t.Fatalf("GET /app/v1/assignments: %d %s", st, body)
		}
		list.Assignments = nil
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatal(err)
		}
	}
	read(kay)
	if len(list.Assignments) != 2 || list.Assignments[0].Task.ID != first || list.Assignments[1].Task.ID != second || list.Capacity != 2 {
		t.Fatalf("kay's assignments %+v, want %d and %d of capacity 2", list, first, second)
	}
	read(lu)
	if len(list.Assignments) != 0 || list.Capacity != 1 {
		t.Fatalf("lu's assignments %+v, want none of capacity 1", list)
	}
	if st, _ := do(t, browserClient(t), "GET", s.base+"/app/v1/assignments", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("without a session: %d, want 401", st)
	}
}

// TestBrowserOlderResults: a task sent back many times shows its latest
// results to the reviewer and in the console, each with a button that shows
// the older ones, until there are none.
func TestBrowserOlderResults(t *testing.T) {
	s := startServer(t, taskd.Config{})
	_, edToken := s.editorWith("Ada Editor", 0, map[string][]string{"desk": {"edit"}}, "desk")
	_, revToken := s.editorWith("Rex Reviewer", 0, map[string][]string{"desk": {"review"}}, "desk")
	const title = "A story sent back six times"
	id := s.addTask("desk", 5, title, map[string]any{"text": "draft"})
	for round := 1; round <= 6; round++ {
		a, fa := claimFor(t, s, edToken)
		submitAs(t, s, edToken, a, fa, "approve", fmt.Sprintf("edit %d", round))
		r, fr := claimFor(t, s, revToken)
		submitAs(t, s, revToken, r, fr, "send_back", fmt.Sprintf("again %d", round))
	}
	a, fa := claimFor(t, s, edToken)
	submitAs(t, s, edToken, a, fa, "approve", "edit 7")
	const all = 13

	rev := newTab(t, 1280, 900)
	rev.signIn(s, revToken)
	rev.showing(title)
	items := `document.querySelectorAll("#earlier-list > li")`
	if got := eval[string](rev, items+`.length + "|" + document.getElementById("earlier-older").hidden`); got != "10|false" {
		t.Fatalf("the reviewer's earlier results and button: %s, want the latest 10 and the button", got)
	}
	rev.do("show older", chromedp.Click(chromedp.CSS("#earlier-older")))
	rev.waitJS("every earlier result", items+`.length === `+itoa(all)+` && document.getElementById("earlier-older").hidden`)
	if got := eval[string](rev, `Array.from(`+items+`).map(li => (li.querySelector(".earlier-notes") || {}).textContent).join(",")`); !strings.HasPrefix(got, "edit 1,again 1,edit 2,") || !strings.HasSuffix(got, ",again 6,edit 7") {
		t.Errorf("the earlier results in order: %s", got)
	}

	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)
	tb.do("the task", chromedp.Navigate(s.base+"/ops#tasks/"+itoa(id)))
	tb.waitJS("its latest results", `!document.getElementById("task-detail").hidden && document.querySelectorAll("#td-results > li").length === 10 && !document.getElementById("td-results-older").hidden`)
	tb.do("show older", chromedp.Click(chromedp.CSS("#td-results-older")))
	tb.waitJS("every result", `document.querySelectorAll("#td-results > li").length === `+itoa(all)+` && document.getElementById("td-results-older").hidden`)
	if got := eval[string](tb, `Array.from(document.querySelectorAll("#td-results .notes")).map(n => n.textContent).join(",")`); !strings.HasPrefix(got, "edit 1,again 1,") || !strings.HasSuffix(got, ",again 6,edit 7") {
		t.Errorf("the console's results in order: %s", got)
	}
}
