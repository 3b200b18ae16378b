package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// resultLine is a result line of GET /v1/results.
type resultLine struct {
	Cursor      string          `json:"cursor"`
	TaskID      int64           `json:"task_id"`
	Fence       int64           `json:"fence"`
	Category    string          `json:"category"`
	Title       string          `json:"title"`
	Holder      string          `json:"holder"`
	EditorID    *int64          `json:"editor_id"`
	Result      json.RawMessage `json:"result"`
	SubmittedAt string          `json:"submitted_at"`
}

// resultsEnd is the last line of GET /v1/results.
type resultsEnd struct {
	NextCursor string `json:"next_cursor"`
	Count      int    `json:"count"`
	More       bool   `json:"more"`
}

// results reads a page of GET /v1/results, checking its framing: JSON lines,
// each a result with exactly the documented keys, then the end line.
func (b *bundle) results(t *testing.T, query string) ([]resultLine, resultsEnd) {
	t.Helper()
	res := b.do(t, "GET", "/v1/results"+query, adminToken, "")
	if res.status != http.StatusOK {
		t.Fatalf("GET /v1/results%s = %d %s", query, res.status, res.body)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("Content-Type = %q, want application/x-ndjson", ct)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(res.body))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if len(lines) == 0 {
		t.Fatalf("empty answer")
	}
	var out []resultLine
	for _, l := range lines[:len(lines)-1] {
		wantKeys(t, l, "cursor", "task_id", "fence", "category", "title", "holder", "editor_id", "result", "submitted_at")
		var r resultLine
		strictDecode(t, l, &r)
		parseTime(t, r.SubmittedAt)
		out = append(out, r)
	}
	var end resultsEnd
	wantKeys(t, lines[len(lines)-1], "next_cursor", "count", "more")
	strictDecode(t, lines[len(lines)-1], &end)
	if end.Count != len(out) {
		t.Fatalf("end line counts %d results, the answer has %d", end.Count, len(out))
	}
	if len(out) > 0 && end.NextCursor != out[len(out)-1].Cursor {
		t.Fatalf("next_cursor %s, last line's cursor %s", end.NextCursor, out[len(out)-1].Cursor)
	}
	return out, end
}

func TestResults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	ids := b.add(t,
		newTask{Category: "news", Priority: 2, Title: "first"},
		newTask{Category: "news", Priority: 1, Title: "second"},
		newTask{Category: "news", Priority: 0, Title: "third"})
	for i, id := range ids {
		a := b.next(t, e.Token)
		if a.Task.ID != id {
			t.Fatalf("assignment %d is task %d, want %d", i, a.Task.ID, id)
		}
		wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), e.Token,
			fmt.Sprintf(`{"fence":%d,"result":{"n":%d,"s":"<é>"}}`, a.Fence, i)), http.StatusOK, nil)
	}

	first, end := b.results(t, "?limit=2")
	if len(first) != 2 || !end.More {
		t.Fatalf("limit 2: %d results, end %+v", len(first), end)
	}
	r := first[0]
	if r.TaskID != ids[0] || r.Fence != 1 || r.Category != "news" || r.Title != "first" ||
		r.Holder != tasks.EditorHolder(e.ID) || r.EditorID == nil || *r.EditorID != e.ID {
		t.Errorf("first result = %+v", r)
	}
	var result map[string]any
	if err := json.Unmarshal(r.Result, &result); err != nil || result["n"] != 0.0 || result["s"] != "<é>" {
		t.Errorf("first result's result = %s (%v)", r.Result, err)
	}
	rest, end := b.results(t, "?after="+end.NextCursor+"&limit=2")
	if len(rest) != 1 || rest[0].TaskID != ids[2] || end.More {
		t.Fatalf("second page: %+v, end %+v", rest, end)
	}
	c0, _ := strconv.ParseInt(first[1].Cursor, 10, 64)
	c1, _ := strconv.ParseInt(rest[0].Cursor, 10, 64)
	if c1 <= c0 {
		t.Errorf("cursors do not grow: %d then %d", c0, c1)
	}
	none, end2 := b.results(t, "?after="+end.NextCursor)
	if len(none) != 0 || end2.NextCursor != end.NextCursor || end2.More {
		t.Errorf("caught up: %+v, end %+v; want none, the same cursor", none, end2)
	}
	all, end := b.results(t, "")
	if len(all) != 3 || end.More {
		t.Errorf("from the start with the default limit: %d results, end %+v", len(all), end)
	}
}

func TestResultsRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	ids := b.addN(t, "news", 1)
	a := b.next(t, e.Token)
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", ids[0]), e.Token,
		fmt.Sprintf(`{"fence":%d,"result":1}`, a.Fence)), http.StatusOK, nil)

	wantError(t, b.do(t, "GET", "/v1/results", "", ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "GET", "/v1/results", e.Token, ""), http.StatusForbidden, "forbidden")
	wantError(t, b.do(t, "POST", "/v1/results", adminToken, ""), http.StatusMethodNotAllowed, "method_not_allowed")
	for _, q := range []string{
		"?after=-1", "?after=abc", "?after=%2B1", "?after=1.5", "?after=99999999999999999999",
		"?limit=0", "?limit=-5", "?limit=x", "?limit=" + strconv.Itoa(tasks.ResultsLimitMax+1),
		"?after=2", // beyond the end of the feed: one result, not numbered yet
	} {
		wantError(t, b.do(t, "GET", "/v1/results"+q, adminToken, ""), http.StatusUnprocessableEntity, "invalid")
	}
	if n := countRows(t, b.db, `SELECT COUNT(*) FROM task_results WHERE seq IS NOT NULL`); n != 0 {
		t.Errorf("refused reads numbered %d results", n)
	}
	if got, _ := b.results(t, "?limit="+strconv.Itoa(tasks.ResultsLimitMax)); len(got) != 1 {
		t.Errorf("%d results at the largest limit, want 1", len(got))
	}
}

func TestResultsMySQLDownIsUnavailable(t *testing.T) {
	t.Parallel()
	db, err := sqlx.Open("mysql", "taskd:taskd@tcp(127.0.0.1:1)/taskd?timeout=200ms&parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	down, err := tasks.NewStore(db, tasks.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, setupOpts{store: down})
	res := b.do(t, "GET", "/v1/results", adminToken, "")
	wantError(t, res, http.StatusServiceUnavailable, "unavailable")
	if res.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
}

func countRows(t *testing.T, db *sqlx.DB, query string) int {
	t.Helper()
	var n int
	if err := db.GetContext(t.Context(), &n, query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
