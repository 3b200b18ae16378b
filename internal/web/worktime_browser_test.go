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

	"github.com/taskd/taskd"
)

// claimWall is the wall time of task id's first claim, from its audit trail:
// its 'claimed' event to its 'submitted' one.
func claimWall(t *testing.T, s *server, id int64) time.Duration {
	t.Helper()
	var page struct {
		Events []struct {
			Kind string    `json:"kind"`
			At   time.Time `json:"at"`
		} `json:"events"`
	}
	s.admin("GET", fmt.Sprintf("/v1/tasks/%d/events", id), nil, http.StatusOK, &page)
	var claimed, submitted time.Time
	for _, ev := range page.Events {
		switch ev.Kind {
		case "claimed":
			claimed = ev.At
		case "submitted":
			submitted = ev.At
		}
	}
	if claimed.IsZero() || submitted.IsZero() {
		t.Fatalf("task %d's events: %+v, want a claim and a submit", id, page.Events)
	}
	return submitted.Sub(claimed)
}

// TestBrowserWorkingTime: the workspace counts a claim's active time only
// while its tab is visible (a hidden tab stops the clock), sends it with the
// submit, and shows the editor its own figures; the console's editor page
// shows them with a chart of active hours and tasks per day. Screenshots at
// desktop and phone width.
func TestBrowserWorkingTime(t *testing.T) {
	const hidden = 4 * time.Second
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 9 * time.Second // heartbeats every 3s while present: a hidden tab keeps its claim for 4s
	s := startServer(t, cfg)
	edID, token := s.editor("Wren", "news")
	id := s.addTask("news", 1, "Council budget", map[string]any{"text": "The council met."})
	s.addTask("news", 1, "Ferry timetable", map[string]any{"text": "Ferries run."})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Council budget")
	time.Sleep(2 * time.Second)
	tb.do("hide the tab", chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
		document.dispatchEvent(new Event("visibilitychange"))`))
	time.Sleep(hidden)
	tb.do("show the tab", chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, "hidden", {configurable: true, get: () => false});
		document.dispatchEvent(new Event("visibilitychange"))`))
	time.Sleep(2 * time.Second)
	tb.do("submit", chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	tb.showing("Ferry timetable")

	var wt struct {
		Total struct {
			ActiveMS  int64 `json:"active_ms"`
			Submitted int   `json:"submitted"`
		} `json:"total"`
	}
	s.admin("GET", fmt.Sprintf("/v1/editors/%d/time?days=1", edID), nil, http.StatusOK, &wt)
	wall := claimWall(t, s, id)
	active := time.Duration(wt.Total.ActiveMS) * time.Millisecond
	// About wall - hidden: the clock's second of granularity either way.
	if wt.Total.Submitted != 1 || active < 2*time.Second || active > wall-hidden+1500*time.Millisecond {
		t.Errorf("active %v of a claim of %v with %v hidden, %d submitted; want about %v, 1", active, wall, hidden, wt.Total.Submitted, wall-hidden)
	}

	// The editor's own figures.
	tb.waitJS("my time", `!document.getElementById("my-time").hidden && document.getElementById("mt-window").textContent.includes("1 task")`)
	if got := eval[string](tb, `document.getElementById("my-time").textContent`); !strings.Contains(got, "today") || !strings.Contains(got, "per active hour") {
		t.Errorf("my time %q", got)
	}
	tb.screenshot("workspace-time")
	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.waitJS("laid out at phone width", `window.innerWidth === 390`)
	if w := eval[float64](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the workspace is %v px wide at 390", w)
	}
	tb.screenshot("workspace-time-phone")

	// The console's editor page.
	ops := newTab(t, 1280, 1000)
	ops.opsSignIn(s)
	ops.do("the editor", chromedp.Navigate(s.base+"/ops#editors/"+strconv.FormatInt(edID, 10)))
	ops.waitJS("the working time", `document.getElementById("ed-time").dataset.loaded === "`+strconv.FormatInt(edID, 10)+`"`)
	bars := eval[[]string](ops, `Array.from(document.querySelectorAll("#ed-time-chart rect.bar-active")).map(r => r.dataset.day)`)
	days := eval[int](ops, `document.querySelectorAll("#ed-time-chart rect.hit").length`)
	today := time.Now().UTC().Format(time.DateOnly)
	if len(bars) != 1 || bars[0] != today || days != 14 {
		t.Errorf("chart: active bars on %q of %d days, want one today (%s) of 14", bars, days, today)
	}
	if n := eval[int](ops, `document.querySelectorAll("#ed-time-chart polyline.line-submits").length`); n != 1 {
		t.Errorf("%d task lines, want 1", n)
	}
	row := eval[string](ops, `Array.from(document.querySelectorAll("#ed-time-table tbody tr")).map(r => Array.from(r.cells).map(c => c.textContent).join("|")).join("/")`)
	if !strings.HasPrefix(row, "news|") || !strings.Contains(row, "|1|") || !strings.HasSuffix(row, "|–|–") {
		t.Errorf("table %q, want news with 1 task, no send-back rate, no gold", row)
	}
	if kpis := eval[string](ops, `document.getElementById("ed-time-kpis").textContent`); !strings.Contains(kpis, "1 task") || !strings.Contains(kpis, "per active hour") {
		t.Errorf("kpis %q", kpis)
	}
	if w := eval[[]float64](ops, `(t => [t.scrollWidth, t.parentElement.clientWidth])(document.getElementById("ed-time-table"))`); w[0] > w[1] {
		t.Errorf("the per-category table is %v px wide in a card %v px wide: it scrolls sideways at desktop width", w[0], w[1])
	}
	ops.do("scroll to the chart", chromedp.Evaluate[chromedp.Void](`document.getElementById("ed-time").scrollIntoView()`))
	ops.screenshot("ops-editor-time")
	ops.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	ops.waitJS("laid out at phone width", `window.innerWidth === 390`)
	if w := eval[float64](ops, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the console is %v px wide at 390", w)
	}
	ops.screenshot("ops-editor-time-phone")
}

