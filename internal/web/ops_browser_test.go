package web_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/taskd/taskd"
)

// opsSignIn opens the console's sign-in page, signs in with the admin token
// and waits for the console's first refresh.
func (tb *tab) opsSignIn(s *server) {
	tb.t.Helper()
	tb.do("sign in to the console",
		chromedp.Navigate(s.base+"/ops"),
		chromedp.SendKeys(chromedp.CSS("#token"), adminToken),
		chromedp.Submit(chromedp.CSS("#token")),
	)
	tb.waitJS("the console", `document.body.classList.contains("ops") && document.getElementById("updated").textContent.startsWith("updated")`)
}

// cell is the JavaScript for the text of the pool table's cell of a
// category and status.
func cell(category, status string) string {
	return `(document.querySelector('#pool-table tbody tr[data-category="' + CSS.escape(` + js(category) + `) + '"] td[data-status="` + status + `"]') || {}).textContent`
}

// liveClaims is the config of a test whose claims, made with claimFor and
// never heartbeated, must stay live while a browser looks at them, however
// slow a loaded machine makes the browser.
func liveClaims() taskd.Config {
	var cfg taskd.Config
	cfg.Dispatch.LeaseTTL = 10 * time.Minute
	return cfg
}

// claimFor claims a task for an editor through the API and returns the task
// id and fence. Claims that must stay live for the test want liveClaims.
func claimFor(t *testing.T, s *server, token string) (int64, int64) {
	t.Helper()
	var a struct {
		Task struct {
			ID int64 `json:"id"`
		} `json:"task"`
		Fence int64 `json:"fence"`
	}
	editorCall(t, s, token, "POST", "/v1/assignments/next", `{}`, http.StatusOK, &a)
	return a.Task.ID, a.Fence
}

