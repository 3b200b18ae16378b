package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/taskd/taskd"
)

// draftKeys is a JavaScript expression: the keys of the drafts the
// workspace keeps in localStorage whose key starts with the prefix plus
// suffix, sorted.
func draftKeys(suffix string) string {
	return `Object.keys(localStorage).filter(k => k.startsWith("taskd.draft.v1." + ` + js(suffix) + `)).sort()`
}

// keptHeading is the heading of the draft kept from the claim on task id.
func keptHeading(id int64, reason string) string {
	return "Your claim on task #" + itoa(id) + " ended (" + reason + "). Your unfinished text is kept below: copy it."
}

// kept is a JavaScript expression: the kept draft of task id, its heading,
// edited text and notes joined by "|", or "" when none is shown.
func kept(id int64) string {
	return `(() => { const k = document.querySelector('#drafts:not([hidden]) .draft-kept[data-task="` + itoa(id) + `"]');
		if (!k) { return ""; }
		const f = n => { const t = k.querySelector('textarea[data-field="' + n + '"]'); return t ? t.value : "-"; };
		return k.querySelector("h2").textContent + "|" + f("edited") + "|" + f("notes"); })()`
}

// waitWithin waits until the JavaScript expression is truthy, failing the
// test if that takes longer than d.
func (tb *tab) waitWithin(d time.Duration, what, expr string) {
	tb.t.Helper()
	if _, err := chromedp.Run(tb.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(d))); err != nil {
		text, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		tb.t.Fatalf("%s not within %v (%s): %v; the page says:\n%s", what, d, expr, err, text)
	}
}

// draftTask adds the task of the draft tests: a desk task, whose edit stage
// takes the edited text.
func draftTask(s *server) int64 {
	return s.addTask("desk", 5, "Harbour budget", map[string]any{"text": "The council voted on Tuesday."})
}

const (
	draftEdited = "The council voted 7 to 2 on Tuesday."
	draftNotes  = "Check the vote count with the clerk."
)

