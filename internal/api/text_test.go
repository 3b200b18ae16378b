package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestEditorNameText: an editor's name with a control character, a line
// break, a bidi control or an invisible character, or a blank one, is 422
// and changes nothing, on create and on rename; a name that looks like
// another editor's is 409 duplicate naming that editor; a name is kept in
// NFC.
func TestEditorNameText(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	rev := b.editor(t, "rev", "news")
	ann := b.editor(t, "ann", "news")
	before := b.snapshot(t)
	for _, c := range []struct{ name, says string }{
		{`nul\u0000`, "name must not hold U+0000"},
		{`\u001b[31mred`, "name must not hold U+001B"},
		{`two\nlines`, "name must not hold U+000A (a line break)"},
		{`   `, "name must not be blank"},
		{`\t`, "name must not hold U+0009"},
		{` rev`, "name must not start or end with a space"},
		{`ann\u202egnp.exe`, "name must not hold U+202E (a bidi control)"},
		{`a\u200bnn`, "name must not hold U+200B"},
		{`a\u2066nn`, "name must not hold U+2066"},
		{`ann\u2028`, "name must not hold U+2028"},
	} {
		msg := wantError(t, b.do(t, "POST", "/v1/editors", adminToken, fmt.Sprintf(`{"name":"%s","categories":["news"]}`, c.name)),
			http.StatusUnprocessableEntity, "invalid")
		if !strings.Contains(msg, c.says) {
			t.Errorf("create %s: %q, want it to say %q", c.name, msg, c.says)
		}
		msg = wantError(t, b.do(t, "PATCH", fmt.Sprintf("/v1/editors/%d", ann.ID), adminToken, fmt.Sprintf(`{"name":"%s"}`, c.name)),
			http.StatusUnprocessableEntity, "invalid")
		if !strings.Contains(msg, c.says) {
			t.Errorf("rename to %s: %q, want it to say %q", c.name, msg, c.says)
		}
	}
	// "rеv" with a Cyrillic е looks like "rev".
	msg := wantError(t, b.do(t, "POST", "/v1/editors", adminToken, `{"name":"r\u0435v","categories":["news"]}`), http.StatusConflict, "duplicate")
	if !strings.Contains(msg, fmt.Sprintf(`looks like the name of editor %d, "rev"`, rev.ID)) {
		t.Errorf("create r\u0435v: %q, want it to name editor %d", msg, rev.ID)
	}
	wantError(t, b.do(t, "PATCH", fmt.Sprintf("/v1/editors/%d", ann.ID), adminToken, `{"name":"r\u0435v"}`), http.StatusConflict, "duplicate")
	b.unchanged(t, before)
	if d := b.getEditor(t, ann.ID); d.Name != "ann" {
		t.Errorf("ann after refused renames: %q", d.Name)
	}
	// NFC: "e" and a combining diaeresis are kept as "ë".
	var e editorInfo
	wantJSON(t, b.do(t, "POST", "/v1/editors", adminToken, `{"name":"Zoe\u0308","categories":["news"]}`), http.StatusCreated, &e)
	b.secret(e.Token)
	if d := b.getEditor(t, e.ID); d.Name != "Zo\u00eb" {
		t.Errorf("name kept as %q, want %q", d.Name, "Zo\u00eb")
	}
}

// TestSubmitText: a decision that is not a word of [a-z0-9_-] (a formula, a
// capital, a space) and notes with a control character other than line
// breaks and tabs, or a bidi control, are 422 and change nothing; notes of
// several lines are fine.
func TestSubmitText(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ed := b.editorWith(t, "ed", 0, map[string][]string{"desk": {"edit"}}, "desk")
	rev := b.editorWith(t, "rev", 0, map[string][]string{"desk": {"review"}}, "desk")
	id := b.add(t, newTask{Category: "desk", Title: "story"})[0]
	a, _ := b.flowNext(t, ed.Token)
	b.flowSubmit(t, ed.Token, a, `{"text":"v1"}`, "", "")
	r, _ := b.flowNext(t, rev.Token)
	if r.Task.ID != id {
		t.Fatalf("the reviewer got task %d, want %d", r.Task.ID, id)
	}
	before := b.snapshot(t)
	for _, c := range []struct{ decision, notes, says string }{
		{`=1+1`, ``, "decision must be lowercase letters, digits"},
		{`@SUM(A1)`, ``, "decision must be lowercase letters"},
		{`-1`, ``, "decision must be lowercase letters"},
		{`Approve`, ``, "decision must be lowercase letters"},
		{`send back`, ``, "decision must be lowercase letters"},
		{`approve\u202e`, ``, "decision must be lowercase letters"},
		{`send_back`, `bell\u0007`, "notes must not hold U+0007 (a control character) at character 5"},
		{`send_back`, `nul\u0000`, "notes must not hold U+0000"},
		{`send_back`, `\u001b[2Jclear`, "notes must not hold U+001B"},
		{`send_back`, `fix \u202eeht`, "notes must not hold U+202E (a bidi control)"},
		{`send_back`, `fix\u2067`, "notes must not hold U+2067"},
		{`send_back`, `c1\u009b`, "notes must not hold U+009B"},
	} {
		msg := wantError(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), rev.Token,
			fmt.Sprintf(`{"fence":%d,"result":{},"decision":"%s","notes":"%s"}`, r.Fence, c.decision, c.notes)),
			http.StatusUnprocessableEntity, "invalid")
		if !strings.Contains(msg, c.says) {
			t.Errorf("decision %s, notes %s: %q, want it to say %q", c.decision, c.notes, msg, c.says)
		}
	}
	b.unchanged(t, before)
	// Notes of several lines, with tabs and CR LF, are kept as they are.
	notes := "fix the lede:\n\t- the date\r\n\t- the name"
	b.flowSubmit(t, rev.Token, r, `{}`, "send_back", notes)
	if ft, raw := b.flowTask(t, id); len(ft.Results) != 2 || ft.Results[1].Notes != notes || ft.Results[1].Decision != "send_back" {
		t.Errorf("after the send back: %s", raw)
	}
}

// TestStageLimitsNeedStages: stages for a category that has none configured
// are 422 naming the category, on create and on update, and change nothing.
func TestStageLimitsNeedStages(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "desk", "news")
	before := b.snapshot(t)
	msg := wantError(t, b.do(t, "POST", "/v1/editors", adminToken, `{"name":"bob","categories":["news"],"stages":{"news":["review"]}}`),
		http.StatusUnprocessableEntity, "invalid")
	if !strings.Contains(msg, `category "news" has no stages`) {
		t.Errorf("create: %q, want it to say news has no stages", msg)
	}
	msg = wantError(t, b.do(t, "PATCH", fmt.Sprintf("/v1/editors/%d", ann.ID), adminToken, `{"stages":{"desk":["review"],"news":["edit"]}}`),
		http.StatusUnprocessableEntity, "invalid")
	if !strings.Contains(msg, `category "news" has no stages`) {
		t.Errorf("update: %q, want it to say news has no stages", msg)
	}
	b.unchanged(t, before)
	if d := b.getEditor(t, ann.ID); d.Stages != nil {
		t.Errorf("ann's stages after a refused update: %v", d.Stages)
	}
}
