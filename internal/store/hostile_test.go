package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// nestedObject returns a JSON object of depth levels of arrays and objects:
// {"k":{"k":...[[1]]...}}. The scalar at the bottom adds no level.
func nestedObject(depth int) string {
	objects := (depth + 1) / 2
	arrays := depth - objects
	return strings.Repeat(`{"k":`, objects) + strings.Repeat("[", arrays) + "1" +
		strings.Repeat("]", arrays) + strings.Repeat("}", objects)
}

// isMariaDB reports whether the test server is MariaDB (as opposed to MySQL).
func (b *bundle) isMariaDB(t *testing.T) bool {
	t.Helper()
	var version string
	if err := b.db.GetContext(b.ctx, &version, `SELECT VERSION()`); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(strings.ToLower(version), "mariadb")
}

// TestJSONChecksMatchTheDatabase writes JSON documents into the JSON columns
// directly, past the store's validation, and checks that the validation refuses
// every document the database refuses (which would otherwise be a server error)
// and accepts the deepest document the database accepts.
func TestJSONChecksMatchTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	mariaDB := b.isMariaDB(t)

	cases := []struct {
		name string
		doc  string
		// mariaDBRefuses: MariaDB refuses the document. MySQL 8 allows 100 levels, so
		// only MariaDB marks the depth boundary.
		mariaDBRefuses bool
	}{
		{"31 levels", nestedObject(tasks.MaxJSONDepth), false},
		{"31 levels of empty arrays", `{"k":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}`, false},
		{"32 levels", nestedObject(tasks.MaxJSONDepth + 1), true},
		{"32 levels of empty arrays", `{"k":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}`, true},
		{"33 levels", nestedObject(tasks.MaxJSONDepth + 2), true},
		{"escaped surrogate pair", `{"a":"\ud83d\ude00"}`, false},
		{"lone high surrogate", `{"a":"\ud800"}`, true},
		{"lone low surrogate", `{"a":"\udc00"}`, true},
		{"high surrogate and a letter", `{"a":"\ud800\u0041"}`, true},
		{"low then high surrogate", `{"a":"\udc00\ud800"}`, true},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", true},
		{"invalid UTF-8 in a key", "{\"\xc3\":1}", true},
		{"beyond U+10FFFF", "{\"a\":\"\xf4\x90\x80\x80\"}", true},
		{"NUL escaped", `{"a":"\u0000"}`, false},
		{"huge number", `{"a":1e400,"b":123456789012345678901234567890}`, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			goErr := tasks.NewTask{Category: "news", Title: "t", Payload: json.RawMessage(c.doc)}.Validate()
			_, payloadErr := b.db.ExecContext(b.ctx, `UPDATE tasks SET payload = ? WHERE id = ?`, c.doc, id)
			_, resultErr := b.db.ExecContext(b.ctx,
				`INSERT INTO task_results (task_id, fence, holder, result) VALUES (?, ?, 'h', ?)`, id, 1000+i, c.doc)
			if (payloadErr == nil) != (resultErr == nil) {
				t.Fatalf("the payload column says %v, the result column %v", payloadErr, resultErr)
			}
			dbAccepts := payloadErr == nil
			if dbAccepts && goErr != nil {
				t.Errorf("the database accepts it, the validation refuses it: %v", goErr)
			}
			if !dbAccepts && goErr == nil {
				t.Errorf("the database refuses it (%v), the validation accepts it", payloadErr)
			}
			if mariaDB && dbAccepts == c.mariaDBRefuses {
				t.Errorf("MariaDB accepts it: %v, want %v (%v)", dbAccepts, !c.mariaDBRefuses, payloadErr)
			}
			if !dbAccepts && !errors.Is(goErr, tasks.ErrInvalid) {
				t.Errorf("validation error %v does not wrap ErrInvalid", goErr)
			}
		})
	}
}