// TestBrowserOpsPool: the console shows the pool by category and status with
// the right counts, the live claims with their holders and ticking leases,
// and the last hour; a category paused from the console is listed paused.
func TestBrowserOpsPool(t *testing.T) {
	s := startServer(t, liveClaims())
	_, ada := s.editor("Ada Editor", "news")
	_, bo := s.editor("Bo", "sport")
	for i := range 3 {
		s.addTask("news", 3-i, fmt.Sprintf("News item %d", i+1), map[string]any{"text": "x"})
	}
	for i := range 2 {
		s.addTask("sport", 1, fmt.Sprintf("Match report %d", i+1), map[string]any{"text": "y"})
	}
	newsID, _ := claimFor(t, s, ada)
	sportID, fence := claimFor(t, s, bo)
	// Bo submits, and is handed the second sport task.
	editorCall(t, s, bo, "POST", "/v1/assignments/"+itoa(sportID)+"/submit", `{"fence":`+itoa(fence)+`,"result":{"decision":"approve"}}`, http.StatusOK, nil)

	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)
	for _, c := range []struct{ category, status, want string }{
		{"news", "pending", "2"}, {"news", "assigned", "1"}, {"news", "done", "0"},
		{"sport", "pending", "0"}, {"sport", "assigned", "1"}, {"sport", "done", "1"},
	} {
		tb.waitJS(c.category+" "+c.status+" = "+c.want, cell(c.category, c.status)+` === `+js(c.want))
	}
	tb.waitJS("two live claims", `document.querySelectorAll("#claims-table tbody tr").length === 2`)
	row := `document.querySelector('#claims-table tr[data-task="` + itoa(newsID) + `"]')`
	if got := eval[string](tb, row+`.cells[3].textContent`); got != "Ada Editor" {
		t.Errorf("holder of task %d: %q, want Ada Editor", newsID, got)
	}
	tb.waitJS("a ticking lease", `/^\d+:\d\d$/.test(`+row+`.cells[5].textContent)`)
	// The history shows the claims once the engine has flushed them.
	tb.waitJS("the last hour's counts", `document.getElementById("hour-kpis").textContent.includes("claims 3") && document.getElementById("hour-kpis").textContent.includes("submits 1")`)
	if n := eval[int](tb, `document.querySelectorAll("#chart-rate rect.bar-claims").length`); n < 1 {
		t.Errorf("%d bars in the claims chart", n)
	}
	// The minutes' counts say "1 submit", never "1 submits" nor "1 claims".
	titles := eval[[]string](tb, `Array.from(document.querySelectorAll("#chart-rate rect.hit title")).map(function (t) { return t.textContent; })`)
	one := false
	for _, title := range titles {
		if strings.Contains(title, " 1 claims") || strings.HasSuffix(title, " 1 submits") {
			t.Errorf("chart minute %q: a plural for one", title)
		}
		one = one || strings.HasSuffix(title, ", 1 submit")
	}
	if !one {
		t.Errorf("no chart minute says \"1 submit\" of Bo's one submit: %q", titles)
	}
	// The storage the finished data takes: each purged table's size, and
	// the oldest done task kept (Bo's, just submitted); none dead.
	tb.waitJS("the storage table", `document.querySelector('#storage-table:not([hidden]) tr[data-table="tasks"]') !== null`)
	if got := eval[string](tb, `document.querySelector('#storage-table tr[data-table="task_results"]').cells[1].textContent`); !strings.HasSuffix(got, "KiB") && !strings.HasSuffix(got, "MiB") {
		t.Errorf("task_results size %q, want KiB or MiB", got)
	}
	if n := eval[int](tb, `document.querySelectorAll("#storage-table tbody tr").length`); n != 8 {
		t.Errorf("%d tables in the storage table, want 8", n)
	}
	if got := eval[string](tb, `document.querySelector('#storage-kpis [data-status="done"] b').textContent`); !strings.HasSuffix(got, "s") || got == "–" {
		t.Errorf("oldest done %q, want an age", got)
	}
	if got := eval[string](tb, `document.querySelector('#storage-kpis [data-status="dead"] b').textContent`); got != "–" {
		t.Errorf("oldest dead %q, want – (none)", got)
	}
	tb.screenshot("ops-desktop")

	tb.do("pause sport", chromedp.Click(chromedp.CSS(`#pool-table button[data-key="pause:sport"]`)))
	tb.waitJS("sport listed paused", `document.querySelector('#pool-table tr[data-category="sport"] .tag.paused') !== null`)
	tb.do("pause a category without tasks", chromedp.SendKeys(chromedp.CSS("#pause-cat"), "archive"+kb.Enter))
	tb.waitJS("archive listed paused", `document.querySelector('#pool-table tr[data-category="archive"] .tag.paused') !== null && `+cell("archive", "pending")+` === "0"`)
	var paused struct {
		Paused []struct {
			Category string `json:"category"`
		} `json:"paused"`
	}
	s.admin("GET", "/v1/admin/categories/paused", nil, http.StatusOK, &paused)
	if len(paused.Paused) != 2 || paused.Paused[0].Category != "archive" || paused.Paused[1].Category != "sport" {
		t.Fatalf("paused %+v, want archive and sport", paused.Paused)
	}
	tb.do("resume sport", chromedp.Click(chromedp.CSS(`#pool-table button[data-key="resume:sport"]`)))
	tb.waitJS("sport resumed", `document.querySelector('#pool-table tr[data-category="sport"] .tag.paused') === null && document.querySelector('#pool-table button[data-key="pause:sport"]') !== null`)
}

// TestBrowserOpsForceRelease: a claim force-released from the console makes
// the workspace of the editor who held it, open in another browser, say so.
func TestBrowserOpsForceRelease(t *testing.T) {
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 3 * time.Second // the workspace's heartbeats every second
	s := startServer(t, cfg)
	_, token := s.editor("Eve", "news")
	id := s.addTask("news", 5, "Taken back by the operator", map[string]any{"text": "x"})

	editor := newTab(t, 1280, 900)
	editor.signIn(s, token)
	editor.showing("Taken back by the operator")

	ops := newTab(t, 1280, 900)
	ops.opsSignIn(s)
	button := `#claims-table tr[data-task="` + itoa(id) + `"] button`
	ops.waitJS("the claim in the console", `document.querySelector('`+button+`') !== null`)
	if got := eval[string](ops, `document.querySelector('#claims-table tr[data-task="`+itoa(id)+`"]').cells[3].textContent`); got != "Eve" {
		t.Errorf("holder %q, want Eve", got)
	}
	ops.do("force release, and confirm", chromedp.Click(chromedp.CSS(button)))
	ops.waitJS("the confirm question", `document.querySelector('`+button+`').textContent === "Confirm"`)
	ops.do("confirm", chromedp.Click(chromedp.CSS(button)))
	ops.waitJS("the console's notice", `document.getElementById("status").textContent.includes("Task #`+itoa(id)+` was taken back from Eve")`)

	editor.waitJS("the workspace's lost-claim notice", `document.getElementById("status").textContent.includes("Your claim on task #`+itoa(id)+` was lost")`)
	var task struct {
		History []struct {
			Kind string `json:"kind"`
		} `json:"history"`
	}
	s.admin("GET", "/v1/tasks/"+itoa(id), nil, http.StatusOK, &task)
	found := false
	for _, ev := range task.History {
		found = found || ev.Kind == "released"
	}
	if !found {
		t.Errorf("history %+v has no release", task.History)
	}
}

