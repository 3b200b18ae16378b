package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// runApp runs taskd in-process with args and an environment holding only env,
// and returns what it printed and its exit status.
func runApp(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, env: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = a.main(ctx, args)
	return out.String(), errOut.String(), code
}

// importSetup gives a test its own database and the environment to reach it.
type importSetup struct {
	env   map[string]string
	store *store.Store
	dir   string
}

func newImportSetup(t *testing.T) *importSetup {
	t.Helper()
	dsn := storetest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store, err := store.New(db, store.Config{})
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	env := map[string]string{"TASKD_MYSQL_DSN": dsn}
	for _, kv := range redisEnv(t) { // Redis: the commands build an engine
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return &importSetup{env: env, store: store, dir: t.TempDir()}
}

// file writes a file into the test's directory and returns its path.
func (s *importSetup) file(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(s.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tasks returns every task in the database, by id.
func (s *importSetup) tasks(t *testing.T) []tasks.Task {
	t.Helper()
	var out []tasks.Task
	if err := s.store.DB().Select(&out, `SELECT id, category, priority, title, payload, max_attempts FROM tasks ORDER BY id`); err != nil {
		t.Fatalf("read tasks: %v", err)
	}
	return out
}

func TestImportJSONLines(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	var lines []string
	for i := range 1203 {
		lines = append(lines, fmt.Sprintf(`{"category":"cat%d","title":"Task %d","priority":%d,"payload":{"text":"words %d"},"max_attempts":3}`, i%3, i, i%7, i))
		if i%100 == 0 {
			lines = append(lines, "") // blank lines are skipped
		}
	}
	path := s.file(t, "tasks.jsonl", strings.Join(lines, "\n")+"\n")

	stdout, stderr, code := runApp(t, s.env, "import", "-batch", "500", path)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "imported 1203 tasks") {
		t.Errorf("stdout %q does not report 1203 tasks", stdout)
	}
	got := s.tasks(t)
	if len(got) != 1203 {
		t.Fatalf("%d tasks in the database, want 1203", len(got))
	}
	// File order is kept, and every field arrives.
	for i, task := range got {
		if task.Title != fmt.Sprintf("Task %d", i) || task.Category != fmt.Sprintf("cat%d", i%3) ||
			task.Priority != i%7 || task.MaxAttempts != 3 || !strings.Contains(string(task.Payload), fmt.Sprintf(`"words %d"`, i)) {
			t.Fatalf("task %d = %+v", i, task)
		}
	}
}

func TestImportCSV(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	path := s.file(t, "tasks.csv", `title,category,priority,payload
"Budget, revised",politics,5,"{""text"":""the council met""}"
"Two
lines",sports,,
`)
	stdout, stderr, code := runApp(t, s.env, "import", path)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	got := s.tasks(t)
	if len(got) != 2 || got[0].Title != "Budget, revised" || got[0].Category != "politics" || got[0].Priority != 5 ||
		!strings.Contains(string(got[0].Payload), "the council met") ||
		got[1].Title != "Two\nlines" || got[1].Priority != 0 || got[1].MaxAttempts != tasks.MaxAttemptsDefault {
		t.Errorf("tasks = %+v", got)
	}

	// --format overrides the extension.
	path = s.file(t, "more.txt", "category,title\nnews,From a .txt file\n")
	if _, stderr, code := runApp(t, s.env, "import", "--format", "csv", path); code != exitOK {
		t.Fatalf("--format csv: exit %d: %s", code, stderr)
	}
	if got := s.tasks(t); len(got) != 3 || got[2].Title != "From a .txt file" {
		t.Errorf("after --format csv: %d tasks", len(got))
	}
}

// badFile has valid lines and invalid ones, by line number.
const badFile = `{"category":"news","title":"good 1"}
{"category":"news","title":""}
{"category":"news","title":"x","colour":"red"}
{"category":"news","title":"good 2","payload":{"text":"t"}}
not json
{"category":" news","title":"x"}
{"category":"news","title":"x","payload":[1]}
{"category":"news","title":"good 3","priority":2147483647}
{"category":"news","title":"x","priority":2147483648}
`

func TestImportRejectsBadLines(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	path := s.file(t, "bad.jsonl", badFile)
	stdout, stderr, code := runApp(t, s.env, "import", path)
	if code != exitFailure {
		t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitFailure, stdout, stderr)
	}
	for _, want := range []string{
		"6 of 9 records rejected",
		"line 2: title is required",
		`line 3: unknown field "colour"`,
		"line 5: not a JSON object",
		"line 6: category must not start or end with spaces",
		"line 7: payload must be a JSON object",
		"line 9: priority must fit in 32 bits",
		"nothing imported",
		"pass -partial to import the 3 valid records)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not mention %q:\n%s", want, stderr)
		}
	}
	for _, good := range []string{"line 1:", "line 4:", "line 8:"} {
		if strings.Contains(stderr, good) {
			t.Errorf("stderr reports a valid line (%s):\n%s", good, stderr)
		}
	}
	if got := s.tasks(t); len(got) != 0 {
		t.Errorf("%d tasks imported from a bad file, want 0", len(got))
	}

	// The listing is capped; the count is not.
	_, stderr, _ = runApp(t, s.env, "import", "-max-errors", "2", path)
	if !strings.Contains(stderr, "line 3:") || strings.Contains(stderr, "line 5:") || !strings.Contains(stderr, "and 4 more") {
		t.Errorf("-max-errors 2:\n%s", stderr)
	}

	// A dry run of a bad file fails the same way.
	if _, _, code := runApp(t, s.env, "import", "-dry-run", path); code != exitFailure {
		t.Errorf("dry run of a bad file: exit %d, want %d", code, exitFailure)
	}
	if got := s.tasks(t); len(got) != 0 {
		t.Errorf("%d tasks after the dry run, want 0", len(got))
	}
}