// TestHostileTasksAreInvalid sends InsertTasks what a client could: each bad task
// is refused with ErrInvalid naming the task, the field and the rule, and nothing
// is inserted.
func TestHostileTasksAreInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 2})
	b.insertOne(t, "news", 0)
	ok := tasks.NewTask{Category: "news", Title: "ok"}
	with := func(f func(*tasks.NewTask)) tasks.NewTask {
		nt := ok
		f(&nt)
		return nt
	}
	payload := func(s string) tasks.NewTask { return with(func(t *tasks.NewTask) { t.Payload = json.RawMessage(s) }) }

	cases := []struct {
		name string
		task tasks.NewTask
		want string
	}{
		{"payload 32 levels", payload(nestedObject(tasks.MaxJSONDepth + 1)), "payload must nest arrays and objects at most 31 levels deep"},
		{"payload 33 levels", payload(nestedObject(tasks.MaxJSONDepth + 2)), "payload must nest arrays and objects at most 31 levels deep"},
		{"payload invalid UTF-8", payload("{\"text\":\"caf\xe9\"}"), "payload.text must be valid UTF-8"},
		{"payload key invalid UTF-8", payload("{\"\xff\":1}"), "a key in payload must be valid UTF-8"},
		{"payload lone surrogate", payload(`{"notes":["ok","\ud800"]}`), `payload.notes[1] must not escape a lone surrogate (\ud800)`},
		{"payload over the size limit", payload(`{"a":"` + strings.Repeat("x", tasks.MaxJSONBytes) + `"}`), "payload must be at most 4194304 bytes"},
		{"payload not JSON", payload(`{"a":`), "payload must be valid JSON"},
		{"payload not an object", payload(`[1]`), "payload must be a JSON object"},
		{"title invalid UTF-8", with(func(t *tasks.NewTask) { t.Title = "caf\xe9" }), "title must be valid UTF-8"},
		{"title too long", with(func(t *tasks.NewTask) { t.Title = strings.Repeat("😀", tasks.MaxTitleLen+1) }), "title must be 1..512 characters"},
		{"category invalid UTF-8", with(func(t *tasks.NewTask) { t.Category = "n\xffws" }), "category must be valid UTF-8"},
		{"category too long", with(func(t *tasks.NewTask) { t.Category = strings.Repeat("é", tasks.MaxCategoryLen+1) }), "category must be 1..64 characters"},
		{"title missing", with(func(t *tasks.NewTask) { t.Title = "" }), "title is required"},
		{"category missing", with(func(t *tasks.NewTask) { t.Category = "" }), "category is required"},
		{"priority 2^31", with(func(t *tasks.NewTask) { t.Priority = math.MaxInt32 + 1 }), "priority must fit in 32 bits"},
		{"priority -2^31-1", with(func(t *tasks.NewTask) { t.Priority = math.MinInt32 - 1 }), "priority must fit in 32 bits"},
		{"priority 2^63-1", with(func(t *tasks.NewTask) { t.Priority = math.MaxInt64 }), "priority must fit in 32 bits"},
		{"max_attempts 101", with(func(t *tasks.NewTask) { t.MaxAttempts = tasks.MaxAttemptsLimit + 1 }), "max_attempts must be 1..100"},
		{"max_attempts -1", with(func(t *tasks.NewTask) { t.MaxAttempts = -1 }), "max_attempts must be 1..100"},
		{"max_attempts 2^31", with(func(t *tasks.NewTask) { t.MaxAttempts = math.MaxInt32 + 1 }), "max_attempts must be 1..100"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The bad task comes after full batches of good ones.
			_, err := b.store.InsertTasks(b.ctx, []tasks.NewTask{ok, ok, ok, c.task})
			if !errors.Is(err, tasks.ErrInvalid) {
				t.Fatalf("error = %v, want ErrInvalid", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "task 3") || !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not name task 3 and say %q", msg, c.want)
			}
			if err := c.task.Validate(); !errors.Is(err, tasks.ErrInvalid) {
				t.Errorf("Validate says %v, want ErrInvalid", err)
			}
		})
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != 1 {
		t.Errorf("%d rows after refused inserts, want 1", n)
	}

	// The limits themselves are accepted, and stored as given.
	bigPayload := `{"a":"` + strings.Repeat("x", tasks.MaxJSONBytes-8) + `"}`
	limits := []tasks.NewTask{
		payload(nestedObject(tasks.MaxJSONDepth)),
		payload(`{"smile":"\ud83d\ude00","nul":"\u0000"}`),
		payload(bigPayload),
		with(func(t *tasks.NewTask) { t.Title = strings.Repeat("😀", tasks.MaxTitleLen) }),
		with(func(t *tasks.NewTask) { t.Category = strings.Repeat("é", tasks.MaxCategoryLen) }),
		with(func(t *tasks.NewTask) { t.Priority = math.MaxInt32 }),
		with(func(t *tasks.NewTask) { t.Priority = math.MinInt32 }),
		with(func(t *tasks.NewTask) { t.MaxAttempts = tasks.MaxAttemptsLimit }),
	}
	if len(bigPayload) != tasks.MaxJSONBytes {
		t.Fatalf("the big payload has %d bytes", len(bigPayload))
	}
	ids := b.insert(t, limits...)
	for i, id := range ids {
		got, want := b.task(t, id), limits[i]
		if got.Title != want.Title || got.Category != want.Category || got.Priority != want.Priority ||
			(want.MaxAttempts != 0 && got.MaxAttempts != want.MaxAttempts) ||
			(want.Payload != nil && !sameJSON(t, got.Payload, want.Payload)) {
			t.Errorf("limit %d stored as %.200v", i, got)
		}
	}
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("decode %.100s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("decode %.100s: %v", b, err)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// TestInsertTasksKeepsStatementsSmall inserts more bytes in one call than the
// server takes in one statement (max_allowed_packet, 16 MiB by default on
// MariaDB): InsertTasks splits its batches by size too.
func TestInsertTasksKeepsStatementsSmall(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	payload := json.RawMessage(`{"text":"` + strings.Repeat(`\"quoted\" `, 100<<10/11) + `"}`)
	nts := make([]tasks.NewTask, 250) // 25 MiB, doubled by escaping
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "news", Title: fmt.Sprintf("big %d", i), Payload: payload}
	}
	ids, err := b.store.InsertTasks(b.ctx, nts)
	if err != nil {
		t.Fatalf("insert %d tasks of %d bytes: %v", len(nts), len(payload), err)
	}
	if len(ids) != len(nts) {
		t.Fatalf("%d ids for %d tasks", len(ids), len(nts))
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE LENGTH(payload) >= ?`, len(payload)); n != len(nts) {
		t.Errorf("%d full payloads stored, want %d", n, len(nts))
	}
}

// TestHostileEditorsAreInvalid creates editors with bad names and categories.
func TestHostileEditorsAreInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	b.editor(t, "Zoë Smith", "news")
	_, hash := tasks.NewToken()
	cases := []struct {
		name string
		p    tasks.CreateEditorParams
		want error
		msg  string
	}{
		{"name invalid UTF-8", tasks.CreateEditorParams{Name: "ada\xff", Categories: []string{"news"}}, tasks.ErrInvalid, "name must be valid UTF-8"},
		{"name too long", tasks.CreateEditorParams{Name: strings.Repeat("é", tasks.MaxEditorNameLen+1), Categories: []string{"news"}}, tasks.ErrInvalid, "name must be 1..128 characters"},
		{"name missing", tasks.CreateEditorParams{Categories: []string{"news"}}, tasks.ErrInvalid, "name is required"},
		{"no categories", tasks.CreateEditorParams{Name: "ada"}, tasks.ErrInvalid, "categories are required (at least one)"},
		{"empty category", tasks.CreateEditorParams{Name: "ada", Categories: []string{"news", ""}}, tasks.ErrInvalid, "category is required"},
		{"category invalid UTF-8", tasks.CreateEditorParams{Name: "ada", Categories: []string{"news", "sp\xc3rt"}}, tasks.ErrInvalid, "category must be valid UTF-8"},
		{"category too long", tasks.CreateEditorParams{Name: "ada", Categories: []string{strings.Repeat("c", tasks.MaxCategoryLen+1)}}, tasks.ErrInvalid, "category must be 1..64 characters"},
		{"too many categories", tasks.CreateEditorParams{Name: "ada", Categories: manyCategories(tasks.MaxCategories + 1)}, tasks.ErrInvalid, "at most 64 categories"},
		// The database compares names ignoring case and accents.
		{"same name in other case and accents", tasks.CreateEditorParams{Name: "ZOE SMITH", Categories: []string{"news"}}, tasks.ErrDuplicate, "taken"},
		// A name that looks like another's: a Cyrillic о.
		{"name that looks alike", tasks.CreateEditorParams{Name: "Z\u043eë Smith", Categories: []string{"news"}}, tasks.ErrDuplicate, `looks like the name of editor 1, "Zoë Smith"`},
		// Nothing invisible, and nothing that changes how the rest is shown.
		{"name with NUL", tasks.CreateEditorParams{Name: "ada\x00", Categories: []string{"news"}}, tasks.ErrInvalid, "name must not hold U+0000"},
		{"name with ESC", tasks.CreateEditorParams{Name: "\x1b[31mada", Categories: []string{"news"}}, tasks.ErrInvalid, "name must not hold U+001B"},
		{"name with a newline", tasks.CreateEditorParams{Name: "ada\nlovelace", Categories: []string{"news"}}, tasks.ErrInvalid, "name must not hold U+000A (a line break)"},
		{"name of spaces", tasks.CreateEditorParams{Name: "   ", Categories: []string{"news"}}, tasks.ErrInvalid, "name must not be blank"},
		{"name with a trailing space", tasks.CreateEditorParams{Name: "ada ", Categories: []string{"news"}}, tasks.ErrInvalid, "name must not start or end with a space"},
		{"name with a bidi override", tasks.CreateEditorParams{Name: "ada\u202eveR", Categories: []string{"news"}}, tasks.ErrInvalid, "name must not hold U+202E (a bidi control)"},
		{"name with a zero-width space", tasks.CreateEditorParams{Name: "a\u200bda", Categories: []string{"news"}}, tasks.ErrInvalid, "name must not hold U+200B"},
		{"name with a line separator", tasks.CreateEditorParams{Name: "ada\u2028", Categories: []string{"news"}}, tasks.ErrInvalid, "name must not hold U+2028"},
		{"category with a bidi isolate", tasks.CreateEditorParams{Name: "ada", Categories: []string{"news\u2066"}}, tasks.ErrInvalid, "category must not hold U+2066"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.p.TokenHash = hash
			_, err := b.store.CreateEditor(b.ctx, c.p)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error = %v, want %v saying %q", err, c.want, c.msg)
			}
		})
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editors`); n != 1 {
		t.Errorf("%d editors, want 1", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editor_categories`); n != 1 {
		t.Errorf("%d editor categories, want 1", n)
	}
	// The limits are fine.
	e := b.editor(t, strings.Repeat("😀", tasks.MaxEditorNameLen), manyCategories(tasks.MaxCategories)...)
	if utf8.RuneCountInString(e.Name) != tasks.MaxEditorNameLen || len(e.Categories) != tasks.MaxCategories {
		t.Errorf("editor at the limits: %d characters, %d categories", utf8.RuneCountInString(e.Name), len(e.Categories))
	}
}

func manyCategories(n int) []string {
	cats := make([]string, n)
	for i := range cats {
		cats[i] = fmt.Sprintf("%064d", i)
	}
	return cats
}

// TestHostileResultsAreInvalid submits results the database would refuse: each is
// ErrInvalid naming the rule, and the claim stays as it was.
func TestHostileResultsAreInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ada", "news")
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)

	before := b.snapshot(t, id)
	for _, r := range []struct{ name, result, want string }{
		{"empty", ``, "result must be valid JSON"},
		{"not JSON", `{"a":`, "result must be valid JSON"},
		{"32 levels", nestedObject(tasks.MaxJSONDepth + 1), "result must nest arrays and objects at most 31 levels deep"},
		{"33 levels", nestedObject(tasks.MaxJSONDepth + 2), "result must nest arrays and objects at most 31 levels deep"},
		{"invalid UTF-8", "{\"verdict\":\"\xff\"}", "result.verdict must be valid UTF-8"},
		{"lone surrogate", `"\udfff"`, `result must not escape a lone surrogate (\udfff)`},
		{"over the size limit", `"` + strings.Repeat("x", tasks.MaxJSONBytes) + `"`, "result must be at most 4194304 bytes"},
	} {
		_, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(r.result)})
		if !errors.Is(err, tasks.ErrInvalid) || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: error = %v, want ErrInvalid saying %q", r.name, err, r.want)
		}
	}
	b.unchanged(t, id, before)

	deepest := nestedObject(tasks.MaxJSONDepth)
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(deepest)}); err != nil {
		t.Fatalf("submit of a result %d levels deep: %v", tasks.MaxJSONDepth, err)
	}
	var stored string
	if err := b.db.GetContext(b.ctx, &stored, `SELECT result FROM task_results WHERE task_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, []byte(stored), []byte(deepest)) {
		t.Errorf("stored result %.80s, want %.80s", stored, deepest)
	}
}

// TestFreeTextIsMadeValid checks the texts the store truncates instead of refusing:
// a release reason and a failure's error. Invalid UTF-8 in them is replaced, so it
// never reaches the database.
func TestFreeTextIsMadeValid(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ada", "news")
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)
	reason := "bad \xff byte " + strings.Repeat("😀", 2000)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Reason: reason}); err != nil {
		t.Fatalf("release with an invalid reason: %v", err)
	}
	c = b.claim(t, id, "w1", 0, time.Minute)
	if _, err := b.store.Fail(b.ctx, tasks.FailParams{TaskID: id, Fence: c.Fence, Holder: "w1", Err: "\xc3 broken: " + strings.Repeat("é", 20000)}); err != nil {
		t.Fatalf("fail with an invalid error: %v", err)
	}
	evs := b.events(t, id)
	var released, failed string
	for _, e := range evs {
		switch e.Kind {
		case tasks.EventReleased:
			released = e.Detail
		case tasks.EventFailed:
			failed = e.Detail
		}
	}
	if !strings.HasPrefix(released, "bad \uFFFD byte 😀") || utf8.RuneCountInString(released) != 1024 {
		t.Errorf("release detail %.40q (%d characters)", released, utf8.RuneCountInString(released))
	}
	if !strings.HasPrefix(failed, "\uFFFD broken: é") || utf8.RuneCountInString(failed) != 1024 {
		t.Errorf("fail detail %.40q (%d characters)", failed, utf8.RuneCountInString(failed))
	}
	if last := b.task(t, id).LastError; !strings.HasPrefix(last, "\uFFFD broken: é") || !utf8.ValidString(last) {
		t.Errorf("last_error %.40q", last)
	}
}

