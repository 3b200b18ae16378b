package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/taskd/taskd"
)

// instructionsMarkdown is news's instructions in the browser tests, hostile
// parts included: they must render inert.
const instructionsMarkdown = "## House style\n\n- Check every **name** and date.\n- Cite the [style guide](https://example.com/style).\n\n" +
	`<script>window.pwned = 1</script><img src=x onerror="window.pwned = 1"> [bad](javascript:window.pwned=1)`

// TestBrowserInstructionsConfirm: an editor with news instructions it has not
// confirmed is given no news task and sees "New instructions for news: read
// and confirm" with them rendered (the hostile parts inert); after the
// confirmation the news task comes at once, with the instructions and their
// version beside it; a new version set while the task is held shows as new
// instructions to confirm, the task staying; at phone width the
// instructions sit below the task, folded.
func TestBrowserInstructionsConfirm(t *testing.T) {
	s := startServer(t, taskd.Config{})
	_, token := s.editor("Ada Editor", "news")
	s.admin("PUT", "/v1/admin/categories/news/instructions", map[string]string{"markdown": instructionsMarkdown}, http.StatusOK, nil)
	s.addTask("news", 5, "Council votes on the budget", map[string]any{"text": "The council met on Tuesday."})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.waitJS("the instructions to confirm", `!document.getElementById("instr-pending").hidden && document.querySelector(".instr-new h2") !== null`)
	if h := eval[string](tb, `document.querySelector(".instr-new h2").textContent`); h != "New instructions for news: read and confirm" {
		t.Errorf("pending heading %q", h)
	}
	if st := eval[string](tb, `document.body.dataset.state`); st != "waiting" {
		t.Errorf("state %q before the confirmation, want waiting: no news task", st)
	}
	checkInert := func(where string) {
		t.Helper()
		got := eval[[]string](tb, `(() => {
			const md = document.querySelector(`+js(where)+`);
			return [String(window.pwned), String(md.querySelectorAll("script, img, [onerror]").length),
				Array.from(md.querySelectorAll("a")).map(a => a.getAttribute("href") + " " + a.rel).join(",")];
		})()`)
		if len(got) != 3 || got[0] != "undefined" || got[1] != "0" || got[2] != "https://example.com/style noopener noreferrer" {
			t.Errorf("%s: pwned %v, active elements %v, links %q: want nothing run, none, only the style guide's with rel", where, got[0], got[1], got[2])
		}
	}
	checkInert(".instr-new .md")
	tb.screenshot("workspace-instructions-confirm")

	tb.do("confirm", chromedp.Click(chromedp.CSS(".instr-new button.primary")))
	tb.showing("Council votes on the budget")
	tb.waitJS("the instructions beside the task", `!document.getElementById("instr-current").hidden && document.getElementById("instr-pending").hidden`)
	if got := eval[string](tb, `document.getElementById("instr-cat").textContent + " v" + document.getElementById("instr-version").textContent + " open " + document.getElementById("instr-current").open`); got != "news v1 open true" {
		t.Errorf("instructions beside the task: %q, want news v1 open", got)
	}
	checkInert("#instr-body")
	// Beside: the panel's left edge is right of the task card's right edge.
	if side := eval[bool](tb, `document.getElementById("instructions").getBoundingClientRect().left >= document.getElementById("task").getBoundingClientRect().right`); !side {
		t.Error("at 1280 px the instructions are not beside the task")
	}
	tb.screenshot("workspace-instructions")

	// A new version while the task is held: the task stays, the new version
	// asks for a confirmation (seen on the next reading, forced here).
	s.admin("PUT", "/v1/admin/categories/news/instructions", map[string]string{"markdown": "## House style\n\nNow also check the **headline**."}, http.StatusOK, nil)
	tb.do("look again", chromedp.Evaluate[chromedp.Void](`document.dispatchEvent(new Event("visibilitychange"))`))
	tb.waitJS("version 2 to confirm", `document.querySelector(".instr-new") !== null && document.querySelector(".instr-new").textContent.includes("Version 2 (you confirmed version 1)")`)
	if st := eval[string](tb, `document.body.dataset.state + " " + document.getElementById("t-title").textContent`); st != "task Council votes on the budget" {
		t.Errorf("the held task after a new version: %q", st)
	}

	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.waitJS("laid out at phone width", `window.innerWidth === 390`)
	tb.do("confirm version 2", chromedp.Click(chromedp.CSS(".instr-new button.primary")))
	tb.waitJS("version 2 beside the task", `document.getElementById("instr-version").textContent === "2" && document.getElementById("instr-pending").hidden`)
	if below := eval[bool](tb, `document.getElementById("instructions").getBoundingClientRect().top >= document.getElementById("task").getBoundingClientRect().bottom`); !below {
		t.Error("at 390 px the instructions are not below the task")
	}
	if w := eval[float64](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the page is %v px wide at 390", w)
	}
	tb.do("fold", chromedp.Evaluate[chromedp.Void](`document.getElementById("instr-current").open = false`))
	tb.screenshot("workspace-instructions-phone")
}