// TestImportNamesWhatPartialWouldImport checks the counts in the refusal of a
// file with rejected records: one valid record is "1 valid record", and with
// none -partial is not offered, since it would import nothing either.
func TestImportNamesWhatPartialWouldImport(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	const good, bad = `{"category":"news","title":"good"}` + "\n", `{"category":"news"}` + "\n"
	for _, c := range []struct {
		name, content, want string
		args                []string
	}{
		{"one valid", good + bad, "nothing imported: 1 of 2 records rejected (fix them, or pass -partial to import the 1 valid record)\n", nil},
		{"two valid", good + bad + good, "nothing imported: 1 of 3 records rejected (fix them, or pass -partial to import the 2 valid records)\n", nil},
		{"none valid", bad + bad, "nothing imported: every record of", nil},
		{"none valid, partial", bad + bad, "nothing imported: every record of", []string{"-partial"}},
		{"none valid, partial dry run", bad + bad, "nothing imported: every record of", []string{"-partial", "-dry-run"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := s.file(t, strings.ReplaceAll(c.name, " ", "-")+".jsonl", c.content)
			_, stderr, code := runApp(t, s.env, append(append([]string{"import"}, c.args...), path)...)
			if code != exitFailure {
				t.Errorf("exit %d, want %d\n%s", code, exitFailure, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("stderr does not say %q:\n%s", c.want, stderr)
			}
			if strings.Contains(c.name, "none") && strings.Contains(stderr, "pass -partial") {
				t.Errorf("-partial offered for a file without a valid record:\n%s", stderr)
			}
		})
	}
	if got := s.tasks(t); len(got) != 0 {
		t.Errorf("%d tasks imported, want 0", len(got))
	}
}

func TestImportPartial(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	path := s.file(t, "bad.jsonl", badFile)

	stdout, _, code := runApp(t, s.env, "import", "--partial", "--dry-run", path)
	if code != exitOK || !strings.Contains(stdout, "3 tasks would be imported") {
		t.Errorf("partial dry run: exit %d, stdout %q", code, stdout)
	}
	if got := s.tasks(t); len(got) != 0 {
		t.Fatalf("the dry run imported %d tasks", len(got))
	}

	stdout, stderr, code := runApp(t, s.env, "import", "--partial", "-batch", "2", path)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "6 of 9 records rejected") || !strings.Contains(stdout, "imported 3 tasks") {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	var titles []string
	for _, task := range s.tasks(t) {
		titles = append(titles, task.Title)
	}
	if got, want := strings.Join(titles, ","), "good 1,good 2,good 3"; got != want {
		t.Errorf("imported %q, want %q", got, want)
	}
}

func TestImportUsage(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TASKD_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d"}
	for _, args := range [][]string{
		{"import"},
		{"import", "a.jsonl", "b.jsonl"},
		{"import", "tasks.xml"},
		{"import", "-format", "yaml", "tasks.jsonl"},
		{"import", "-batch", "0", "tasks.jsonl"},
		{"import", "-nope", "tasks.jsonl"},
	} {
		if _, stderr, code := runApp(t, env, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr)
		}
	}
	// A CSV without a usable header is refused before anything is inserted.
	dir := t.TempDir()
	path := filepath.Join(dir, "t.csv")
	_ = os.WriteFile(path, []byte("category,colour\nnews,red\n"), 0o600)
	s := newImportSetup(t)
	if _, stderr, code := runApp(t, s.env, "import", path); code != exitFailure || !strings.Contains(stderr, `unknown column "colour"`) {
		t.Errorf("bad header: exit %d, stderr %q", code, stderr)
	}
}

