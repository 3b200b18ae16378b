package api

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/taskd/taskd/tasks"
)

// listTaskJSON is a task in the list: its state, without payload, result or
// history (GET /v1/tasks/{id} has them).
type listTaskJSON struct {
	ID       int64   `json:"id"`
	Category string  `json:"category"`
	Priority int     `json:"priority"`
	Title    string  `json:"title"`
	Key      *string `json:"key"`
	taskStateJSON
}

type listTasksResponse struct {
	Tasks []listTaskJSON `json:"tasks"`
	// NextCursor continues the list (?cursor=); null after the last page.
	NextCursor *string `json:"next_cursor"`
}

// listParams are the query parameters of GET /v1/tasks.
var listParams = map[string]bool{
	"status": true, "category": true, "holder": true, "editor_id": true, "key": true,
	"created_after": true, "created_before": true, "done_after": true, "done_before": true,
	"order": true, "cursor": true, "limit": true,
}

// listTasks answers with a page of tasks that pass the query's filters.
func (a *api) listTasks(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for name, vals := range q {
		if !listParams[name] {
			return errorf(http.StatusBadRequest, codeBadRequest, "unknown query parameter %q", name)
		}
		if len(vals) > 1 {
			return errorf(http.StatusBadRequest, codeBadRequest, "query parameter %q is given %d times", name, len(vals))
		}
	}
	p := tasks.ListParams{
		Status:   tasks.Status(q.Get("status")),
		Category: q.Get("category"),
		Holder:   q.Get("holder"),
		Key:      q.Get("key"),
		Cursor:   q.Get("cursor"),
	}
	for name, dst := range map[string]*time.Time{
		"created_after": &p.CreatedAfter, "created_before": &p.CreatedBefore,
		"done_after": &p.DoneAfter, "done_before": &p.DoneBefore,
	} {
		if s := q.Get(name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return errorf(http.StatusUnprocessableEntity, codeInvalid,
					"%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not %q", name, s)
			}
			*dst = t
		}
	}
	var err error
	if p.EditorID, err = positiveParam(q.Get("editor_id"), "editor_id", math.MaxInt64); err != nil {
		return err
	}
	limit, err := positiveParam(q.Get("limit"), "limit", tasks.ListLimitMax)
	if err != nil {
		return err
	}
	p.Limit = int(limit)
	switch o := q.Get("order"); o {
	case "", "newest":
	case "oldest":
		p.Oldest = true
	default:
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "order must be newest or oldest, not %q", o)
	}
	for name, v := range map[string]string{"status": string(p.Status), "category": p.Category, "holder": p.Holder, "key": p.Key, "cursor": p.Cursor} {
		if _, given := q[name]; given && v == "" {
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "%s must not be empty (leave it out for any)", name)
		}
	}
	page, err := a.store.ListTasks(r.Context(), p)
	if err != nil {
		return err
	}
	out := listTasksResponse{Tasks: make([]listTaskJSON, len(page.Tasks)), NextCursor: orNull(page.NextCursor)}
	for i := range page.Tasks {
		t := &page.Tasks[i]
		out.Tasks[i] = listTaskJSON{
			ID: t.ID, Category: t.Category, Priority: t.Priority, Title: t.Title, Key: orNull(t.Key),
			taskStateJSON: taskStateOf(t),
		}
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// positiveParam parses the query parameter name, s, as an integer 1..max; ""
// is 0 (not given).
func positiveParam(s, name string, max int64) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > max || s[0] == '+' {
		return 0, errorf(http.StatusUnprocessableEntity, codeInvalid, "%s must be an integer 1..%d, not %q", name, max, s)
	}
	return n, nil
}