// TestBrowserOpsInstructions: the console's Instructions view shows a
// category's instructions in an edit box with their version; saving a
// changed text makes the next version, shown with its preview and listed
// with the one before, which stays readable; an unchanged save makes none.
func TestBrowserOpsInstructions(t *testing.T) {
	s := startServer(t, taskd.Config{})
	s.admin("PUT", "/v1/admin/categories/news/instructions", map[string]string{"markdown": instructionsMarkdown}, http.StatusOK, nil)

	tb := newTab(t, 1280, 900)
	tb.opsSignIn(s)
	tb.do("open the instructions of news", chromedp.Navigate(s.base+"/ops#instructions/news"))
	tb.waitJS("the edit box", `!document.getElementById("in-editor").hidden && document.getElementById("in-text").value.startsWith("## House style")`)
	if v := eval[string](tb, `document.getElementById("in-version").textContent`); !strings.HasPrefix(v, "Version 1, saved ") {
		t.Errorf("version line %q", v)
	}
	if n := eval[int](tb, `document.querySelectorAll("#in-preview script, #in-preview img").length`); n != 0 {
		t.Errorf("%d active elements in the preview", n)
	}
	tb.do("edit and save",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("in-text").value = ""`),
		chromedp.SendKeys(chromedp.CSS("#in-text"), "Check *every* name."),
		chromedp.Click(chromedp.CSS("#in-save")),
	)
	tb.waitJS("version 2", `document.getElementById("in-version").textContent.startsWith("Version 2, saved ") && document.querySelectorAll("#in-versions li").length === 2`)
	if p := eval[string](tb, `document.getElementById("in-preview").innerHTML.trim()`); p != "<p>Check <em>every</em> name.</p>" {
		t.Errorf("preview %q", p)
	}
	if st := eval[string](tb, `document.getElementById("status").textContent`); !strings.Contains(st, "Saved as version 2") {
		t.Errorf("status %q", st)
	}
	var cur struct {
		Version  int    `json:"version"`
		Markdown string `json:"markdown"`
	}
	s.admin("GET", "/v1/admin/categories/news/instructions", nil, http.StatusOK, &cur)
	if cur.Version != 2 || cur.Markdown != "Check *every* name." {
		t.Errorf("after the save: %+v", cur)
	}
	tb.do("read version 1", chromedp.Click(chromedp.CSS(`#in-versions li:last-child button`)))
	tb.waitJS("version 1 shown", `!document.getElementById("in-old").hidden && document.getElementById("in-old-version").textContent === "1"`)
	tb.screenshot("ops-instructions")

	tb.do("save unchanged", chromedp.Click(chromedp.CSS("#in-save")))
	tb.waitJS("no change", `document.getElementById("status").textContent.startsWith("No change")`)
	if n := eval[int](tb, `document.querySelectorAll("#in-versions li").length`); n != 2 {
		t.Errorf("%d versions after an unchanged save, want 2", n)
	}

	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.waitJS("laid out at phone width", `window.innerWidth === 390`)
	if w := eval[float64](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the page is %v px wide at 390", w)
	}
	tb.screenshot("ops-instructions-phone")
}

// TestFirefoxInstructions: in Firefox too, new instructions ask for a
// confirmation, the task comes after it with them beside it, and the console
// saves a new version; the pages are never wider than the screen.
func TestFirefoxInstructions(t *testing.T) {
	s := startServer(t, taskd.Config{})
	_, token := s.editor("Ada Editor", "news")
	s.admin("PUT", "/v1/admin/categories/news/instructions", map[string]string{"markdown": instructionsMarkdown}, http.StatusOK, nil)
	s.addTask("news", 5, "Council votes on the budget", map[string]any{"text": "The council met on Tuesday."})

	tb := newFirefox(t, 1280, 900, 1)
	tb.signIn(s, token)
	tb.waitJS("the instructions to confirm", `document.querySelector(".instr-new h2") !== null && document.body.dataset.state === "waiting"`)
	if got := fxEval[string](tb, `String(window.pwned) + " " + document.querySelectorAll(".instr-new .md script, .instr-new .md img").length`); got != "undefined 0" {
		t.Errorf("pwned, active elements: %q, want undefined 0", got)
	}
	tb.click(".instr-new button.primary")
	tb.showing("Council votes on the budget")
	tb.waitJS("the instructions beside the task", `!document.getElementById("instr-current").hidden && document.getElementById("instr-version").textContent === "1"`)
	tb.screenshot("firefox-workspace-instructions")

	ops := newFirefox(t, 390, 844, 1)
	ops.opsSignIn(s)
	ops.navigate(s.base + "/ops#instructions/news")
	ops.waitJS("the edit box", `document.getElementById("in-text").value.startsWith("## House style")`)
	ops.run("clear the box", `document.getElementById("in-text").value = ""`)
	ops.typeInto("#in-text", "Check every name.")
	ops.click("#in-save")
	ops.waitJS("version 2", `document.getElementById("in-version").textContent.startsWith("Version 2, saved ")`)
	if w := fxEval[float64](ops, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the console is %v px wide at 390", w)
	}
	ops.screenshot("firefox-ops-instructions-phone")
}