// TestValidateTask checks that the import's validation is the store's: what it
// accepts inserts, what it refuses is refused by InsertTasks, and it inserts
// nothing itself.
func TestValidateTask(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	cases := []tasks.NewTask{
		{Category: "news", Title: "ok"},
		{Category: "news", Title: "ok", Payload: []byte(`{"a":1}`), MaxAttempts: 100, Priority: -5},
		{Category: "", Title: "x"},
		{Category: "news", Title: strings.Repeat("é", tasks.MaxTitleLen+1)},
		{Category: "news", Title: "x", Payload: []byte(`"str"`)},
		{Category: "news", Title: "x", MaxAttempts: 101},
		{Category: strings.Repeat("c", tasks.MaxCategoryLen+1), Title: "x"},
	}
	ctx := context.Background()
	for i, c := range cases {
		verr := validateTask(c)
		if n := len(s.tasks(t)); n != 0 {
			t.Fatalf("case %d: validateTask inserted %d rows", i, n)
		}
		_, ierr := s.store.InsertTasks(ctx, []tasks.NewTask{c})
		if (verr == nil) != (ierr == nil) {
			t.Errorf("case %d: validateTask says %v, InsertTasks says %v", i, verr, ierr)
		}
		if verr != nil && (strings.Contains(verr.Error(), "insert tasks") || strings.Contains(verr.Error(), "invalid input")) {
			t.Errorf("case %d: reason %q keeps the call's prefixes", i, verr)
		}
		if _, err := s.store.DB().Exec(`DELETE FROM tasks`); err != nil {
			t.Fatal(err)
		}
	}
}

// nestedJSON returns a JSON object of depth levels of arrays and objects.
func nestedJSON(depth int) string {
	objects := (depth + 1) / 2
	arrays := depth - objects
	return strings.Repeat(`{"k":`, objects) + strings.Repeat("[", arrays) + "1" +
		strings.Repeat("]", arrays) + strings.Repeat("}", objects)
}

