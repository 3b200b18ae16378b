package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// listPage is the JSON of GET /v1/tasks.
type listPage struct {
	Tasks      []json.RawMessage `json:"tasks"`
	NextCursor *string           `json:"next_cursor"`
}

// listAll pages through GET /v1/tasks?query and returns the listed ids.
func (b *bundle) listAll(t *testing.T, query url.Values) []int64 {
	t.Helper()
	var ids []int64
	for pages := 0; ; pages++ {
		res := b.do(t, "GET", "/v1/tasks?"+query.Encode(), adminToken, "")
		var page listPage
		wantJSON(t, res, http.StatusOK, &page)
		for _, raw := range page.Tasks {
			wantKeys(t, raw, "id", "category", "priority", "title", "key", "status", "fence", "holder", "editor_id",
				"assigned_at", "lease_expires_at", "attempts", "max_attempts", "run_after", "due_at", "last_error",
				"created_at", "updated_at", "done_at")
			var task struct {
				ID int64 `json:"id"`
			}
			if err := json.Unmarshal(raw, &task); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		if page.NextCursor == nil {
			return ids
		}
		if pages > 100 {
			t.Fatal("no end to the pages")
		}
		query.Set("cursor", *page.NextCursor)
	}
}

func TestListTasksAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	var all []newTask
	for i := range 12 {
		cat := "news"
		if i%3 == 0 {
			cat = "sports"
		}
		all = append(all, newTask{Category: cat, Title: fmt.Sprintf("t%d", i), Key: fmt.Sprintf("k%d", i)})
	}
	ids := b.add(t, all...)
	held := b.next(t, e.Token) // the oldest news task
	rev := func(xs ...int64) []int64 {
		out := make([]int64, len(xs))
		for i, x := range xs {
			out[len(xs)-1-i] = x
		}
		return out
	}
	news := []int64{ids[1], ids[2], ids[4], ids[5], ids[7], ids[8], ids[10], ids[11]}

	for _, c := range []struct {
		query url.Values
		want  []int64
	}{
		{url.Values{"limit": {"5"}}, rev(ids...)},
		{url.Values{"limit": {"5"}, "order": {"oldest"}}, ids},
		{url.Values{"category": {"news"}, "limit": {"3"}}, rev(news...)},
		{url.Values{"category": {"news"}, "status": {"pending"}, "order": {"oldest"}, "limit": {"2"}}, news[1:]},
		{url.Values{"status": {"assigned"}}, []int64{held.Task.ID}},
		{url.Values{"editor_id": {fmt.Sprint(e.ID)}}, []int64{held.Task.ID}},
		{url.Values{"holder": {fmt.Sprintf("editor:%d", e.ID)}}, []int64{held.Task.ID}},
		{url.Values{"key": {"k4"}}, []int64{ids[4]}},
		{url.Values{"created_after": {"2000-01-01T00:00:00Z"}, "created_before": {"2999-01-01T00:00:00+02:00"}, "limit": {"500"}}, rev(ids...)},
		{url.Values{"created_before": {"2000-01-01T00:00:00Z"}}, nil},
		{url.Values{"done_after": {"2000-01-01T00:00:00Z"}}, nil},
	} {
		if got := b.listAll(t, c.query); fmt.Sprint(got) != fmt.Sprint(c.want) && len(got)+len(c.want) > 0 {
			t.Errorf("GET /v1/tasks?%s: %v, want %v", c.query.Encode(), got, c.want)
		}
	}

	// A done task is listed by its done time.
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", held.Task.ID), e.Token,
		fmt.Sprintf(`{"fence":%d,"result":{}}`, held.Fence)), http.StatusOK, nil)
	if got := b.listAll(t, url.Values{"done_after": {"2000-01-01T00:00:00Z"}, "status": {"done"}}); fmt.Sprint(got) != fmt.Sprint([]int64{held.Task.ID}) {
		t.Errorf("done tasks: %v, want [%d]", got, held.Task.ID)
	}

	// The last page's next_cursor is null, and an empty list is [] not null.
	res := b.do(t, "GET", "/v1/tasks?category=nothing", adminToken, "")
	if string(res.body) != `{"tasks":[],"next_cursor":null}`+"\n" {
		t.Errorf("empty list = %s", res.body)
	}
}

func TestListTasksAPIRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	b.addN(t, "news", 3)
	var page listPage
	wantJSON(t, b.do(t, "GET", "/v1/tasks?limit=1", adminToken, ""), http.StatusOK, &page)
	if page.NextCursor == nil {
		t.Fatal("no next cursor on a page of 1 of 3")
	}
	cursor := url.QueryEscape(*page.NextCursor)

	wantError(t, b.do(t, "GET", "/v1/tasks", "", ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "GET", "/v1/tasks", e.Token, ""), http.StatusForbidden, "forbidden")
	for _, c := range []struct{ query, inMessage string }{
		{"status=lost", "status must be one of pending, assigned, done, dead"},
		{"status=", "status must not be empty"},
		{"category=", "category must not be empty"},
		{"category=" + url.QueryEscape(strings.Repeat("c", 65)), "category must be 1..64"},
		{"key=" + url.QueryEscape(strings.Repeat("k", 256)), "key must be 1..255"},
		{"holder=%FF", "holder"},
		{"editor_id=0", "editor_id must be an integer"},
		{"editor_id=x", "editor_id must be an integer"},
		{"created_after=yesterday", "created_after must be an RFC 3339 time"},
		{"done_before=2026-02-30T00:00:00Z", "done_before must be an RFC 3339 time"},
		{"created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z", "created_after must be before created_before"},
		{"limit=0", "limit must be an integer 1..500"},
		{"limit=501", "limit must be an integer 1..500"},
		{"limit=ten", "limit must be an integer 1..500"},
		{"order=random", "order must be newest or oldest"},
		{"cursor=garbage", "cursor is not one this list returned"},
		{"cursor=" + cursor + "&order=oldest", "cursor belongs to a list in another order"},
	} {
		t.Run(c.query, func(t *testing.T) {
			msg := wantError(t, b.do(t, "GET", "/v1/tasks?"+c.query, adminToken, ""), http.StatusUnprocessableEntity, "invalid")
			if !strings.Contains(msg, c.inMessage) {
				t.Errorf("message %q does not mention %q", msg, c.inMessage)
			}
		})
	}
	for _, q := range []string{"colour=red", "limit=1&limit=2"} {
		wantError(t, b.do(t, "GET", "/v1/tasks?"+q, adminToken, ""), http.StatusBadRequest, "bad_request")
	}
}
