package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// seedResults inserts n done tasks with ids from+1..from+n and their accepted
// results in bulk, as if submitted one microsecond apart. Those with ids up to
// numbered already have their place in the feed (seq = id), as if a reader had
// read them; the others are yet to be numbered.
func seedResults(t *testing.T, db *sqlx.DB, from, n, numbered int) {
	t.Helper()
	digit := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " +
		"UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	seq := fmt.Sprintf(`SELECT d1.d + 10*d2.d + 100*d3.d + 1000*d4.d + 10000*d5.d + 100000*d6.d + 1 AS i
FROM %[1]s d1, %[1]s d2, %[1]s d3, %[1]s d4, %[1]s d5, %[1]s d6`, digit)
	ctx := t.Context()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO tasks (id, category, title, payload, status, fence, attempts, holder, assigned_at, done_at)
SELECT ? + i, 'export', CONCAT('article "', ? + i, '", page 1'), '{}', 'done', 1, 1, CONCAT('worker-', i % 7), NOW(3), NOW(3)
FROM (` + seq + `) s WHERE i <= ?`, []any{from, from, n}},
		{`INSERT INTO task_results (task_id, fence, holder, editor_id, result, submitted_at, seq)
SELECT id, 1, holder, NULL, JSON_OBJECT('words', id % 1000, 'text', CONCAT('result of ', id)),
	NOW(3) - INTERVAL (? - id) MICROSECOND, IF(id <= ?, id, NULL)
FROM tasks WHERE id > ? AND id <= ?`, []any{from + n, numbered, from, from + n}},
	} {
		if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("seed results: %v", err)
		}
	}
	if numbered > 0 {
		if _, err := db.ExecContext(ctx, `INSERT INTO task_results_feed (id, last_seq) VALUES (1, ?)
ON DUPLICATE KEY UPDATE last_seq = VALUES(last_seq)`, numbered); err != nil {
			t.Fatalf("seed the feed's counter: %v", err)
		}
	}
}

// exportedLine is a JSON line of an export.
type exportedLine struct {
	Cursor      string          `json:"cursor"`
	TaskID      int64           `json:"task_id"`
	Fence       int64           `json:"fence"`
	Category    string          `json:"category"`
	Title       string          `json:"title"`
	Key         *string         `json:"key"`
	Holder      string          `json:"holder"`
	EditorID    *int64          `json:"editor_id"`
	Result      json.RawMessage `json:"result"`
	SubmittedAt string          `json:"submitted_at"`
}

// readExport reads a JSON lines export and checks each result is there once,
// in growing cursor order, whole: it returns the task ids in file order.
func readExport(t *testing.T, data []byte) []int64 {
	t.Helper()
	var ids []int64
	seen := map[int64]bool{}
	var last int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		var l exportedLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %d: %v: %s", n, err, sc.Bytes())
		}
		c, err := strconv.ParseInt(l.Cursor, 10, 64)
		if err != nil || c <= last {
			t.Fatalf("line %d: cursor %q after %d", n, l.Cursor, last)
		}
		last = c
		if seen[l.TaskID] {
			t.Fatalf("line %d: task %d's result again", n, l.TaskID)
		}
		seen[l.TaskID] = true
		want := fmt.Sprintf(`{"text":"result of %d","words":%d}`, l.TaskID, l.TaskID%1000)
		var got, wantV any
		_ = json.Unmarshal(l.Result, &got)
		_ = json.Unmarshal([]byte(want), &wantV)
		if fmt.Sprint(got) != fmt.Sprint(wantV) || l.Fence != 1 || l.Category != "export" ||
			l.Title != fmt.Sprintf(`article "%d", page 1`, l.TaskID) || l.EditorID != nil || l.SubmittedAt == "" {
			t.Fatalf("line %d: %s", n, sc.Bytes())
		}
		ids = append(ids, l.TaskID)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// wantEvery checks that ids are 1..n, each once (in any order).
func wantEvery(t *testing.T, ids []int64, n int) {
	t.Helper()
	if len(ids) != n {
		t.Fatalf("%d results exported, want %d", len(ids), n)
	}
	seen := make([]bool, n+1)
	for _, id := range ids {
		if id < 1 || id > int64(n) || seen[id] {
			t.Fatalf("task %d exported twice or out of range", id)
		}
		seen[id] = true
	}
}

var lastCursorRE = regexp.MustCompile(`last cursor (\d+)`)

