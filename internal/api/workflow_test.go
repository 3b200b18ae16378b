package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// The workflow tests' category "desk" has the stages edit and review.
func workflowSetup(t *testing.T) *bundle {
	t.Helper()
	wf := map[string]tasks.Workflow{"desk": {Stages: []string{"edit", "review"}}}
	return setup(t, setupOpts{storeCfg: store.Config{Workflows: wf}, dispatcher: dispatcher.Config{Workflows: wf}})
}

// resultOut is a result as the feed, a task's results and an assignment's
// earlier results have it.
type resultOut struct {
	Cursor      string          `json:"cursor"`
	TaskID      int64           `json:"task_id"`
	Fence       int64           `json:"fence"`
	Category    string          `json:"category"`
	Title       string          `json:"title"`
	Key         *string         `json:"key"`
	Holder      string          `json:"holder"`
	EditorID    *int64          `json:"editor_id"`
	EditorName  string          `json:"editor_name"`
	Result      json.RawMessage `json:"result"`
	SubmittedAt string          `json:"submitted_at"`
	Stage       string          `json:"stage"`
	Decision    string          `json:"decision"`
	Notes       string          `json:"notes"`
	GroupID     int64           `json:"group_id"`
	Overlap     int             `json:"overlap"`
}

// flowAssignment is an assignment with its workflow.
type flowAssignment struct {
	assignment
	Stage         string       `json:"stage"`
	Stages        []string     `json:"stages"`
	Earlier       *[]resultOut `json:"earlier"`
	EarlierMore   *bool        `json:"earlier_more"`
	EarlierBefore string       `json:"earlier_before"`
	GroupID       int64        `json:"group_id"`
	Overlap       int          `json:"overlap"`
}

// flowTask is the part of GET /v1/tasks/{id} the workflow tests read.
type flowTask struct {
	Status        string      `json:"status"`
	Stages        []string    `json:"stages"`
	Stage         string      `json:"stage"`
	GroupID       int64       `json:"group_id"`
	Overlap       int         `json:"overlap"`
	ReservedFor   int64       `json:"reserved_for"`
	ReservedUntil *string     `json:"reserved_until"`
	Results       []resultOut `json:"results"`
	ResultsMore   *bool       `json:"results_more"`
	ResultsBefore string      `json:"results_before"`
	Group         *struct {
		ID      int64 `json:"id"`
		Overlap int   `json:"overlap"`
		Tasks   []struct {
			ID       int64  `json:"id"`
			Status   string `json:"status"`
			EditorID int64  `json:"editor_id"`
		} `json:"tasks"`
		Done  int   `json:"done"`
		Agree *bool `json:"agree"`
	} `json:"group"`
}

func (b *bundle) flowTask(t *testing.T, id int64) (flowTask, []byte) {
	t.Helper()
	res := b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, "")
	var ft flowTask
	wantJSON(t, res, http.StatusOK, nil)
	if err := json.Unmarshal(res.body, &ft); err != nil {
		t.Fatal(err)
	}
	return ft, res.body
}

// flowNext asks for the editor's next assignment and wants one.
func (b *bundle) flowNext(t *testing.T, token string) (flowAssignment, []byte) {
	t.Helper()
	res := b.do(t, "POST", "/v1/assignments/next", token, "")
	var a flowAssignment
	wantJSON(t, res, http.StatusOK, &a)
	return a, res.body
}

// flowSubmit submits a result with a decision and notes and returns the
// answer's next, or nil.
func (b *bundle) flowSubmit(t *testing.T, token string, a flowAssignment, result, decision, notes string) *flowAssignment {
	t.Helper()
	body := map[string]any{"fence": a.Fence, "result": json.RawMessage(result)}
	if decision != "" {
		body["decision"] = decision
	}
	if notes != "" {
		body["notes"] = notes
	}
	var out struct {
		Next *flowAssignment `json:"next"`
	}
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), token, mustJSON(t, body)), http.StatusOK, &out)
	return out.Next
}