// TestImportRefusesHostileRecords imports files with records the database would
// refuse: each is listed with its line and the reason, and nothing is imported;
// with --partial exactly the good records are.
func TestImportRefusesHostileRecords(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	line := func(fields string) string { return `{"category":"news",` + fields + `}` }
	jsonl := strings.Join([]string{
		line(`"title":"good 1"`),
		line(`"title":"x","payload":` + nestedJSON(33)),
		line(`"title":"x","payload":` + nestedJSON(32)),
		line(`"title":"good 2, 31 levels","payload":` + nestedJSON(tasks.MaxJSONDepth)),
		line("\"title\":\"caf\xe9\""),
		`{"category":"n\udc00ws","title":"x"}`,
		line("\"title\":\"x\",\"payload\":{\"text\":\"\xff\"}"),
		line(`"title":"x","payload":{"text":"\ud800"}`),
		line(`"title":"` + strings.Repeat("😀", tasks.MaxTitleLen+1) + `"`),
		`{"category":"` + strings.Repeat("c", tasks.MaxCategoryLen+1) + `","title":"x"}`,
		line(`"title":"x","priority":2147483648`),
		line(`"title":"x","priority":-2147483649`),
		line(`"title":"x","priority":18446744073709551616`),
		line(`"title":"x","max_attempts":101`),
		line(`"title":"good 3"`),
	}, "\n") + "\n"
	path := s.file(t, "hostile.jsonl", jsonl)
	stdout, stderr, code := runApp(t, s.env, "import", path)
	if code != exitFailure {
		t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitFailure, stdout, stderr)
	}
	for _, want := range []string{
		"12 of 15 records rejected",
		"line 2: payload must nest arrays and objects at most 31 levels deep",
		"line 3: payload must nest arrays and objects at most 31 levels deep",
		"line 5: title must be valid UTF-8",
		`line 6: category must not escape a lone surrogate (\udc00)`,
		"line 7: payload.text must be valid UTF-8",
		`line 8: payload.text must not escape a lone surrogate (\ud800)`,
		"line 9: title must be 1..512 characters",
		"line 10: category must be 1..64 characters",
		"line 11: priority must fit in 32 bits",
		"line 12: priority must fit in 32 bits",
		"line 13: priority: 18446744073709551616 is out of range",
		"line 14: max_attempts must be 1..100",
		"nothing imported",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if got := s.tasks(t); len(got) != 0 {
		t.Fatalf("%d tasks imported from a file with rejected records, want 0", len(got))
	}

	if _, stderr, code := runApp(t, s.env, "import", "--partial", path); code != exitOK {
		t.Fatalf("--partial: exit %d\n%s", code, stderr)
	}
	got := s.tasks(t)
	var titles []string
	for _, task := range got {
		titles = append(titles, task.Title)
	}
	if strings.Join(titles, "|") != "good 1|good 2, 31 levels|good 3" {
		t.Fatalf("--partial imported %q", titles)
	}
	var want, stored any
	if err := json.Unmarshal([]byte(nestedJSON(tasks.MaxJSONDepth)), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got[1].Payload, &stored); err != nil || fmt.Sprint(stored) != fmt.Sprint(want) {
		t.Errorf("the 31-level payload is stored as %.80s (%v)", got[1].Payload, err)
	}
}

// TestImportRefusesHostileCSV does the same with a CSV file, whose cells keep
// their bytes as they are.
func TestImportRefusesHostileCSV(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	deep := strings.ReplaceAll(nestedJSON(33), `"`, `""`)
	path := s.file(t, "hostile.csv", "category,title,priority,payload,max_attempts\n"+
		"news,good,,,\n"+
		"news,caf\xe9,,,\n"+
		"n\xffws,x,,,\n"+
		"news,x,,\"{\"\"text\"\":\"\"\xc3\"\"}\",\n"+
		"news,x,,\""+deep+"\",\n"+
		"news,x,2147483648,,\n"+
		"news,x,99999999999999999999,,\n"+
		"news,x,,,-1\n")
	stdout, stderr, code := runApp(t, s.env, "import", path)
	if code != exitFailure {
		t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitFailure, stdout, stderr)
	}
	for _, want := range []string{
		"7 of 8 records rejected",
		"line 3: title must be valid UTF-8",
		"line 4: category must be valid UTF-8",
		"line 5: payload.text must be valid UTF-8",
		"line 6: payload must nest arrays and objects at most 31 levels deep",
		"line 7: priority must fit in 32 bits",
		"line 8: priority: 99999999999999999999 is out of range",
		"line 9: max_attempts must be 1..100",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if got := s.tasks(t); len(got) != 0 {
		t.Errorf("%d tasks imported from a file with rejected records, want 0", len(got))
	}
}