// TestBrowserOpsHostileTask: a task whose title, payload, result, category
// and holder's name are full of markup renders as text in the console's pool,
// claims, task list and task detail: no dialog opens, no element is made
// from them.
func TestBrowserOpsHostileTask(t *testing.T) {
	s := startServer(t, liveClaims())
	const hostile = `<script>alert("title")</script>"><img src=x onerror=alert(1)>`
	const category = `"><img src=x onerror=alert(9)>`
	_, token := s.editor(`"><img src=x onerror=alert(5)>`, category)
	id := s.addTask(category, 1, hostile, map[string]any{
		"text":                           `<script>alert(2)</script> and "><img src=x onerror=alert(3)>`,
		`"><img src=x onerror=alert(4)>`: `<svg onload=alert(6)>`,
		"nested":                         map[string]any{"html": `<iframe src="javascript:alert(7)">`},
	})
	claimFor(t, s, token)

	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)
	tb.waitJS("the hostile category's row", cell(category, "assigned")+` === "1"`)
	tb.waitJS("the hostile claim", `document.querySelector('#claims-table tbody tr') !== null`)
	if got := eval[string](tb, `document.querySelector('#claims-table tbody tr').cells[1].textContent + "|" + document.querySelector('#claims-table tbody tr').cells[3].textContent`); got != hostile+`|"><img src=x onerror=alert(5)>` {
		t.Errorf("claim row %q", got)
	}
	tb.do("open the task", chromedp.Navigate(s.base+"/ops#tasks/"+itoa(id)))
	tb.waitJS("the task detail", `!document.getElementById("task-detail").hidden && document.getElementById("td-title").textContent === `+js("#"+itoa(id)+" "+hostile))
	tb.waitJS("the task list", `document.querySelector('#tasks-table tbody tr[data-task="`+itoa(id)+`"]') !== null`)
	payload := eval[string](tb, `document.getElementById("td-payload").textContent`)
	for _, want := range []string{`<script>alert(2)</script>`, `<svg onload=alert(6)>`, `javascript:alert(7)`, `"\"><img src=x onerror=alert(4)>"`} {
		if !strings.Contains(payload, want) {
			t.Errorf("payload %q lacks %q as text", payload, want)
		}
	}
	if got := eval[string](tb, `document.querySelector('#tasks-table tbody tr').cells[1].textContent`); got != hostile {
		t.Errorf("list title %q", got)
	}
	if got := eval[int](tb, `document.querySelectorAll("img, iframe, main script, #task-detail svg, table svg").length`); got != 0 {
		t.Errorf("%d elements were made from the data", got)
	}
	// The page's own charts (rate, latency, an editor's working time) are its
	// only svg elements.
	if got := eval[int](tb, `document.querySelectorAll("svg:not(#chart-rate):not(#chart-latency):not(#ed-time-chart)").length`); got != 0 {
		t.Errorf("%d svg elements besides the page's charts", got)
	}
	tb.screenshot("ops-hostile")
	tb.waitJS("the page to settle", `document.readyState === "complete"`)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.dialogs) > 0 {
		t.Errorf("dialogs opened: %q", tb.dialogs)
	}
}