// TestRefusedValuesAreInvalid narrows columns of the test database so that values
// the validation lets through are refused by the server: the store's backstop
// turns the server's error into ErrInvalid, keeping it as the cause, and nothing
// changes.
func TestRefusedValuesAreInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ada", "news")
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)
	b.exec(t, `ALTER TABLE tasks MODIFY title VARCHAR(8) NOT NULL, MODIFY priority SMALLINT NOT NULL DEFAULT 0,
		MODIFY category VARCHAR(64) CHARACTER SET latin1 NOT NULL`)
	b.exec(t, `ALTER TABLE editors MODIFY name VARCHAR(4) NOT NULL`)
	b.exec(t, `ALTER TABLE task_events MODIFY detail VARCHAR(4) NULL`)
	b.exec(t, `ALTER TABLE task_results ADD CONSTRAINT result_short CHECK (JSON_LENGTH(result) <= 1)`)

	wantRefused := func(what string, err error, numbers ...uint16) {
		t.Helper()
		var me *mysql.MySQLError
		if !errors.Is(err, tasks.ErrInvalid) || !errors.As(err, &me) {
			t.Errorf("%s: error = %v, want ErrInvalid with the server's error", what, err)
			return
		}
		for _, n := range numbers {
			if me.Number == n {
				return
			}
		}
		t.Errorf("%s: server error %d, want one of %v", what, me.Number, numbers)
	}
	tasksBefore := b.count(t, `SELECT COUNT(*) FROM tasks`)
	_, err := b.store.InsertTasks(b.ctx, []tasks.NewTask{{Category: "news", Title: "ninechars"}})
	wantRefused("title too long for the column", err, 1406)
	_, err = b.store.InsertTasks(b.ctx, []tasks.NewTask{{Category: "news", Title: "t", Priority: 40000}})
	wantRefused("priority out of range for the column", err, 1264)
	_, err = b.store.InsertTasks(b.ctx, []tasks.NewTask{{Category: "nëws😀", Title: "t"}})
	wantRefused("category the column's charset cannot hold", err, 1366)
	if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != tasksBefore {
		t.Errorf("%d tasks, want %d", n, tasksBefore)
	}

	_, hash := tasks.NewToken()
	_, err = b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: "fivec", Categories: []string{"news"}, TokenHash: hash})
	wantRefused("editor name too long for the column", err, 1406)
	if n := b.count(t, `SELECT COUNT(*) FROM editors`); n != 1 {
		t.Errorf("%d editors, want 1", n)
	}

	before := b.snapshot(t, id)
	_, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(`[1,2]`)})
	wantRefused("result failing a CHECK", err, 4025, 3819)
	_, err = b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Reason: "longer"})
	wantRefused("release reason too long for the column", err, 1406)
	b.unchanged(t, id, before)
}
