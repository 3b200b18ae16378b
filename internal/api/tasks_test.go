package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// TestAddTasksWithKeys posts tasks with keys twice: the second answer names the
// same tasks as existing, 200 instead of 201, and makes none.
func TestAddTasksWithKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := mustJSON(t, []newTask{
		{Category: "news", Title: "a", Key: "ext-1", DueAt: "2030-01-02T03:04:05.006+01:00", RunAfter: "2020-01-01T00:00:00Z"},
		{Category: "news", Title: "no key"},
		{Category: "news", Title: "a twice", Key: "ext-1"},
	})
	var first addResponse
	wantJSON(t, b.do(t, "POST", "/v1/tasks", adminToken, body), http.StatusCreated, &first)
	if first.Created != 2 || first.Existing != 1 || !first.Tasks[0].Created || !first.Tasks[1].Created ||
		first.Tasks[2].Created || first.Tasks[2].ID != first.Tasks[0].ID || first.IDs[2] != first.IDs[0] {
		t.Fatalf("first answer = %+v", first)
	}

	keyed := mustJSON(t, []newTask{{Category: "news", Title: "a again", Key: "ext-1"}})
	var again addResponse
	wantJSON(t, b.do(t, "POST", "/v1/tasks", adminToken, keyed), http.StatusOK, &again)
	if again.Created != 0 || again.Existing != 1 || again.Tasks[0].Created || again.IDs[0] != first.IDs[0] {
		t.Fatalf("repeated key: %+v, want the existing task %d", again, first.IDs[0])
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != 2 {
		t.Fatalf("%d tasks, want 2", n)
	}

	res := b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", first.IDs[0]), adminToken, "")
	var d taskDetail
	wantJSON(t, res, http.StatusOK, &d)
	if d.Key == nil || *d.Key != "ext-1" || d.DueAt == nil || *d.DueAt != "2030-01-02T02:04:05.006Z" ||
		d.RunAfter != "2020-01-01T00:00:00.000Z" || d.Task.Title != "a" {
		t.Fatalf("keyed task = %s", res.body)
	}
}