// typeDraft types the draft tests' edit into the form of the task shown and
// waits until the page has kept it in the browser.
func (tb *tab) typeDraft() {
	tb.t.Helper()
	tb.do("type an edit and notes",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("edited").value = ""`),
		chromedp.SendKeys(chromedp.CSS("#edited"), draftEdited),
		chromedp.SendKeys(chromedp.CSS("#notes"), draftNotes),
	)
	tb.waitJS("the draft kept in the browser", draftKeys("")+`.some(k => { const d = JSON.parse(localStorage.getItem(k));
		return d.edited === `+js(draftEdited)+` && d.notes === `+js(draftNotes)+`; })`)
}

// TestBrowserDraftKeptAfterLostClaim: what an editor types for a claim is
// kept in the browser as it is typed; a reload while the claim lives puts it
// back into the form; a claim that ends (cancelled by an operator, or its
// lease run out while the tab was hidden) shows it above the task with the
// reason, to copy, still there after a reload, until dismissed; an editor
// who holds the task again under a new claim may put it back into the form,
// and its submit removes it.
func TestBrowserDraftKeptAfterLostClaim(t *testing.T) {
	for _, c := range []struct {
		name, reason string
		lose         func(s *server, tb *tab, id int64)
	}{
		{"cancelled", "an operator cancelled the task", func(s *server, _ *tab, id int64) {
			s.admin("POST", fmt.Sprintf("/v1/admin/tasks/%d/cancel", id), map[string]any{}, http.StatusNoContent, nil)
		}},
		{"expired", "its lease ran out", func(_ *server, tb *tab, _ int64) {
			// The tab is hidden: no heartbeat goes out, the lease runs out.
			tb.do("hide the tab", chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
				document.dispatchEvent(new Event("visibilitychange"))`))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := taskd.Config{}
			cfg.Dispatch.LeaseTTL = 3 * time.Second // heartbeats every second
			s := startServer(t, cfg)
			_, token := s.editor("Ada Editor", "desk")
			id := draftTask(s)

			tb := newTab(t, 1280, 900)
			tb.signIn(s, token)
			tb.showing("Harbour budget")
			fence := eval[string](tb, `document.getElementById("task").dataset.fence`)
			if got := eval[string](tb, `document.getElementById("edited").value`); got != "The council voted on Tuesday." {
				t.Fatalf("the edit starts from %q, want the payload's text", got)
			}
			tb.typeDraft()

			// A reload while the claim lives: the same claim, its draft back
			// in the form.
			tb.do("reload", chromedp.Reload())
			tb.showing("Harbour budget")
			if got := eval[string](tb, `document.getElementById("task").dataset.fence + "|" + document.getElementById("edited").value + "|" + document.getElementById("notes").value`); got != fence+"|"+draftEdited+"|"+draftNotes {
				t.Errorf("after a reload: fence|edited|notes = %q, want %q", got, fence+"|"+draftEdited+"|"+draftNotes)
			}
			if !eval[bool](tb, `document.getElementById("drafts").hidden`) {
				t.Error("a draft is shown as kept while its claim lives")
			}

			c.lose(s, tb, id)
			want := keptHeading(id, c.reason) + "|" + draftEdited + "|" + draftNotes
			tb.waitJS("the draft kept on the page", kept(id)+` === `+js(want))
			if c.name == "cancelled" {
				tb.waitJS("the calm waiting state", `document.body.dataset.state === "waiting"`)
				tb.screenshot("workspace-draft-kept")
				// The editor copies the edited text: it is copied, or left
				// selected where the browser refuses.
				tb.do("copy", chromedp.Click(chromedp.CSS(`.draft-kept[data-task="`+itoa(id)+`"] .kept-field button[data-act="copy"]`)))
				tb.waitJS("the copy done", `/^(Copied|Selected)/.test(document.querySelector('.draft-kept .kept-field button[data-act="copy"]').textContent)`)
				if got := eval[string](tb, `(() => { const t = document.activeElement; return t.dataset.field + " " + t.selectionStart + "-" + t.selectionEnd; })()`); got != fmt.Sprintf("edited 0-%d", len(draftEdited)) {
					t.Errorf("after the copy the focus and selection are %q, want the whole edited text", got)
				}
				// Kept across a reload (the page learns nothing new: the
				// reason stays), at phone width too.
				tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile), chromedp.Reload())
				tb.waitJS("the draft kept after a reload", kept(id)+` === `+js(want)+` && document.body.dataset.state === "waiting"`)
				if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 390 {
					t.Errorf("the page is %dpx wide at a 390px viewport", w)
				}
				tb.screenshot("workspace-draft-kept-phone")
				tb.do("dismiss", chromedp.Click(chromedp.CSS(`.draft-kept[data-task="`+itoa(id)+`"] button[data-act="dismiss"]`)))
				tb.waitJS("the draft gone", `document.getElementById("drafts").hidden && `+draftKeys("")+`.length === 0`)
				return
			}

			// Expired: back at the tab, the editor holds the task again under
			// a new claim, and may put its draft back into the form.
			tb.waitJS("the away state", `document.body.dataset.state === "away"`)
			tb.do("show the tab", chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, "hidden", {configurable: true, get: () => false});
				document.dispatchEvent(new Event("visibilitychange"))`))
			tb.waitJS("the task under a new claim", `document.body.dataset.state === "task" && document.getElementById("task").dataset.fence !== `+js(fence))
			if got := eval[string](tb, `document.getElementById("edited").value + "|" + document.getElementById("notes").value`); got != "The council voted on Tuesday.|" {
				t.Errorf("the new claim's form %q: want it fresh until the editor puts the draft back", got)
			}
			tb.waitJS("the offer to put it back", `document.querySelector('.draft-kept[data-task="`+itoa(id)+`"] button[data-act="put-back"]') !== null`)
			if got := eval[string](tb, `document.querySelector(".kept-offer").textContent`); !strings.Contains(got, "again, under a new claim") {
				t.Errorf("offer %q does not say it is a new claim", got)
			}
			tb.screenshot("workspace-draft-put-back")
			tb.do("put it back", chromedp.Click(chromedp.CSS(`button[data-act="put-back"]`)))
			tb.waitJS("the draft in the form", `document.getElementById("edited").value === `+js(draftEdited)+` && document.getElementById("notes").value === `+js(draftNotes)+` && document.getElementById("drafts").hidden`)
			newFence := eval[string](tb, `document.getElementById("task").dataset.fence`)
			if got := eval[[]string](tb, draftKeys("")); len(got) != 1 || !strings.HasSuffix(got[0], "."+itoa(id)+"."+newFence) {
				t.Errorf("drafts kept %q, want the new claim's alone (fence %s)", got, newFence)
			}
			tb.do("submit", chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl)))
			tb.waitJS("the submit done", `document.body.dataset.state === "waiting"`)
			if got := eval[[]string](tb, draftKeys("")); len(got) != 0 {
				t.Errorf("drafts %q left after the submit", got)
			}
			var res struct {
				Results []struct {
					Result struct {
						Text string `json:"text"`
					} `json:"result"`
				} `json:"results"`
			}
			s.admin("GET", "/v1/tasks/"+itoa(id)+"/results", nil, http.StatusOK, &res)
			if len(res.Results) != 1 || res.Results[0].Result.Text != draftEdited {
				t.Errorf("results %+v, want the edit put back", res.Results)
			}
		})
	}
}

// TestBrowserDraftNeverForAnotherEditor: an editor's draft stays in the
// browser when its session ends without a sign out, but another editor
// signing in there and taking the same task sees none of it; the first
// editor, back, sees it kept (its claim ended meanwhile) and without an
// offer to put it back (the task is another's); signing out removes it.
func TestBrowserDraftNeverForAnotherEditor(t *testing.T) {
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 3 * time.Second
	s := startServer(t, cfg)
	adaID, ada := s.editor("Ada Editor", "desk")
	_, bo := s.editor("Bo", "desk")
	id := draftTask(s)

	tb := newTab(t, 1280, 900)
	tb.signIn(s, ada)
	tb.showing("Harbour budget")
	tb.typeDraft()
	adaKeys := draftKeys(itoa(adaID) + ".")

	// Ada's token is replaced: her page's next call ends its session, and
	// it shows the sign-in form. Her claim is taken back.
	var fresh struct {
		Token string `json:"token"`
	}
	s.admin("POST", fmt.Sprintf("/v1/editors/%d/token", adaID), map[string]any{}, http.StatusOK, &fresh)
	tb.waitJS("the sign-in form in place", `document.body.dataset.state === "signed-out"`)
	s.admin("POST", fmt.Sprintf("/v1/admin/tasks/%d/release", id), map[string]any{}, http.StatusNoContent, nil)

	// Bo signs in on the same browser and takes the task.
	tb.do("Bo signs in", chromedp.SendKeys(chromedp.CSS("#signed-out #token"), bo), chromedp.Submit(chromedp.CSS("#signed-out #token")))
	tb.waitJS("Bo's workspace", `document.querySelector(".who") !== null && document.querySelector(".who").textContent === "Bo"`)
	tb.showing("Harbour budget")
	if got := eval[string](tb, `document.getElementById("edited").value + "|" + document.getElementById("notes").value`); got != "The council voted on Tuesday.|" {
		t.Errorf("Bo's form %q: want the payload's text and no notes", got)
	}
	if got := eval[string](tb, `document.getElementById("drafts").hidden + " " + document.querySelectorAll(".draft-kept").length + " " + document.body.innerText.includes(`+js(draftNotes)+`)`); got != "true 0 false" {
		t.Errorf("Bo's page: drafts hidden, kept, Ada's notes shown = %q, want true 0 false", got)
	}
	// Ada's draft is still in the browser, untouched by Bo's page: kept
	// apart by the editor, not wiped.
	if got := eval[[]string](tb, adaKeys+`.map(k => JSON.parse(localStorage.getItem(k)).notes + " lost=" + JSON.parse(localStorage.getItem(k)).lost)`); len(got) != 1 || got[0] != draftNotes+" lost=null" {
		t.Errorf("Ada's drafts in the browser %q, want hers, not marked", got)
	}

	tb.do("Bo signs out", chromedp.Click(chromedp.CSS("form.signout button")))
	tb.waitJS("the sign-in page", `document.body.classList.contains("signin") && document.getElementById("token") !== null`)
	tb.signIn(s, fresh.Token)
	want := keptHeading(id, "it ended while this page was closed") + "|" + draftEdited + "|" + draftNotes
	tb.waitJS("Ada's draft kept", kept(id)+` === `+js(want))
	if n := eval[int](tb, `document.querySelectorAll('button[data-act="put-back"]').length`); n != 0 {
		t.Errorf("%d offers to put the draft back while Bo holds the task", n)
	}
	tb.do("Ada signs out", chromedp.Click(chromedp.CSS("form.signout button")))
	tb.waitJS("the sign-in page", `document.body.classList.contains("signin") && document.getElementById("token") !== null`)
	if got := eval[[]string](tb, adaKeys); len(got) != 0 {
		t.Errorf("Ada's drafts %q left after she signed out", got)
	}
}

// TestBrowserInstructionsPendingAtOnce: when a submit's answer says a
// category is held back for instructions the editor has not confirmed
// (Taskd-Instructions-Pending), the page asks for the confirmation at once,
// not at its next periodic reading (every 20 s).
func TestBrowserInstructionsPendingAtOnce(t *testing.T) {
	s := startServer(t, taskd.Config{})
	_, token := s.editor("Ada Editor", "news", "sport")
	s.addTask("sport", 1, "Match report", map[string]any{"text": "A draw."})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Match report")
	if !eval[bool](tb, `document.getElementById("instr-pending").hidden`) {
		t.Fatal("instructions to confirm before any were set")
	}
	// Set now: the page read the instructions when it opened, and reads
	// them next about 20 s later.
	s.admin("PUT", "/v1/admin/categories/news/instructions", map[string]string{"markdown": "Check every name."}, http.StatusOK, nil)
	s.addTask("news", 5, "Council votes", map[string]any{"text": "x"})
	tb.do("submit", chromedp.Click(chromedp.CSS("#b-submit")))
	tb.waitWithin(8*time.Second, "the instructions to confirm", `document.querySelector('.instr-new[data-category="news"]') !== null && document.body.dataset.state === "waiting"`)
}

// TestFirefoxDraftKeptAndInstructionsPending: in Firefox too, what an editor
// types is kept as it is typed, back in the form after a reload, and shown
// with the reason when an operator cancels the task; a submit whose answer
// says a category is held back for instructions makes the page ask for the
// confirmation at once.
func TestFirefoxDraftKeptAndInstructionsPending(t *testing.T) {
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 3 * time.Second // heartbeats every second
	s := startServer(t, cfg)
	_, token := s.editor("Ada Editor", "desk", "news")
	id := draftTask(s)
	s.addTask("desk", 1, "Ferry timetable", map[string]any{"text": "Ferries run hourly."})

	tb := newFirefox(t, 1280, 900, 1)
	tb.signIn(s, token)
	tb.showing("Harbour budget")
	tb.run("clear the edit", `document.getElementById("edited").value = ""`)
	tb.typeInto("#edited", draftEdited)
	tb.typeInto("#notes", draftNotes)
	tb.waitJS("the draft kept in the browser", draftKeys("")+`.some(k => JSON.parse(localStorage.getItem(k)).notes === `+js(draftNotes)+`)`)
	tb.navigate(s.base + "/")
	tb.showing("Harbour budget")
	if got := fxEval[string](tb, `document.getElementById("edited").value + "|" + document.getElementById("notes").value`); got != draftEdited+"|"+draftNotes {
		t.Errorf("after a reload the form holds %q", got)
	}

	s.admin("POST", fmt.Sprintf("/v1/admin/tasks/%d/cancel", id), map[string]any{}, http.StatusNoContent, nil)
	tb.waitJS("the draft kept on the page", kept(id)+` === `+js(keptHeading(id, "an operator cancelled the task")+"|"+draftEdited+"|"+draftNotes))
	tb.showing("Ferry timetable")

	// Instructions set now, read by the page next only some 20 s later: the
	// submit's answer says news is held back.
	s.admin("PUT", "/v1/admin/categories/news/instructions", map[string]string{"markdown": "Check every name."}, http.StatusOK, nil)
	s.addTask("news", 9, "Council votes", map[string]any{"text": "x"})
	tb.click("#b-submit")
	submitted := time.Now()
	tb.waitJS("the instructions to confirm", `document.querySelector('.instr-new[data-category="news"]') !== null && document.body.dataset.state === "waiting"`)
	if d := time.Since(submitted); d > 10*time.Second {
		t.Errorf("the instructions to confirm showed %v after the submit whose answer named them", d)
	}
	if w := fxEval[int](tb, `document.documentElement.scrollWidth`); w > 1280 {
		t.Errorf("the page is %dpx wide", w)
	}
	tb.screenshot("firefox-workspace-draft-kept")
	tb.click(`.draft-kept button[data-act="dismiss"]`)
	tb.waitJS("the draft gone", `document.getElementById("drafts").hidden && `+draftKeys("")+`.length === 0`)
}