// editorWith creates an editor with a capacity and stage limits through the API.
func (b *bundle) editorWith(t *testing.T, name string, capacity int, stages map[string][]string, cats ...string) editorInfo {
	t.Helper()
	body := map[string]any{"name": name, "categories": cats}
	if capacity != 0 {
		body["capacity"] = capacity
	}
	if stages != nil {
		body["stages"] = stages
	}
	var e editorInfo
	wantJSON(t, b.do(t, "POST", "/v1/editors", adminToken, mustJSON(t, body)), http.StatusCreated, &e)
	b.secret(e.Token)
	return e
}

// decisions lists the stage/decision/notes of results, for messages and checks.
func decisions(rs []resultOut) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, r.Stage+"/"+r.Decision+"/"+r.Notes+"/"+string(r.Result))
	}
	return strings.Join(parts, " ")
}

// A task of a category with stages is edited, reviewed, sent back with
// notes, edited again and approved, over HTTP: each answer names the stage,
// the reviewer sees the earlier results, the editor the reviewer's notes.
func TestWorkflowEditReviewSendBack(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ed := b.editorWith(t, "ed", 0, map[string][]string{"desk": {"edit"}}, "desk")
	rev := b.editorWith(t, "rev", 0, map[string][]string{"desk": {"review"}}, "desk")
	if ed.Capacity != 1 || !slices.Equal(ed.Stages["desk"], []string{"edit"}) {
		t.Fatalf("created editor: capacity %d, stages %v; want 1 and desk: edit", ed.Capacity, ed.Stages)
	}
	id := b.add(t, newTask{Category: "desk", Title: "story"})[0]

	ft, _ := b.flowTask(t, id)
	if !slices.Equal(ft.Stages, []string{"edit", "review"}) || ft.Stage != "edit" || ft.GroupID != 0 || ft.Results == nil || len(ft.Results) != 0 {
		t.Fatalf("new task: %+v, want stages edit, review at edit, no group, no results", ft)
	}
	// The reviewer has nothing to review yet.
	wantStatus(t, b.do(t, "POST", "/v1/assignments/next", rev.Token, ""), http.StatusNoContent)

	a, raw := b.flowNext(t, ed.Token)
	wantKeys(t, raw, "task", "fence", "assigned_at", "lease_expires_at", "stage", "stages", "earlier", "earlier_more")
	if a.Task.ID != id || a.Stage != "edit" || !slices.Equal(a.Stages, []string{"edit", "review"}) || a.Earlier == nil || len(*a.Earlier) != 0 {
		t.Fatalf("editor's assignment: %s", raw)
	}
	// No send back at the first stage; nothing changes.
	before := b.snapshot(t)
	wantError(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), ed.Token,
		fmt.Sprintf(`{"fence":%d,"result":{"text":"v1"},"decision":"send_back"}`, a.Fence)), http.StatusUnprocessableEntity, "invalid")
	b.unchanged(t, before)
	if next := b.flowSubmit(t, ed.Token, a, `{"text":"v1"}`, "", ""); next != nil {
		t.Fatalf("the editor's next after its edit: %+v, want none", next)
	}

	ft, _ = b.flowTask(t, id)
	if ft.Status != "pending" || ft.Stage != "review" || len(ft.Results) != 1 || ft.Results[0].Stage != "edit" {
		t.Fatalf("after the edit: %+v, want pending at review with the edit's result", ft)
	}
	r, raw := b.flowNext(t, rev.Token)
	if r.Task.ID != id || r.Stage != "review" || r.Earlier == nil || len(*r.Earlier) != 1 {
		t.Fatalf("reviewer's assignment: %s", raw)
	}
	if e := (*r.Earlier)[0]; e.Stage != "edit" || string(e.Result) != `{"text":"v1"}` || e.EditorID == nil || *e.EditorID != ed.ID || e.EditorName != ed.Name || e.Decision != "" {
		t.Fatalf("the reviewer's earlier result: %+v", e)
	}
	if next := b.flowSubmit(t, rev.Token, r, `{"ok":false}`, "send_back", "fix the lede"); next != nil {
		t.Fatalf("the reviewer's next after its send back: %+v, want none", next)
	}

	// Sent back: at edit again, reserved for the editor who edited it.
	ft, raw = b.flowTask(t, id)
	if ft.Status != "pending" || ft.Stage != "edit" || ft.ReservedFor != ed.ID || ft.ReservedUntil == nil {
		t.Fatalf("after the send back: %s", raw)
	}
	parseTime(t, *ft.ReservedUntil)
	a, raw = b.flowNext(t, ed.Token)
	if a.Task.ID != id || a.Stage != "edit" || a.Earlier == nil || len(*a.Earlier) != 2 {
		t.Fatalf("the editor's second assignment: %s", raw)
	}
	if e := (*a.Earlier)[1]; e.Stage != "review" || e.Decision != "send_back" || e.Notes != "fix the lede" || e.EditorID == nil || *e.EditorID != rev.ID {
		t.Fatalf("the reviewer's notes as the editor sees them: %+v", e)
	}
	b.flowSubmit(t, ed.Token, a, `{"text":"v2"}`, "", "")
	r, _ = b.flowNext(t, rev.Token)
	if r.Task.ID != id || r.Earlier == nil || decisions(*r.Earlier) !=
		`edit///{"text":"v1"} review/send_back/fix the lede/{"ok":false} edit///{"text":"v2"}` {
		t.Fatalf("the reviewer's second assignment: earlier %+v", r.Earlier)
	}
	b.flowSubmit(t, rev.Token, r, `{"ok":true}`, "approve", "")

	ft, raw = b.flowTask(t, id)
	if ft.Status != "done" || len(ft.Results) != 4 || ft.ReservedFor != 0 || ft.Results[3].Decision != "approve" {
		t.Fatalf("after the approval: %s", raw)
	}
	// The feed carries every stage's result, with its stage and decision.
	res := b.do(t, "GET", "/v1/results", adminToken, "")
	lines := strings.Split(strings.TrimSpace(string(res.body)), "\n")
	if len(lines) != 5 {
		t.Fatalf("GET /v1/results: %d lines, want 4 results and the end:\n%s", len(lines), res.body)
	}
	var feed []resultOut
	for _, l := range lines[:4] {
		var ro resultOut
		strictDecode(t, []byte(l), &ro)
		feed = append(feed, ro)
	}
	if got := decisions(feed); got != decisions(ft.Results) {
		t.Errorf("the feed's results %s, want the task's %s", got, decisions(ft.Results))
	}
	if feed[1].Notes != "fix the lede" || feed[1].Stage != "review" {
		t.Errorf("the feed's send back: %+v", feed[1])
	}

	// The stats count the tasks with stages by stage.
	var st struct {
		ByStage map[string]map[string]map[string]int64 `json:"by_stage"`
	}
	b.add(t, newTask{Category: "desk", Title: "second"}, newTask{Category: "news", Title: "no stages"})
	wantJSON(t, b.do(t, "GET", "/v1/stats", adminToken, ""), http.StatusOK, nil)
	if err := json.Unmarshal(b.do(t, "GET", "/v1/stats", adminToken, "").body, &st); err != nil {
		t.Fatal(err)
	}
	if st.ByStage["desk"]["review"]["done"] != 1 || st.ByStage["desk"]["edit"]["pending"] != 1 || len(st.ByStage) != 1 {
		t.Errorf("stats by stage: %v, want desk's review 1 done and edit 1 pending, nothing else", st.ByStage)
	}
}

