package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// resultLine is a result line of GET /v1/results.
type resultLine struct {
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
		wantKeys(t, l, "cursor", "task_id", "fence", "category", "title", "key", "holder", "editor_id", "result", "submitted_at")
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

// A cursor older than what retention kept is 410 cursor_expired, naming the
// oldest cursor still kept; reading on from it works.
func TestResultsCursorExpired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	ids := b.addN(t, "news", 3)
	submit := func() {
		a := b.next(t, e.Token)
		wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), e.Token,
			fmt.Sprintf(`{"fence":%d,"result":1}`, a.Fence)), http.StatusOK, nil)
	}
	submit()
	submit()
	b.results(t, "") // numbers the first two
	time.Sleep(5 * time.Millisecond)
	if p, err := b.store.PurgeTasks(t.Context(), tasks.StatusDone, time.Millisecond, 10); err != nil || p.Rows["tasks"] != 2 {
		t.Fatalf("purge = %+v, %v; want the 2 done tasks", p, err)
	}
	submit() // the third, after the purge
	for _, q := range []string{"", "?after=1"} {
		res := b.do(t, "GET", "/v1/results"+q, adminToken, "")
		msg := wantError(t, res, http.StatusGone, "cursor_expired")
		var e errorJSON
		strictDecode(t, res.body, &e)
		if e.Error.OldestCursor != "2" || !strings.Contains(msg, "oldest cursor still kept is 2") || !strings.Contains(msg, "retention") {
			t.Errorf("GET /v1/results%s: oldest_cursor %q, message %q", q, e.Error.OldestCursor, msg)
		}
	}
	got, end := b.results(t, "?after=2")
	if len(got) != 1 || got[0].TaskID != ids[2] || end.NextCursor != "3" {
		t.Errorf("after the oldest cursor kept: %+v, end %+v", got, end)
	}
}

func TestResultsMySQLDownIsUnavailable(t *testing.T) {
	t.Parallel()
	db, err := sqlx.Open("mysql", "taskd:taskd@tcp(127.0.0.1:1)/taskd?timeout=200ms&parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	down, err := store.New(db, store.Config{})
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

// failingResults is the test store with a results feed that fails after two
// results, as a database that goes away in the middle of a read.
type failingResults struct {
	*store.Store
}

func (failingResults) Results(_ context.Context, p tasks.ResultsParams, fn func(*tasks.Result) error) (tasks.ResultsPage, error) {
	page := tasks.ResultsPage{Next: p.After}
	for i := range int64(2) {
		r := tasks.Result{Cursor: p.After + i + 1, TaskID: i + 1, Fence: 1, Category: "news", Title: "t",
			Holder: "w", Result: json.RawMessage(`{}`), SubmittedAt: time.Now()}
		if err := fn(&r); err != nil {
			return page, err
		}
		page.Count, page.Next = page.Count+1, r.Cursor
	}
	return page, errors.New("connection lost")
}

// TestResultsCutShort: when the read fails after the answer started, the
// connection is cut, so the client sees an error, never a whole answer, and
// the lines before it are whole.
func TestResultsCutShort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, err := api.New(api.Config{Dispatcher: b.d, Store: failingResults{b.store}, AdminToken: adminToken,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/results?after=5", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	body, err := io.ReadAll(res.Body)
	if err == nil {
		t.Fatalf("the answer ended cleanly after a failed read:\n%s", body)
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) != 2 || !strings.HasSuffix(string(body), "\n") {
		t.Fatalf("want two whole lines before the cut, got %q", body)
	}
	var last resultLine
	strictDecode(t, []byte(lines[1]), &last)
	if last.Cursor != "7" {
		t.Errorf("last whole line has cursor %s, want 7", last.Cursor)
	}
}

// heldResults is the test store with a results feed that hands over one
// result, then waits for the client to have read it before the next.
type heldResults struct {
	*store.Store
	read chan struct{} // closed by the test once it has the first line
}

func (h heldResults) Results(ctx context.Context, p tasks.ResultsParams, fn func(*tasks.Result) error) (tasks.ResultsPage, error) {
	page := tasks.ResultsPage{Next: p.After}
	for i := range int64(2) {
		if i == 1 {
			select {
			case <-h.read:
			case <-ctx.Done():
				return page, ctx.Err()
			}
		}
		r := tasks.Result{Cursor: i + 1, TaskID: i + 1, Fence: 1, Category: "news", Title: "t",
			Holder: "w", Result: json.RawMessage(`{}`), SubmittedAt: time.Now()}
		if err := fn(&r); err != nil {
			return page, err
		}
		page.Count, page.Next = page.Count+1, r.Cursor
	}
	return page, nil
}

// TestResultsStream: the first line reaches the client while the read is still
// going on. (Buffered to the end, the answer would never come: the read waits
// for the client to have its first line, until the request's time is up.)
func TestResultsStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	held := heldResults{Store: b.store, read: make(chan struct{})}
	h, err := api.New(api.Config{Dispatcher: b.d, Store: held, AdminToken: adminToken,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/results", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	first, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v", err)
	}
	close(held.read)
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("rest: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(first+string(rest), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"cursor":"1"`) || !strings.Contains(lines[2], `"next_cursor":"2"`) {
		t.Errorf("answer %q", lines)
	}
}

// GET /v1/stats reports the storage the finished data takes, when the engine
// gives it: each purged table's size and the age of the oldest finished task
// kept, by status.
func TestStatsStorage(t *testing.T) {
	t.Parallel()
	var st *store.Store
	b := setup(t, setupOpts{api: api.Config{Storage: func(ctx context.Context) (*tasks.Storage, error) { return st.Storage(ctx) }}})
	st = b.store
	e := b.editor(t, "ada", "news")
	b.addN(t, "news", 2)
	a := b.next(t, e.Token)
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), e.Token,
		fmt.Sprintf(`{"fence":%d,"result":1}`, a.Fence)), http.StatusOK, nil)

	var got struct {
		Storage *struct {
			Tables []struct {
				Name  string `json:"name"`
				Bytes int64  `json:"bytes"`
				Rows  int64  `json:"rows"`
			} `json:"tables"`
			OldestFinishedMS map[string]int64 `json:"oldest_finished_ms"`
		} `json:"storage"`
	}
	res := b.do(t, "GET", "/v1/stats", adminToken, "")
	if err := json.Unmarshal(res.body, &got); err != nil || res.status != http.StatusOK {
		t.Fatalf("GET /v1/stats = %d %s (%v)", res.status, res.body, err)
	}
	if got.Storage == nil {
		t.Fatal("no storage in the stats")
	}
	names := map[string]int64{}
	for _, tb := range got.Storage.Tables {
		names[tb.Name] = tb.Bytes
	}
	for _, n := range []string{"tasks", "task_results", "task_events", "task_skips", "webhook_outbox", "webhook_deliveries", "webhook_attempts"} {
		if names[n] <= 0 {
			t.Errorf("table %s: %d bytes, want above 0 (tables %+v)", n, names[n], got.Storage.Tables)
		}
	}
	if age, ok := got.Storage.OldestFinishedMS["done"]; !ok || age < 0 || age > 60_000 || len(got.Storage.OldestFinishedMS) != 1 {
		t.Errorf("oldest finished = %v, want the done task's age only", got.Storage.OldestFinishedMS)
	}
}
