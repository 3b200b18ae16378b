package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

type instructionsAnswer struct {
	Category  string `json:"category"`
	Version   int    `json:"version"`
	Markdown  string `json:"markdown"`
	HTML      string `json:"html"`
	Source    string `json:"source"`
	CreatedAt string `json:"created_at"`
	Changed   bool   `json:"changed"`
}

type myInstructionsAnswer struct {
	Instructions []struct {
		Category  string `json:"category"`
		Version   int    `json:"version"`
		Confirmed int    `json:"confirmed_version"`
		Pending   bool   `json:"pending"`
		HTML      string `json:"html"`
		CreatedAt string `json:"created_at"`
	} `json:"instructions"`
}

func (b *bundle) setInstructions(t *testing.T, cat, md string) instructionsAnswer {
	t.Helper()
	var out instructionsAnswer
	wantJSON(t, b.do(t, "PUT", "/v1/admin/categories/"+cat+"/instructions", adminToken, mustJSON(t, map[string]string{"markdown": md})), http.StatusOK, &out)
	return out
}

func TestInstructionsRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	wantError(t, b.do(t, "GET", "/v1/admin/categories/news/instructions", adminToken, ""), 404, "not_found")

	v1 := b.setInstructions(t, "news", "# Rules\n\nBe *kind*. <script>alert(1)</script> [x](javascript:alert(1))")
	if v1.Version != 1 || !v1.Changed || v1.Source != "api" || v1.Category != "news" {
		t.Errorf("first PUT = %+v; want version 1, changed, from the API", v1)
	}
	if !strings.Contains(v1.HTML, "<em>kind</em>") || strings.Contains(v1.HTML, "<script") || strings.Contains(v1.HTML, "javascript:") {
		t.Errorf("html = %q; want Markdown rendered, the script and the link inert", v1.HTML)
	}
	parseTime(t, v1.CreatedAt)
	if same := b.setInstructions(t, "news", v1.Markdown); same.Version != 1 || same.Changed {
		t.Errorf("PUT of the same text = %+v; want version 1, unchanged", same)
	}
	if v2 := b.setInstructions(t, "news", "Be brief."); v2.Version != 2 || !v2.Changed {
		t.Errorf("PUT of a new text = %+v; want version 2", v2)
	}
	var cur, old instructionsAnswer
	wantJSON(t, b.do(t, "GET", "/v1/admin/categories/news/instructions", adminToken, ""), 200, &cur)
	wantJSON(t, b.do(t, "GET", "/v1/admin/categories/news/instructions?version=1", adminToken, ""), 200, &old)
	if cur.Version != 2 || cur.Markdown != "Be brief." || old.Version != 1 || old.Markdown != v1.Markdown {
		t.Errorf("current = %+v, version 1 = %+v", cur, old)
	}
	var list struct {
		Category string `json:"category"`
		Versions []struct {
			Version   int    `json:"version"`
			Source    string `json:"source"`
			CreatedAt string `json:"created_at"`
		} `json:"versions"`
	}
	wantJSON(t, b.do(t, "GET", "/v1/admin/categories/news/instructions/versions", adminToken, ""), 200, &list)
	if len(list.Versions) != 2 || list.Versions[0].Version != 2 || list.Versions[1].Version != 1 {
		t.Errorf("versions = %+v; want 2, 1", list)
	}

	before := b.snapshot(t)
	versions := b.count(t, `SELECT COUNT(*) FROM category_instructions`)
	for _, c := range []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"no token", "PUT", "/v1/admin/categories/news/instructions", "", `{"markdown":"x"}`, 401, "unauthorized"},
		{"editor token", "PUT", "/v1/admin/categories/news/instructions", e.Token, `{"markdown":"x"}`, 403, "forbidden"},
		{"no markdown", "PUT", "/v1/admin/categories/news/instructions", adminToken, `{}`, 422, "invalid"},
		{"markdown null", "PUT", "/v1/admin/categories/news/instructions", adminToken, `{"markdown":null}`, 422, "invalid"},
		{"no body", "PUT", "/v1/admin/categories/news/instructions", adminToken, ``, 400, "bad_request"},
		{"unknown field", "PUT", "/v1/admin/categories/news/instructions", adminToken, `{"markdown":"x","html":"<b>"}`, 400, "bad_request"},
		{"not a string", "PUT", "/v1/admin/categories/news/instructions", adminToken, `{"markdown":5}`, 400, "bad_request"},
		{"too long", "PUT", "/v1/admin/categories/news/instructions", adminToken, `{"markdown":"` + strings.Repeat("x", 64<<10+1) + `"}`, 422, "invalid"},
		{"lone surrogate", "PUT", "/v1/admin/categories/news/instructions", adminToken, `{"markdown":"a\ud800"}`, 422, "invalid"},
		{"bad category", "PUT", "/v1/admin/categories/%20news/instructions", adminToken, `{"markdown":"x"}`, 422, "invalid"},
		{"bad version", "GET", "/v1/admin/categories/news/instructions?version=0", adminToken, "", 422, "invalid"},
		{"no such version", "GET", "/v1/admin/categories/news/instructions?version=3", adminToken, "", 404, "not_found"},
		{"unknown query", "GET", "/v1/admin/categories/news/instructions/versions?all=1", adminToken, "", 400, "bad_request"},
		{"editor reads admin", "GET", "/v1/admin/categories/news/instructions", e.Token, "", 403, "forbidden"},
		{"ack without version", "POST", "/v1/me/instructions/news/ack", e.Token, `{}`, 422, "invalid"},
		{"ack of version 0", "POST", "/v1/me/instructions/news/ack", e.Token, `{"version":0}`, 422, "invalid"},
		{"ack of an old version", "POST", "/v1/me/instructions/news/ack", e.Token, `{"version":1}`, 409, "instructions_changed"},
		{"ack of a future version", "POST", "/v1/me/instructions/news/ack", e.Token, `{"version":3}`, 404, "not_found"},
		{"ack of another category", "POST", "/v1/me/instructions/sport/ack", e.Token, `{"version":1}`, 404, "not_found"},
		{"ack by the admin", "POST", "/v1/me/instructions/news/ack", adminToken, `{"version":2}`, 403, "forbidden"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, b.do(t, c.method, c.path, c.token, c.body), c.status, c.code)
		})
	}
	b.unchanged(t, before)
	if n := b.count(t, `SELECT COUNT(*) FROM category_instructions`); n != versions {
		t.Errorf("refused requests left %d versions, want %d", n, versions)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editor_instruction_acks`); n != 0 {
		t.Errorf("refused requests recorded %d confirmations", n)
	}

	var mine myInstructionsAnswer
	wantJSON(t, b.do(t, "GET", "/v1/me/instructions", e.Token, ""), 200, &mine)
	if len(mine.Instructions) != 1 || !mine.Instructions[0].Pending || mine.Instructions[0].Version != 2 ||
		mine.Instructions[0].Confirmed != 0 || mine.Instructions[0].HTML != "<p>Be brief.</p>\n" {
		t.Fatalf("my instructions = %+v; want news version 2 pending", mine)
	}
	wantStatus(t, b.do(t, "POST", "/v1/me/instructions/news/ack", e.Token, `{"version":2}`), 200)
	wantStatus(t, b.do(t, "POST", "/v1/me/instructions/news/ack", e.Token, `{"version":2}`), 200)
	wantJSON(t, b.do(t, "GET", "/v1/me/instructions", e.Token, ""), 200, &mine)
	if len(mine.Instructions) != 1 || mine.Instructions[0].Pending || mine.Instructions[0].Confirmed != 2 {
		t.Errorf("my instructions after the confirmation = %+v; want version 2 confirmed", mine)
	}
}

// TestInstructionsHoldBackClaims: an editor's claims leave out a category
// whose current instructions it has not confirmed, take it after the
// confirmation, and again leave it out after a new version; a category
// without instructions, or with empty ones, never holds anything back; a live
// claim is not affected.
func TestInstructionsHoldBackClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news", "sport")
	news := b.addN(t, "news", 3)
	b.setInstructions(t, "news", "Read this first.")
	b.setInstructions(t, "sport", "")

	// Only sport is claimable: news waits for the confirmation.
	a := b.do(t, "POST", "/v1/assignments/next", e.Token, "")
	wantStatus(t, a, http.StatusNoContent)
	if got := a.header.Get("Taskd-Instructions-Pending"); got != "news" {
		t.Errorf("pending header = %q, want news", got)
	}
	sport := b.addN(t, "sport", 1)
	got := b.next(t, e.Token)
	if got.Task.ID != sport[0] {
		t.Fatalf("claimed task %d (%s), want sport's %d", got.Task.ID, got.Task.Category, sport[0])
	}
	// Submitting it hands over no news task either.
	res := b.do(t, "POST", "/v1/assignments/"+strconv.FormatInt(got.Task.ID, 10)+"/submit", e.Token, mustJSON(t, map[string]any{"fence": got.Fence, "result": map[string]any{"ok": true}}))
	var sub struct {
		Next *assignment `json:"next"`
	}
	wantJSON(t, res, http.StatusOK, &sub)
	if sub.Next != nil || res.header.Get("Taskd-Instructions-Pending") != "news" {
		t.Fatalf("submit handed over %+v (pending %q); want nothing, news pending", sub.Next, res.header.Get("Taskd-Instructions-Pending"))
	}

	wantStatus(t, b.do(t, "POST", "/v1/me/instructions/news/ack", e.Token, `{"version":1}`), 200)
	held := b.next(t, e.Token)
	if held.Task.ID != news[0] {
		t.Fatalf("after the confirmation claimed %d, want news %d", held.Task.ID, news[0])
	}
	// A new version while the claim is live: the claim stays, the editor's
	// next claim of news waits.
	b.setInstructions(t, "news", "Read this first, and this.")
	if again := b.next(t, e.Token); again.Task.ID != held.Task.ID || again.Fence != held.Fence {
		t.Errorf("next while holding = task %d fence %d, want the held %d/%d", again.Task.ID, again.Fence, held.Task.ID, held.Fence)
	}
	res = b.do(t, "POST", "/v1/assignments/"+strconv.FormatInt(held.Task.ID, 10)+"/submit", e.Token, mustJSON(t, map[string]any{"fence": held.Fence, "result": map[string]any{"ok": true}}))
	wantJSON(t, res, http.StatusOK, &sub)
	if sub.Next != nil {
		t.Fatalf("submit handed over task %d of %s before version 2 was confirmed", sub.Next.Task.ID, sub.Next.Task.Category)
	}
	wantStatus(t, b.do(t, "POST", "/v1/me/instructions/news/ack", e.Token, `{"version":2}`), 200)
	if got := b.next(t, e.Token); got.Task.ID != news[1] {
		t.Errorf("after confirming version 2 claimed %d, want %d", got.Task.ID, news[1])
	}

	// Another editor of sport alone is never held back (sport's are empty).
	f := b.editor(t, "bo", "sport")
	b.addN(t, "sport", 1)
	if got := b.next(t, f.Token); got.Task.Category != "sport" {
		t.Errorf("editor of sport claimed %+v", got.Task)
	}
}

// TestInstructionsHoldBackSentBack: a task sent back to its editor, offered
// to it alone for a while, waits too while the editor has not confirmed its
// category's new instructions (its other categories go on).
func TestInstructionsHoldBackSentBack(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ed := b.editor(t, "ed", "desk", "sport")
	rita := b.editor(t, "rita", "desk")
	id := b.add(t, newTask{Category: "desk", Title: "story"})[0]
	next := func(token string) assignment {
		t.Helper()
		a, _ := b.flowNext(t, token)
		return a.assignment
	}
	submit := func(token string, a assignment, decision string) {
		t.Helper()
		wantStatus(t, b.do(t, "POST", "/v1/assignments/"+strconv.FormatInt(a.Task.ID, 10)+"/submit", token,
			mustJSON(t, map[string]any{"fence": a.Fence, "result": map[string]any{"ok": true}, "decision": decision})), http.StatusOK)
	}
	submit(ed.Token, next(ed.Token), "approve")
	submit(rita.Token, next(rita.Token), "send_back")
	if ft, _ := b.flowTask(t, id); ft.ReservedFor != ed.ID {
		t.Fatalf("the task sent back is reserved for %d, want ed %d", ft.ReservedFor, ed.ID)
	}
	b.setInstructions(t, "desk", "Read the notes first.")
	res := b.do(t, "POST", "/v1/assignments/next", ed.Token, "")
	wantStatus(t, res, http.StatusNoContent)
	if h := res.header.Get("Taskd-Instructions-Pending"); h != "desk" {
		t.Errorf("pending header %q, want desk", h)
	}
	wantStatus(t, b.do(t, "POST", "/v1/me/instructions/desk/ack", ed.Token, `{"version":1}`), 200)
	if a := next(ed.Token); a.Task.ID != id {
		t.Errorf("after the confirmation ed claimed %d, want the task sent back, %d", a.Task.ID, id)
	}
}

// TestInstructionsFirstVersionHoldsAtOnce: the first instructions of a
// category, set through this process, hold back its editors' next claim at
// once, though the process had read that no category had any just before.
func TestInstructionsFirstVersionHoldsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "arts")
	wantStatus(t, b.do(t, "POST", "/v1/assignments/next", e.Token, ""), http.StatusNoContent)
	b.addN(t, "arts", 1)
	b.setInstructions(t, "arts", "Credit every photo.")
	res := b.do(t, "POST", "/v1/assignments/next", e.Token, "")
	wantStatus(t, res, http.StatusNoContent)
	if h := res.header.Get("Taskd-Instructions-Pending"); h != "arts" {
		t.Errorf("pending header %q, want arts", h)
	}
}