// A task's own stages, and none: [] is one stage whatever the category says.
func TestWorkflowTaskStages(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	res := b.do(t, "POST", "/v1/tasks", adminToken,
		`[{"category":"desk","title":"one stage","stages":[]},{"category":"news","title":"own","stages":["draft","check","sign"]}]`)
	var out addResponse
	wantJSON(t, res, http.StatusCreated, &out)
	ft, raw := b.flowTask(t, out.IDs[0])
	if ft.Stages != nil || ft.Stage != "" || ft.Results != nil {
		t.Errorf("a task with stages []: %s", raw)
	}
	ft, raw = b.flowTask(t, out.IDs[1])
	if !slices.Equal(ft.Stages, []string{"draft", "check", "sign"}) || ft.Stage != "draft" {
		t.Errorf("a task with its own stages: %s", raw)
	}

	before := b.snapshot(t)
	for _, body := range []string{
		`[{"category":"news","title":"t","stages":["Bad"]}]`,
		`[{"category":"news","title":"t","stages":["a","a"]}]`,
		`[{"category":"news","title":"t","overlap":0}]`,
		`[{"category":"news","title":"t","overlap":10}]`,
	} {
		wantError(t, b.do(t, "POST", "/v1/tasks", adminToken, body), http.StatusUnprocessableEntity, "invalid")
	}
	b.unchanged(t, before)
}