// TestBrowserOpsTasksAndEditors: the task browser filters and pages, its
// detail offers the actions the status allows (requeue a dead task, cancel
// a pending one) and links its events' traces, and the editors' list and
// detail disable an editor and edit its categories.
func TestBrowserOpsTasksAndEditors(t *testing.T) {
	cfg := liveClaims()
	cfg.Telemetry.TraceURL = traceURL
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	s := startServer(t, cfg, taskd.WithTracerProvider(tp))
	edID, token := s.editor("Flo", "news")
	var ids []int64
	for i := range 55 {
		ids = append(ids, s.addTask("news", 1, "Item "+strconv.Itoa(i+1), map[string]any{"text": "x"}))
	}
	sportID := s.addTask("sport", 1, "The only sport task", map[string]any{"text": "y"})
	claimed, _ := claimFor(t, s, token)
	// Another editor claims a task and gives it back: the pending task the
	// console cancels below, with a history to show.
	_, gus := s.editor("Gus", "news")
	pending, fence := claimFor(t, s, gus)
	editorCall(t, s, gus, "POST", fmt.Sprintf("/v1/assignments/%d/release", pending), fmt.Sprintf(`{"fence":%d}`, fence), http.StatusNoContent, nil)

	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)
	tb.do("the task browser", chromedp.Navigate(s.base+"/ops#tasks"))
	tb.waitJS("a page of 50", `document.querySelectorAll("#tasks-table tbody tr").length === 50 && !document.getElementById("tasks-older").disabled`)
	if got := eval[string](tb, `document.querySelector("#tasks-table tbody tr").dataset.task`); got != itoa(sportID) {
		t.Errorf("first row %s, want the newest task %d", got, sportID)
	}
	tb.do("older", chromedp.Click(chromedp.CSS("#tasks-older")))
	tb.waitJS("the second page", `document.querySelectorAll("#tasks-table tbody tr").length === 6 && document.getElementById("tasks-older").disabled`)
	if got := eval[string](tb, `Array.from(document.querySelectorAll("#tasks-table tbody tr")).map(r => r.dataset.task).join(",")`); !strings.HasSuffix(got, itoa(ids[0])) {
		t.Errorf("second page %s does not end with the oldest task %d", got, ids[0])
	}
	tb.do("newer", chromedp.Click(chromedp.CSS("#tasks-newer")))
	tb.waitJS("the first page again", `document.querySelectorAll("#tasks-table tbody tr").length === 50`)

	tb.do("filter by category and status",
		chromedp.SendKeys(chromedp.CSS("#f-category"), "news"),
		chromedp.SetValue(chromedp.CSS("#f-status"), "assigned"),
		chromedp.Click(chromedp.CSS(`#task-filters button[type="submit"]`)))
	tb.waitJS("the claimed task alone", `document.querySelectorAll("#tasks-table tbody tr").length === 1 && document.querySelector("#tasks-table tbody tr").dataset.task === `+js(itoa(claimed)))

	// A pending task: cancel, confirmed.
	tb.do("open a pending task", chromedp.Navigate(s.base+"/ops#tasks/"+itoa(pending)))
	cancel := `#td-actions button[data-key="cancel:` + itoa(pending) + `"]`
	tb.waitJS("the cancel button", `document.querySelector('`+cancel+`') !== null`)
	tb.do("cancel, and confirm",
		chromedp.SendKeys(chromedp.CSS("#td-actions input"), "duplicate"),
		chromedp.Click(chromedp.CSS(cancel)))
	tb.waitJS("the confirm question", `document.querySelector('`+cancel+`').textContent === "Confirm cancel"`)
	tb.do("confirm", chromedp.Click(chromedp.CSS(cancel)))
	tb.waitJS("cancelled", `document.querySelector("#td-meta .status").textContent === "cancelled" && Array.from(document.querySelectorAll("#td-history td")).some(c => c.textContent === "by admin: duplicate")`)
	// Each event links its own trace: the claim's, the release's, the cancel's.
	links := eval[string](tb, `Array.from(document.querySelectorAll("#td-history tbody tr")).map(function (tr) {
		var a = tr.querySelector("td.trace a");
		return tr.cells[1].textContent + " " + (a && a.href.startsWith("http://jaeger.example:16686/trace/") ? a.textContent.length : 0);
	}).join(", ")`)
	if want := "cancelled 32, released 32, claimed 32"; links != want {
		t.Errorf("audit trail's trace links %q, want %q", links, want)
	}
	tb.screenshot("ops-task")

	// The editors: disable, then edit the categories.
	tb.do("the editors", chromedp.Navigate(s.base+"/ops#editors/"+itoa(edID)))
	tb.waitJS("the editor's detail", `!document.getElementById("editor-detail").hidden && document.getElementById("ed-title").textContent === "Flo"`)
	// The claim's task, then its trace's link.
	row := `document.querySelector('#editors-table tr[data-editor="` + itoa(edID) + `"]')`
	tb.waitJS("the editor's claim in the list", row+` !== null && `+row+`.cells[2].textContent.startsWith("#`+itoa(claimed)+` ") && `+
		row+`.cells[2].querySelector('a.trace[href^="http://jaeger.example:16686/trace/"]') !== null`)
	disable := `#ed-actions button[data-key="disable:` + itoa(edID) + `"]`
	tb.do("disable", chromedp.Click(chromedp.CSS(disable)))
	tb.waitJS("the confirm question", `document.querySelector('`+disable+`').textContent === "Confirm disable"`)
	tb.do("confirm", chromedp.Click(chromedp.CSS(disable)))
	tb.waitJS("disabled", `document.querySelector('#editors-table tr[data-editor="`+itoa(edID)+`"] .tag.disabled') !== null && document.querySelector('#ed-actions button[data-key="enable:`+itoa(edID)+`"]') !== null`)
	tb.do("edit the categories",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("ed-cats").value = ""`),
		chromedp.SendKeys(chromedp.CSS("#ed-cats"), "news, sport"+kb.Enter))
	tb.waitJS("the new categories", `document.getElementById("status").textContent.includes("Categories saved: news, sport")`)
	tb.screenshot("ops-editors")
	var ed struct {
		Disabled   bool     `json:"disabled"`
		Categories []string `json:"categories"`
	}
	s.admin("GET", "/v1/editors/"+itoa(edID), nil, http.StatusOK, &ed)
	if !ed.Disabled || strings.Join(ed.Categories, ",") != "news,sport" {
		t.Fatalf("editor %+v, want disabled with news and sport", ed)
	}
	var task struct {
		Status string `json:"status"`
	}
	s.admin("GET", "/v1/tasks/"+itoa(claimed), nil, http.StatusOK, &task)
	if task.Status != "pending" {
		t.Fatalf("the disabled editor's task is %s, want pending again", task.Status)
	}
}

// TestBrowserOpsPhoneWidth: at 390×844 the console fits the width (nothing
// scrolls sideways but the tables inside their boxes); screenshots are
// written as artifacts.
func TestBrowserOpsPhoneWidth(t *testing.T) {
	s := startServer(t, liveClaims())
	for i := range 4 {
		s.addTask("news", i, "A long headline about the regional transport plan, part "+strconv.Itoa(i+1), map[string]any{"text": "x"})
	}
	s.addTask("sport", 1, "Match report", map[string]any{"text": "y"})
	gus, token := s.editor("Gus", "news")
	id, _ := claimFor(t, s, token)
	tb := newTab(t, 390, 844)
	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.opsSignIn(s)
	tb.waitJS("the claim", `document.querySelectorAll("#claims-table tbody tr").length === 1`)
	if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the pool view is %dpx wide at a 390px viewport", w)
	}
	tb.screenshot("ops-phone")
	tb.do("a task", chromedp.Navigate(s.base+"/ops#tasks/"+itoa(id)))
	tb.waitJS("the task detail", `!document.getElementById("task-detail").hidden`)
	if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the task view is %dpx wide at a 390px viewport", w)
	}
	tb.screenshot("ops-task-phone")
	tb.do("the editor", chromedp.Navigate(s.base+"/ops#editors/"+itoa(gus)))
	tb.waitJS("the editor's recent claims", `document.querySelectorAll("#ed-meta ul.recent-claims li").length === 1`)
	if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the editor view is %dpx wide at a 390px viewport", w)
	}
	tb.screenshot("ops-editor-phone")
}