// TestAddTasksRefusesBadKeysAndTimes: 422, naming the task, and nothing changes.
func TestAddTasksRefusesBadKeysAndTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.add(t, newTask{Category: "news", Title: "there", Key: "taken"})
	before := b.snapshot(t)
	for _, c := range []struct{ name, body, inMessage string }{
		{"empty key", `[{"category":"news","title":"t"},{"category":"news","title":"t","key":""}]`, "task 1: key"},
		{"long key", `[{"category":"news","title":"t","key":"` + strings.Repeat("k", tasks.MaxKeyLen+1) + `"}]`, "key must be 1..255"},
		{"padded key", `[{"category":"news","title":"t","key":"taken "}]`, "spaces"},
		{"bad run_after", `[{"category":"news","title":"t","run_after":"tomorrow"}]`, "task 0: run_after must be an RFC 3339 time"},
		{"bad due_at", `[{"category":"news","title":"t","due_at":"2026-13-01T00:00:00Z"}]`, "task 0: due_at must be an RFC 3339 time"},
		{"due_at out of range", `[{"category":"news","title":"t","due_at":"0999-01-01T00:00:00Z"}]`, "due_at must be from"},
		{"new key with a bad task", `[{"category":"news","title":"t","key":"new"},{"category":"news","title":""}]`, "task 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := wantError(t, b.do(t, "POST", "/v1/tasks", adminToken, c.body), http.StatusUnprocessableEntity, "invalid")
			if !strings.Contains(msg, c.inMessage) {
				t.Errorf("message %q does not mention %q", msg, c.inMessage)
			}
		})
	}
	for _, c := range []struct{ name, body string }{
		{"key not a string", `[{"category":"news","title":"t","key":7}]`},
		{"due_at not a string", `[{"category":"news","title":"t","due_at":1700000000}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, b.do(t, "POST", "/v1/tasks", adminToken, c.body), http.StatusBadRequest, "bad_request")
		})
	}
	b.unchanged(t, before)
}

// TestAddTasksConcurrentKeys posts overlapping keys from several clients at once:
// one task per key, one "created" per key, and every answer a success.
func TestAddTasksConcurrentKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const clients, keys = 4, 30
	answers := make([]addResponse, clients)
	var wg sync.WaitGroup
	for c := range clients {
		ts := make([]newTask, keys)
		for i := range ts {
			k := i
			if c%2 == 1 {
				k = keys - 1 - i // the other order
			}
			ts[i] = newTask{Category: "news", Title: "t", Key: fmt.Sprintf("k%d", k)}
		}
		body := mustJSON(t, ts)
		wg.Go(func() {
			res := b.do(t, "POST", "/v1/tasks", adminToken, body)
			if res.status != http.StatusCreated && res.status != http.StatusOK {
				t.Errorf("client %d: %d %s", c, res.status, res.body)
				return
			}
			strictDecode(t, res.body, &answers[c])
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	created := map[int64]int{}
	ids := map[int64]bool{}
	for c, a := range answers {
		for i, in := range a.Tasks {
			if c%2 == 0 && in.ID != answers[0].Tasks[i].ID {
				t.Errorf("client %d, key %d: id %d, client 0 got %d", c, i, in.ID, answers[0].Tasks[i].ID)
			}
			ids[in.ID] = true
			if in.Created {
				created[in.ID]++
			}
		}
	}
	if len(ids) != keys || len(created) != keys {
		t.Errorf("%d ids, %d created, want %d each", len(ids), len(created), keys)
	}
	for id, n := range created {
		if n != 1 {
			t.Errorf("task %d reported created %d times", id, n)
		}
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != keys {
		t.Errorf("%d tasks, want %d", n, keys)
	}
}

// TestHandOutOrderWithDueAt hands out tasks of mixed priority and deadlines one
// by one: by priority, then the tasks with a due_at, earliest first, then those
// without, oldest first.
func TestHandOutOrderWithDueAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	ids := b.add(t,
		newTask{Category: "news", Priority: 1, Title: "p1 none (older)"},
		newTask{Category: "news", Priority: 1, Title: "p1 due March", DueAt: "2030-03-01T00:00:00Z"},
		newTask{Category: "news", Priority: 1, Title: "p1 due January", DueAt: "2030-01-01T00:00:00Z"},
		newTask{Category: "news", Priority: 2, Title: "p2 none"},
		newTask{Category: "news", Priority: 1, Title: "p1 none (newer)"},
		newTask{Category: "news", Priority: 2, Title: "p2 due", DueAt: "2031-01-01T00:00:00Z"},
		newTask{Category: "news", Priority: 0, Title: "p0 due early", DueAt: "2020-01-01T00:00:00Z"},
		newTask{Category: "news", Priority: 1, Title: "p1 due January, later id", DueAt: "2030-01-01T00:00:00Z"},
	)
	want := []int64{ids[5], ids[3], ids[2], ids[7], ids[1], ids[0], ids[4], ids[6]}
	var got []int64
	for range want {
		a := b.next(t, e.Token)
		got = append(got, a.Task.ID)
		wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), e.Token,
			fmt.Sprintf(`{"fence":%d,"result":{}}`, a.Fence)), http.StatusOK, nil)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("handed out %v, want %v", got, want)
	}
}

// TestRunAfterIsHonoured: a task whose run_after is in the future (by the
// database clock) is not handed out before it, and is once it passes.
func TestRunAfterIsHonoured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	var now time.Time
	if err := b.db.Get(&now, `SELECT NOW(3)`); err != nil {
		t.Fatal(err)
	}
	runAfter := now.Add(3 * time.Second)
	later := b.add(t, newTask{Category: "news", Priority: 9, Title: "later", RunAfter: runAfter.Format(time.RFC3339Nano)})[0]
	now1 := b.add(t, newTask{Category: "news", Title: "now"})[0]

	// The high-priority task is not offered yet: the other one is.
	if a := b.next(t, e.Token); a.Task.ID != now1 {
		t.Fatalf("handed out task %d first, want %d (run_after of %d is in the future)", a.Task.ID, now1, later)
	} else {
		wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), e.Token,
			fmt.Sprintf(`{"fence":%d,"result":{}}`, a.Fence)), http.StatusOK, nil)
	}
	var handed assignment
	testenv.Eventually(t, 10*time.Second, "the task handed out once its run_after passed", func() bool {
		res := b.do(t, "POST", "/v1/assignments/next", e.Token, `{"wait_ms":0}`)
		if res.status == http.StatusNoContent {
			return false
		}
		wantJSON(t, res, http.StatusOK, &handed)
		return true
	})
	if handed.Task.ID != later {
		t.Fatalf("handed out %d, want %d", handed.Task.ID, later)
	}
	if at := parseTime(t, handed.AssignedAt); at.Before(runAfter.Truncate(time.Millisecond)) {
		t.Errorf("assigned at %v, before its run_after %v", at, runAfter)
	}
}

// event is an event of a task's history as the API answers it.
type event struct {
	ID       int64   `json:"id"`
	Kind     string  `json:"kind"`
	Fence    int64   `json:"fence"`
	Holder   *string `json:"holder"`
	EditorID *int64  `json:"editor_id"`
	Detail   *string `json:"detail"`
	At       string  `json:"at"`
	TraceID  *string `json:"trace_id"`
}

// eventPage is the answer of GET /v1/tasks/{id}/events.
type eventPage struct {
	Events []event `json:"events"`
	More   bool    `json:"more"`
	Before *int64  `json:"before"`
}

// TestTaskHistoryPages: GET /v1/tasks/{id} carries the latest 50 events and a
// cursor; GET /v1/tasks/{id}/events pages back from it through every older
// event exactly once. Bad parameters are 400 or 422, an unknown task 404.
func TestTaskHistoryPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.addN(t, "news", 1)[0]
	quiet := b.addN(t, "news", 1)[0]
	if _, err := b.db.Exec(`INSERT INTO task_events (task_id, kind, fence, holder, detail)
SELECT ?, 'released', seq, 'w', CONCAT('e', seq) FROM seq_1_to_130`, id); err != nil {
		t.Fatal(err)
	}

	var d taskDetail
	wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, ""), http.StatusOK, &d)
	if len(d.History) != 50 || !d.HistoryMore || d.HistoryBefore == nil {
		t.Fatalf("detail: %d events, more %v, before %v; want the latest 50 and a cursor", len(d.History), d.HistoryMore, d.HistoryBefore)
	}
	first := eventPage{Events: d.History}
	if first.Events[0].Fence != 81 || first.Events[49].Fence != 130 || first.Events[0].ID != *d.HistoryBefore {
		t.Fatalf("detail's events: fences %d..%d, oldest id %d, cursor %d", first.Events[0].Fence, first.Events[49].Fence, first.Events[0].ID, *d.HistoryBefore)
	}
	seen := map[int64]bool{}
	for _, ev := range first.Events {
		seen[ev.Fence] = true
	}
	before, pages := *d.HistoryBefore, 0
	for {
		var p eventPage
		wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d/events?before=%d&limit=30", id, before), adminToken, ""), http.StatusOK, &p)
		pages++
		for _, ev := range p.Events {
			if seen[ev.Fence] {
				t.Fatalf("event %d read twice", ev.Fence)
			}
			seen[ev.Fence] = true
		}
		if !p.More {
			if p.Before != nil {
				t.Fatalf("last page with a cursor %d", *p.Before)
			}
			break
		}
		before = *p.Before
	}
	if pages != 3 || len(seen) != 130 {
		t.Fatalf("%d pages, %d distinct events; want 3 pages and 130", pages, len(seen))
	}

	var p eventPage
	wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d/events", quiet), adminToken, ""), http.StatusOK, &p)
	if len(p.Events) != 0 || p.More || p.Before != nil {
		t.Errorf("a task without events: %+v", p)
	}
	path := fmt.Sprintf("/v1/tasks/%d/events", id)
	for _, c := range []struct {
		query  string
		status int
	}{
		{"?before=0", http.StatusUnprocessableEntity},
		{"?before=-3", http.StatusUnprocessableEntity},
		{"?limit=0", http.StatusUnprocessableEntity},
		{"?limit=501", http.StatusUnprocessableEntity},
		{"?limit=x", http.StatusUnprocessableEntity},
		{"?cursor=1", http.StatusBadRequest},
		{"?limit=1&limit=2", http.StatusBadRequest},
	} {
		res := b.do(t, "GET", path+c.query, adminToken, "")
		if res.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.query, res.status, res.body, c.status)
		}
	}
	wantError(t, b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d/events", quiet+100), adminToken, ""), http.StatusNotFound, "not_found")
	wantStatus(t, b.do(t, "GET", path, "", ""), http.StatusUnauthorized)
}

// TestTaskDetailIsBounded: a task with 3,001 events whose details are 1,024
// control characters each (as written before reasons refused them, 6 bytes
// each in JSON) answers GET /v1/tasks/{id} with its latest 50 events, not
// megabytes.
func TestTaskDetailIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.addN(t, "news", 1)[0]
	if _, err := b.db.Exec(`INSERT INTO task_events (task_id, kind, fence, holder, detail)
SELECT ?, 'released', seq, 'editor:1', REPEAT(CHAR(1), 1024) FROM seq_1_to_3001`, id); err != nil {
		t.Fatal(err)
	}
	res := b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, "")
	var d taskDetail
	wantJSON(t, res, http.StatusOK, &d)
	t.Logf("GET /v1/tasks/%d of a task with 3,001 events: %d bytes, %d events", id, len(res.body), len(d.History))
	if len(d.History) != 50 || !d.HistoryMore || len(res.body) > 400_000 {
		t.Fatalf("%d events, more %v, %d bytes; want the latest 50 in at most 400 kB", len(d.History), d.HistoryMore, len(res.body))
	}
}

// TestAddTasksKeyHold: a key held only while live is free once its task is
// cancelled, and the list by key then names both tasks, newest first.
func TestAddTasksKeyHold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `[{"category":"news","title":"t","key":"daily","key_hold":"live"}]`
	var first addResponse
	wantJSON(t, b.do(t, "POST", "/v1/tasks", adminToken, body), http.StatusCreated, &first)
	var dup addResponse
	wantJSON(t, b.do(t, "POST", "/v1/tasks", adminToken, body), http.StatusOK, &dup)
	if dup.IDs[0] != first.IDs[0] {
		t.Fatalf("a live key made task %d besides %d", dup.IDs[0], first.IDs[0])
	}
	res := b.do(t, "POST", fmt.Sprintf("/v1/admin/tasks/%d/cancel", first.IDs[0]), adminToken, `{}`)
	if res.status != http.StatusNoContent {
		t.Fatalf("cancel: %d %s", res.status, res.body)
	}
	var again addResponse
	wantJSON(t, b.do(t, "POST", "/v1/tasks", adminToken, body), http.StatusCreated, &again)
	if again.IDs[0] == first.IDs[0] {
		t.Fatal("the key of a cancelled task held only while live was not free")
	}
	if got := b.listAll(t, url.Values{"key": {"daily"}}); len(got) != 2 || got[0] != again.IDs[0] || got[1] != first.IDs[0] {
		t.Errorf("list by key = %v, want [%d %d]", got, again.IDs[0], first.IDs[0])
	}
}

// TestAddTasksRefusesBadKeyHolds: 422 naming the task, or 400 for a key_hold
// that is not a string, and nothing inserted.
func TestAddTasksRefusesBadKeyHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.snapshot(t)
	for _, c := range []struct{ name, hold, inMessage string }{
		{"empty", `"key":"k","key_hold":""`, "task 1: invalid input: key_hold must not be empty"},
		{"unknown", `"key":"k","key_hold":"always"`, "task 1: invalid input: key_hold must be"},
		{"not whole seconds", `"key":"k","key_hold":"1500ms"`, "key_hold must be"},
		{"zero", `"key":"k","key_hold":"0s"`, "key_hold must be"},
		{"too long", `"key":"k","key_hold":"87601h"`, "key_hold must be"},
		{"without a key", `"key_hold":"live"`, "task 1: invalid input: key_hold needs a key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `[{"category":"news","title":"ok","key":"fine","key_hold":"24h"},{"category":"news","title":"t",` + c.hold + `}]`
			msg := wantError(t, b.do(t, "POST", "/v1/tasks", adminToken, body), http.StatusUnprocessableEntity, "invalid")
			if !strings.Contains(msg, c.inMessage) {
				t.Errorf("message %q does not mention %q", msg, c.inMessage)
			}
		})
	}
	wantError(t, b.do(t, "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"t","key":"k","key_hold":86400}]`),
		http.StatusBadRequest, "bad_request")
	b.unchanged(t, before)
}