// POST /v1/tasks answers every slot of a grouped task, created or existing
// by its key, and no slots for a task without a group.
func TestAddTasksAnswersEverySlot(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	body := `[{"category":"news","title":"one"},{"category":"news","title":"three","overlap":3,"key":"k3"},{"category":"news","title":"two","overlap":2}]`
	var out addResponse
	wantJSON(t, b.do(t, "POST", "/v1/tasks", adminToken, body), http.StatusCreated, &out)
	if len(out.Tasks) != 3 || out.Tasks[0].Slots != nil {
		t.Fatalf("answer %+v; want no slots for a task without a group", out)
	}
	for i, want := range []int{0, 3, 2} {
		in := out.Tasks[i]
		if want == 0 {
			continue
		}
		if len(in.Slots) != want || in.Slots[0] != in.ID || out.IDs[i] != in.ID {
			t.Fatalf("task %d: %+v; want %d slots, its id first", i, in, want)
		}
		for _, id := range in.Slots {
			if task := b.task(t, id); task.GroupID != in.ID || task.Title != [...]string{"", "three", "two"}[i] {
				t.Errorf("slot %d of task %d: %+v", id, in.ID, task)
			}
		}
		if n := len(b.groupIDs(t, in.ID)); n != want {
			t.Errorf("task %d's group has %d tasks, the answer %d", in.ID, n, want)
		}
	}
	// Again by its key: the existing group's slots.
	var again addResponse
	wantJSON(t, b.do(t, "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"three","overlap":3,"key":"k3"}]`), http.StatusOK, &again)
	if len(again.Tasks) != 1 || again.Tasks[0].Created || !slices.Equal(again.Tasks[0].Slots, out.Tasks[1].Slots) {
		t.Errorf("again: %+v; want the existing group's slots %v", again, out.Tasks[1].Slots)
	}
}

// groupIDs reads the ids of the tasks of a group.
func (b *bundle) groupIDs(t *testing.T, group int64) []int64 {
	t.Helper()
	var ids []int64
	if err := b.db.Select(&ids, "SELECT id FROM tasks WHERE group_id = ? ORDER BY id", group); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A task that asks for two results goes to two editors; the task shows its
// group, and whether the two decisions agree once both are in.
func TestWorkflowOverlap(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "poll")
	bob := b.editor(t, "bob", "poll")
	// Each group in turn: ann and bob take a task of it each, never the same.
	agree := map[int64]*bool{}
	var groups []int64
	for gi, title := range []string{"split", "same"} {
		res := b.do(t, "POST", "/v1/tasks", adminToken, `[{"category":"poll","title":"`+title+`","overlap":2}]`)
		var out addResponse
		wantJSON(t, res, http.StatusCreated, &out)
		if len(out.IDs) != 1 || out.Created != 1 {
			t.Fatalf("a group added: %s", res.body)
		}
		group := out.IDs[0]
		groups = append(groups, group)
		a, raw := b.flowNext(t, ann.Token)
		wantKeys(t, raw, "task", "fence", "assigned_at", "lease_expires_at", "group_id", "overlap")
		bb, _ := b.flowNext(t, bob.Token)
		if a.GroupID != group || bb.GroupID != group || a.Overlap != 2 || a.Task.ID == bb.Task.ID {
			t.Fatalf("group %d: ann %+v, bob %+v", group, a, bb)
		}
		ft, raw := b.flowTask(t, a.Task.ID)
		if ft.GroupID != group || ft.Overlap != 2 || ft.Group == nil || ft.Group.ID != group || len(ft.Group.Tasks) != 2 ||
			ft.Group.Done != 0 || ft.Group.Agree != nil || ft.Results == nil {
			t.Fatalf("a group's task while held: %s", raw)
		}
		holders := map[int64]int64{}
		for _, gt := range ft.Group.Tasks {
			holders[gt.ID] = gt.EditorID
		}
		if holders[a.Task.ID] != ann.ID || holders[bb.Task.ID] != bob.ID {
			t.Fatalf("the group's tasks' editors: %v", holders)
		}
		b.flowSubmit(t, ann.Token, a, `{"v":1}`, "yes", "")
		ft, _ = b.flowTask(t, a.Task.ID)
		if ft.Group.Done != 1 || ft.Group.Agree != nil || len(ft.Results) != 1 {
			t.Fatalf("one of two done: %+v", ft.Group)
		}
		decision := []string{"no", "yes"}[gi]
		b.flowSubmit(t, bob.Token, bb, `{"v":2}`, decision, "")
		ft, raw = b.flowTask(t, bb.Task.ID)
		if ft.Group.Done != 2 || ft.Group.Agree == nil || len(ft.Results) != 2 || ft.Results[0].GroupID != group || ft.Results[1].Overlap != 2 {
			t.Fatalf("both done: %s", raw)
		}
		agree[group] = ft.Group.Agree
	}
	if *agree[groups[0]] || !*agree[groups[1]] {
		t.Errorf("agree: yes/no %v, yes/yes %v; want false and true", *agree[groups[0]], *agree[groups[1]])
	}
}

// An editor of capacity 2 holds two claims: GET /v1/assignments lists them,
// next at capacity answers the oldest, the editor's detail counts and lists
// them, and a disable revokes both.
func TestWorkflowCapacity(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	kim := b.editorWith(t, "kim", 2, nil, "news")
	if kim.Capacity != 2 || kim.Stages != nil {
		t.Fatalf("created: capacity %d, stages %v", kim.Capacity, kim.Stages)
	}
	ids := b.addN(t, "news", 3)

	var list struct {
		Assignments []flowAssignment `json:"assignments"`
		Capacity    int              `json:"capacity"`
	}
	wantJSON(t, b.do(t, "GET", "/v1/assignments", kim.Token, ""), http.StatusOK, &list)
	if len(list.Assignments) != 0 || list.Capacity != 2 {
		t.Fatalf("no claims yet: %+v", list)
	}
	first, raw := b.flowNext(t, kim.Token)
	wantKeys(t, raw, "task", "fence", "assigned_at", "lease_expires_at")
	second, _ := b.flowNext(t, kim.Token)
	if first.Task.ID == second.Task.ID {
		t.Fatalf("next gave task %d twice", first.Task.ID)
	}
	again, _ := b.flowNext(t, kim.Token)
	if again.Task.ID != first.Task.ID || again.Fence != first.Fence {
		t.Fatalf("next at capacity: task %d fence %d, want the oldest, %d fence %d", again.Task.ID, again.Fence, first.Task.ID, first.Fence)
	}
	res := b.do(t, "GET", "/v1/assignments", kim.Token, "")
	wantJSON(t, res, http.StatusOK, &list)
	if len(list.Assignments) != 2 || list.Capacity != 2 || list.Assignments[0].Task.ID != first.Task.ID ||
		list.Assignments[1].Task.ID != second.Task.ID {
		t.Fatalf("GET /v1/assignments: %s", res.body)
	}
	wantError(t, b.do(t, "GET", "/v1/assignments?x=1", kim.Token, ""), http.StatusBadRequest, "bad_request")
	wantError(t, b.do(t, "GET", "/v1/assignments", adminToken, ""), http.StatusForbidden, "forbidden")

	d := b.getEditor(t, kim.ID)
	if d.Capacity != 2 || d.Holding != 2 || len(d.Claims) != 2 || d.Claims[0].TaskID != first.Task.ID || d.Claims[1].TaskID != second.Task.ID {
		t.Fatalf("kim's detail: capacity %d, holding %d, claims %+v", d.Capacity, d.Holding, d.Claims)
	}
	page := b.listEditors(t, "")
	if len(page.Editors) != 1 || page.Editors[0].Holding != 2 || page.Editors[0].Capacity != 2 {
		t.Fatalf("the editor list: %+v", page.Editors)
	}
	var me meOut
	wantJSON(t, b.do(t, "GET", "/v1/me", kim.Token, ""), http.StatusOK, &me)
	if me.Capacity != 2 || me.Assignment == nil || me.Assignment.Task.ID != first.Task.ID {
		t.Fatalf("GET /v1/me: capacity %d, assignment %+v", me.Capacity, me.Assignment)
	}

	var dis disableOut
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/editors/%d/disable", kim.ID), adminToken, ""), http.StatusOK, &dis)
	if dis.Released == nil || dis.Released.TaskID != first.Task.ID || len(dis.ReleasedAll) != 2 ||
		dis.ReleasedAll[0].TaskID != first.Task.ID || dis.ReleasedAll[1].TaskID != second.Task.ID {
		t.Fatalf("disable: released %+v, all %+v", dis.Released, dis.ReleasedAll)
	}
	for _, id := range ids[:2] {
		if st := b.task(t, id).Status; st != tasks.StatusPending {
			t.Errorf("task %d is %s after the disable, want pending", id, st)
		}
	}
}

// Creating and changing an editor's capacity and stage limits: bad values are
// 422 and change nothing; good ones show in the answers.
func TestWorkflowEditorValidation(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "desk", "news")
	before := b.snapshot(t)
	for _, body := range []string{
		`{"name":"x","categories":["desk"],"stages":{"desk":["Edit"]}}`,
		`{"name":"x","categories":["desk"],"stages":{"news":["edit"]}}`,
		`{"name":"x","categories":["desk"],"stages":{"desk":[]}}`,
		`{"name":"x","categories":["desk"],"capacity":0}`,
		`{"name":"x","categories":["desk"],"capacity":101}`,
	} {
		wantError(t, b.do(t, "POST", "/v1/editors", adminToken, body), http.StatusUnprocessableEntity, "invalid")
	}
	path := fmt.Sprintf("/v1/editors/%d", ann.ID)
	for _, body := range []string{
		`{"stages":{"desk":["bad stage"]}}`,
		`{"stages":{"sports":["edit"]}}`,
		`{"categories":["news"],"stages":{"desk":["edit"]}}`,
		`{"capacity":0}`,
		`{"capacity":101}`,
		`{"name":"renamed","capacity":0}`,
	} {
		wantError(t, b.do(t, "PATCH", path, adminToken, body), http.StatusUnprocessableEntity, "invalid")
	}
	b.unchanged(t, before)
	if d := b.getEditor(t, ann.ID); d.Name != "ann" || d.Capacity != 1 || d.Stages != nil || d.Holding != 0 {
		t.Fatalf("ann after refused changes: %+v", d)
	}

	var d editorDetailOut
	wantJSON(t, b.do(t, "PATCH", path, adminToken, `{"capacity":3,"stages":{"desk":["review"]}}`), http.StatusOK, &d)
	if d.Capacity != 3 || !slices.Equal(d.Stages["desk"], []string{"review"}) || len(d.Stages) != 1 {
		t.Fatalf("after the change: capacity %d, stages %v", d.Capacity, d.Stages)
	}
	// New categories keep the limits of those that stay.
	wantJSON(t, b.do(t, "PATCH", path, adminToken, `{"categories":["desk","sports"]}`), http.StatusOK, &d)
	if d.Capacity != 3 || !slices.Equal(d.Stages["desk"], []string{"review"}) {
		t.Fatalf("after new categories: capacity %d, stages %v", d.Capacity, d.Stages)
	}
	res := b.do(t, "PATCH", path, adminToken, `{"stages":{}}`)
	d = editorDetailOut{}
	wantJSON(t, res, http.StatusOK, &d)
	if d.Stages != nil || strings.Contains(string(res.body), `"stages"`) {
		t.Fatalf("stages {} lifts the limits: %s", res.body)
	}
	// The editor's own view.
	var me meOut
	wantJSON(t, b.do(t, "GET", "/v1/me", ann.Token, ""), http.StatusOK, &me)
	if me.Capacity != 3 || me.Stages != nil {
		t.Errorf("GET /v1/me: capacity %d, stages %v", me.Capacity, me.Stages)
	}
}

// Under the default workflow, answers carry none of the workflow's keys.
func TestWorkflowDefaultAnswersUnchanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.add(t, newTask{Category: "news", Title: "t"})[0]
	newKeys := []string{"stages", "stage", "group_id", "overlap", "reserved_for", "reserved_until", "results", "group",
		"earlier", "decision", "notes", "holding", "claims", "released_all", "by_stage"}
	noNewKeys := func(what string, body []byte) {
		t.Helper()
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var walk func(v any)
		walk = func(v any) {
			switch n := v.(type) {
			case map[string]any:
				for k, c := range n {
					if slices.Contains(newKeys, k) {
						t.Errorf("%s has the key %q: %s", what, k, body)
					}
					if k != "payload" && k != "result" {
						walk(c)
					}
				}
			case []any:
				for _, c := range n {
					walk(c)
				}
			}
		}
		walk(v)
	}
	_, raw := b.flowNext(t, e.Token)
	noNewKeys("next", raw)
	noNewKeys("task held", b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, "").body)
	noNewKeys("editor", b.do(t, "GET", fmt.Sprintf("/v1/editors/%d", e.ID), adminToken, "").body)
	noNewKeys("editors", b.do(t, "GET", "/v1/editors", adminToken, "").body)
	noNewKeys("me", b.do(t, "GET", "/v1/me", e.Token, "").body)
	res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), e.Token, `{"fence":1,"result":{"ok":true}}`)
	wantStatus(t, res, http.StatusOK)
	noNewKeys("submit", res.body)
	noNewKeys("task done", b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, "").body)
	noNewKeys("list", b.do(t, "GET", "/v1/tasks", adminToken, "").body)
	noNewKeys("stats", b.do(t, "GET", "/v1/stats", adminToken, "").body)
	line := strings.SplitN(string(b.do(t, "GET", "/v1/results", adminToken, "").body), "\n", 2)[0]
	noNewKeys("result line", []byte(line))
	// A result submitted with a decision and notes carries them, and only then.
	id2 := b.add(t, newTask{Category: "news", Title: "t2"})[0]
	a, _ := b.flowNext(t, e.Token)
	if a.Task.ID != id2 {
		t.Fatalf("next: task %d, want %d", a.Task.ID, id2)
	}
	b.flowSubmit(t, e.Token, a, `{}`, "maybe", "a note")
	res = b.do(t, "GET", "/v1/results?after=1", adminToken, "")
	var ro resultOut
	if err := json.Unmarshal([]byte(strings.SplitN(string(res.body), "\n", 2)[0]), &ro); err != nil {
		t.Fatal(err)
	}
	if ro.TaskID != id2 || ro.Decision != "maybe" || ro.Notes != "a note" || ro.Stage != "" || ro.GroupID != 0 {
		t.Errorf("a default task's result with a decision: %+v", ro)
	}
}

// The four-eyes rule over HTTP: an editor who may take every stage does not
// review its own edit; another editor does.
func TestWorkflowFourEyes(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "desk")
	bob := b.editor(t, "bob", "desk")
	id := b.add(t, newTask{Category: "desk", Title: "story"})[0]
	a, _ := b.flowNext(t, ann.Token)
	if a.Task.ID != id || a.Stage != "edit" {
		t.Fatalf("ann's assignment: %+v", a)
	}
	if next := b.flowSubmit(t, ann.Token, a, `{"text":"v1"}`, "", ""); next != nil {
		t.Fatalf("ann's next after her edit: %+v, want none (she may not review it)", next)
	}
	wantStatus(t, b.do(t, "POST", "/v1/assignments/next", ann.Token, ""), http.StatusNoContent)
	r, raw := b.flowNext(t, bob.Token)
	if r.Task.ID != id || r.Stage != "review" || r.Earlier == nil || len(*r.Earlier) != 1 || (*r.Earlier)[0].EditorID == nil ||
		*(*r.Earlier)[0].EditorID != ann.ID {
		t.Fatalf("bob's review: %s", raw)
	}
}