// TestImportTwiceWithKeys imports a file whose records have keys twice: the
// second run inserts nothing and says so; a third file that adds records only
// inserts those. run_after and due_at arrive in JSON lines and CSV.
func TestImportTwiceWithKeys(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	var lines []string
	for i := range 250 {
		lines = append(lines, fmt.Sprintf(`{"category":"news","title":"Article %d","key":"article-%d","due_at":"2030-01-02T03:04:05.678Z"}`, i, i))
	}
	path := s.file(t, "keyed.jsonl", strings.Join(lines, "\n")+"\n")

	stdout, stderr, code := runApp(t, s.env, "import", "-batch", "100", path)
	if code != exitOK || !strings.Contains(stdout, "imported 250 tasks") {
		t.Fatalf("first import: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	first := s.tasks(t)
	stdout, stderr, code = runApp(t, s.env, "import", "-batch", "100", path)
	if code != exitOK || !strings.Contains(stdout, "imported nothing from "+path+": the keys of all 250 records exist already") {
		t.Fatalf("second import: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if got := s.tasks(t); len(got) != len(first) {
		t.Fatalf("%d tasks after the second import, want %d", len(got), len(first))
	}

	// Two new records, one old, one repeated in the file itself.
	more := lines[:1]
	more = append(more,
		`{"category":"news","title":"New A","key":"article-new-a","run_after":"2031-05-06T07:08:09Z"}`,
		`{"category":"news","title":"New A again","key":"article-new-a"}`,
		`{"category":"news","title":"No key"}`)
	stdout, stderr, code = runApp(t, s.env, "import", s.file(t, "more.jsonl", strings.Join(more, "\n")+"\n"))
	if code != exitOK || !strings.Contains(stdout, "imported 2 tasks") || !strings.Contains(stdout, "2 records whose key is held not imported again") {
		t.Fatalf("third import: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if n := len(s.tasks(t)); n != 252 {
		t.Fatalf("%d tasks after the third import, want 252", n)
	}
	var row struct {
		Title    string    `db:"title"`
		RunAfter time.Time `db:"run_after"`
	}
	if err := s.store.DB().Get(&row, `SELECT title, run_after FROM tasks WHERE task_key = 'article-new-a'`); err != nil {
		t.Fatal(err)
	}
	if row.Title != "New A" || !row.RunAfter.Equal(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)) {
		t.Errorf("article-new-a = %+v, want the first record's title and run_after", row)
	}
	var due time.Time
	if err := s.store.DB().Get(&due, `SELECT due_at FROM tasks WHERE task_key = 'article-7'`); err != nil {
		t.Fatal(err)
	}
	if !due.Equal(time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)) {
		t.Errorf("due_at of article-7 = %v", due)
	}

	csvPath := s.file(t, "keyed.csv", "category,title,key,run_after,due_at\n"+
		"news,C1,csv-1,2032-01-01T00:00:00Z,\n"+
		"news,C2,,,2032-02-02T00:00:00+01:00\n"+
		"news,C3,csv-1,,\n"+
		"news,C4,csv-4,tomorrow,\n")
	stdout, stderr, code = runApp(t, s.env, "import", "--partial", csvPath)
	if code != exitOK || !strings.Contains(stdout, "imported 2 tasks") || !strings.Contains(stderr, "line 5: run_after: want an RFC 3339 time") {
		t.Fatalf("csv import: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var csvDue time.Time
	if err := s.store.DB().Get(&csvDue, `SELECT due_at FROM tasks WHERE title = 'C2' AND task_key IS NULL`); err != nil {
		t.Fatal(err)
	}
	if !csvDue.Equal(time.Date(2032, 2, 1, 23, 0, 0, 0, time.UTC)) {
		t.Errorf("due_at of C2 = %v, want 2032-02-01 23:00 UTC", csvDue)
	}
}

// TestImportNamesEverySlot: records that ask for several results make groups,
// and the ids the import prints cover every slot of them.
func TestImportNamesEverySlot(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	path := s.file(t, "groups.jsonl", `{"category":"news","title":"Two","overlap":2}
{"category":"news","title":"One"}
{"category":"news","title":"Three","overlap":3}
`)
	stdout, stderr, code := runApp(t, s.env, "import", path)
	got := s.tasks(t)
	if len(got) != 6 {
		t.Fatalf("%d tasks imported, want 6", len(got))
	}
	lo, hi := got[0].ID, got[0].ID
	for _, task := range got {
		lo, hi = min(lo, task.ID), max(hi, task.ID)
	}
	want := fmt.Sprintf("imported 3 tasks from %s (ids %d..%d, 6 tasks with their groups' slots)", path, lo, hi)
	if code != exitOK || !strings.Contains(stdout, want) {
		t.Fatalf("import: exit %d\nstdout: %s\nstderr: %s\nwant %q", code, stdout, stderr, want)
	}
}

// TestImportGold: a record's gold makes its task a gold task in the insert,
// from a JSON line and from a CSV cell; a gold answer its category's rule
// cannot compare, or in a category without one, imports nothing.
func TestImportGold(t *testing.T) {
	t.Parallel()
	s := newImportSetup(t)
	cfg := s.file(t, "taskd.yaml", "categories:\n  - name: news\n    gold: {rule: decision}\n  - name: facts\n    gold: {rule: fields, fields: [label]}\n")
	jsonl := s.file(t, "gold.jsonl", `{"category":"news","title":"gold","gold":{"decision":"reject"}}
{"category":"news","title":"plain"}
`)
	csv := s.file(t, "gold.csv", "category,title,gold\nfacts,gold fact,\"{\"\"result\"\":{\"\"label\"\":\"\"spam\"\"}}\"\n")
	for _, path := range []string{jsonl, csv} {
		if stdout, stderr, code := runApp(t, s.env, "import", "-config", cfg, path); code != exitOK {
			t.Fatalf("import %s: exit %d\nstdout: %s\nstderr: %s", path, code, stdout, stderr)
		}
	}
	var gold []struct {
		Title    string    `db:"title"`
		Category string    `db:"category"`
		Answer   string    `db:"answer"`
		RunAfter time.Time `db:"run_after"`
	}
	if err := s.store.DB().Select(&gold, `SELECT t.title, g.category, g.answer, t.run_after FROM gold_tasks g JOIN tasks t ON t.id = g.task_id ORDER BY t.id`); err != nil {
		t.Fatal(err)
	}
	if len(gold) != 2 || gold[0].Title != "gold" || gold[1].Title != "gold fact" || gold[1].Category != "facts" ||
		!strings.Contains(gold[0].Answer, `"reject"`) || !strings.Contains(gold[1].Answer, `"spam"`) || !gold[0].RunAfter.Equal(tasks.GoldRunAfter) {
		t.Errorf("gold tasks = %+v, want the two gold records, held out of the pool", gold)
	}
	if n := len(s.tasks(t)); n != 3 {
		t.Errorf("%d tasks, want 3", n)
	}
	for _, bad := range []string{`{"category":"news","title":"x","gold":{"result":{"label":"a"}}}`, `{"category":"other","title":"x","gold":{"decision":"reject"}}`} {
		path := s.file(t, "bad.jsonl", bad+"\n")
		if _, stderr, code := runApp(t, s.env, "import", "-config", cfg, path); code == exitOK || !strings.Contains(stderr, "gold") {
			t.Errorf("import of %s: exit %d, stderr %q; want a refusal naming gold", bad, code, stderr)
		}
	}
	if n := len(s.tasks(t)); n != 3 {
		t.Errorf("%d tasks after the refused imports, want 3", n)
	}
}