// TestFirefoxOpsWorkingTime: the console's working-time chart and table in
// Firefox, at desktop and phone width, the page never wider than the screen.
func TestFirefoxOpsWorkingTime(t *testing.T) {
	s := startServer(t, liveClaims())
	edID, token := s.editor("Wren", "news")
	s.addTask("news", 1, "Council budget", map[string]any{"text": "The council met."})
	id, fence := claimFor(t, s, token)
	editorCall(t, s, token, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", id), fmt.Sprintf(`{"fence":%d,"active_ms":100}`, fence), http.StatusOK, nil)
	time.Sleep(300 * time.Millisecond)
	editorCall(t, s, token, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), fmt.Sprintf(`{"fence":%d,"result":{},"active_ms":200}`, fence), http.StatusOK, nil)

	for _, c := range []struct {
		name string
		w, h int
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		tb := newFirefox(t, c.w, c.h, 1)
		tb.opsSignIn(s)
		tb.navigate(s.base + "/ops#editors/" + strconv.FormatInt(edID, 10))
		tb.waitJS("the working time", `document.getElementById("ed-time").dataset.loaded === "`+strconv.FormatInt(edID, 10)+`"`)
		if n := fxEval[int](tb, `document.querySelectorAll("#ed-time-chart rect.bar-active").length`); n != 1 {
			t.Errorf("%s: %d active bars, want 1", c.name, n)
		}
		if row := fxEval[string](tb, `document.querySelector("#ed-time-table tbody tr").dataset.category`); row != "news" {
			t.Errorf("%s: table row %q, want news", c.name, row)
		}
		if w := fxEval[float64](tb, `document.documentElement.scrollWidth`); w > float64(c.w) {
			t.Errorf("%s: the page is %v px wide at %d", c.name, w, c.w)
		}
		tb.screenshot("firefox-ops-editor-time-" + c.name)
	}
}