// lastCursor returns the cursor the export printed.
func lastCursor(t *testing.T, stderr string) int64 {
	t.Helper()
	m := lastCursorRE.FindAllStringSubmatch(stderr, -1)
	if len(m) == 0 {
		t.Fatalf("no last cursor printed:\n%s", stderr)
	}
	c, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
	return c
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestExportJSONLinesAppends(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	seedResults(t, s.store.DB(), 0, 25, 0)
	out := filepath.Join(s.dir, "results.jsonl")

	_, stderr, code := runApp(t, s.env, "export", "-o", out, "-batch", "7")
	if code != exitOK || lastCursor(t, stderr) != 25 || !strings.Contains(stderr, "exported 25 results") {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	wantEvery(t, readExport(t, readFile(t, out)), 25)

	// Nothing new: nothing added.
	_, stderr, code = runApp(t, s.env, "export", "-o", out, "-append")
	if code != exitOK || !strings.Contains(stderr, "exported 0 results") || lastCursor(t, stderr) != 25 {
		t.Fatalf("export -append with nothing new: exit %d\n%s", code, stderr)
	}
	// New results, and a record cut short at the end (a killed export): the
	// cut record goes, the new results come once.
	seedResults(t, s.store.DB(), 25, 10, 0)
	f, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"cursor":"26","task_id":26,"fe`)
	_ = f.Close()
	_, stderr, code = runApp(t, s.env, "export", "-o", out, "-append", "-after", "25")
	if code != exitOK || lastCursor(t, stderr) != 35 {
		t.Fatalf("export -append: exit %d\n%s", code, stderr)
	}
	wantEvery(t, readExport(t, readFile(t, out)), 35)
}

func TestExportCSV(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	seedResults(t, s.store.DB(), 0, 12, 0)
	out := filepath.Join(s.dir, "results.csv")
	if _, stderr, code := runApp(t, s.env, "export", "-o", out, "-batch", "5"); code != exitOK {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	seedResults(t, s.store.DB(), 12, 3, 0)
	if _, stderr, code := runApp(t, s.env, "export", "-o", out, "-append"); code != exitOK || lastCursor(t, stderr) != 15 {
		t.Fatalf("export -append: exit %d\n%s", code, stderr)
	}
	recs, err := csv.NewReader(bytes.NewReader(readFile(t, out))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 16 || recs[0][0] != "cursor" || recs[0][5] != "key" || recs[0][9] != "submitted_at" {
		t.Fatalf("%d records, header %q; want a header and 15 rows", len(recs), recs[0])
	}
	for i, r := range recs[1:] {
		id := strconv.Itoa(i + 1)
		if r[0] != id || r[1] != id || r[3] != "export" || r[4] != `article "`+id+`", page 1` || r[5] != "" || r[7] != "" ||
			!json.Valid([]byte(r[8])) {
			t.Errorf("row %d = %q", i+1, r)
		}
	}
}

func TestExportToStandardOutput(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	seedResults(t, s.store.DB(), 0, 9, 0)
	stdout, stderr, code := runApp(t, s.env, "export")
	if code != exitOK || len(readExport(t, []byte(stdout))) != 9 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	stdout, stderr, code = runApp(t, s.env, "export", "-after", "4", "-batch", "2")
	if code != exitOK || lastCursor(t, stderr) != 9 || !strings.Contains(stderr, "-after 9") {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	ids := readExport(t, []byte(stdout))
	if fmt.Sprint(ids) != "[5 6 7 8 9]" {
		t.Errorf("exported tasks %v, want 5..9", ids)
	}
}

// An export from a cursor older than what retention kept stops with a message
// that says so and how to go on.
func TestExportCursorExpired(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	seedResults(t, s.store.DB(), 0, 5, 5)
	if _, err := s.store.DB().Exec(`UPDATE tasks SET done_at = NOW(3) - INTERVAL 1 HOUR WHERE id <= 3`); err != nil {
		t.Fatal(err)
	}
	if p, err := s.store.PurgeTasks(t.Context(), tasks.StatusDone, time.Minute, 10); err != nil || p.Rows["tasks"] != 3 {
		t.Fatalf("purge = %+v, %v; want 3 tasks", p, err)
	}
	stdout, stderr, code := runApp(t, s.env, "export", "-after", "1")
	if code == exitOK || stdout != "" || !strings.Contains(stderr, "older than what retention kept") ||
		!strings.Contains(stderr, "up to cursor 3 may have been purged") || !strings.Contains(stderr, "taskd export -after 3") {
		t.Fatalf("export -after 1: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = runApp(t, s.env, "export", "-after", "3")
	if ids := readExport(t, []byte(stdout)); code != exitOK || fmt.Sprint(ids) != "[4 5]" {
		t.Fatalf("export -after 3: exit %d, tasks %v\n%s", code, ids, stderr)
	}
}

func TestExportUsage(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	seedResults(t, s.store.DB(), 0, 3, 0)
	out := filepath.Join(s.dir, "results.jsonl")
	if _, stderr, code := runApp(t, s.env, "export", "-o", out); code != exitOK {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	before := readFile(t, out)
	other := s.file(t, "other.jsonl", "not an export\n")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-append"}, exitUsage, "-append needs -o"},
		{[]string{"-o", out}, exitUsage, "exists and is not empty"},
		{[]string{"-o", out, "-append", "-after", "1"}, exitUsage, "would skip or repeat"},
		{[]string{"-batch", "0"}, exitUsage, "-batch must be"},
		{[]string{"-batch", strconv.Itoa(tasks.ResultsLimitMax + 1)}, exitUsage, "-batch must be"},
		{[]string{"-format", "xml"}, exitUsage, "unknown format"},
		{[]string{"-after", "-2"}, exitUsage, "-after must be"},
		{[]string{"-after", "99"}, exitUsage, "beyond the end"},
		{[]string{"extra"}, exitUsage, "unexpected argument"},
		{[]string{"-o", other, "-append"}, exitFailure, "not an export file"},
	} {
		_, stderr, code := runApp(t, s.env, append([]string{"export"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("export %v: exit %d, want %d with %q:\n%s", c.args, code, c.code, c.want, stderr)
		}
	}
	if !bytes.Equal(readFile(t, out), before) {
		t.Error("a refused export changed the file")
	}
	if string(readFile(t, other)) != "not an export\n" {
		t.Error("a refused export changed another file")
	}
}
