package exportfile

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
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
