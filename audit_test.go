package taskd_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// TestWorkerJobHistory: a job that succeeds on its first run writes no event
// row, and GET /v1/tasks/{id} shows its claim and its submit as ever.
func TestWorkerJobHistory(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	e := newEngine(t, taskd.Config{AdminToken: testAdminToken}, taskd.WithDB(db),
		taskd.WithJobHandler(func(_ context.Context, job *taskd.Job[resize]) (any, error) {
			return map[string]int64{"task": job.ID}, nil
		}))
	ctx := t.Context()
	ok, err := e.Insert(ctx, resize{Image: "ok.png", Width: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if task := ended(t, e, ok); task.Status != tasks.StatusDone {
		t.Fatalf("task %d %s, want done", ok, task.Status)
	}
	var rows int
	if err := db.GetContext(ctx, &rows, "SELECT COUNT(*) FROM task_events WHERE task_id = ?", ok); err != nil || rows != 0 {
		t.Fatalf("%d task_events rows (%v) for a job done on its first run, want none", rows, err)
	}
	req := httptest.NewRequest("GET", "/v1/tasks/"+strconv.FormatInt(ok, 10), nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	rec := httptest.NewRecorder()
	e.HTTPHandler().ServeHTTP(rec, req)
	var got struct {
		Holder  string `json:"holder"`
		History []struct {
			ID     int64  `json:"id"`
			Kind   string `json:"kind"`
			Fence  int64  `json:"fence"`
			Holder string `json:"holder"`
			At     string `json:"at"`
		} `json:"history"`
		Result struct {
			SubmittedAt string `json:"submitted_at"`
		} `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("GET task: %d %s (%v)", rec.Code, rec.Body, err)
	}
	h := got.History
	if len(h) != 2 || h[0].Kind != "claimed" || h[1].Kind != "submitted" || h[0].Fence != 1 || h[1].Fence != 1 ||
		h[0].Holder != got.Holder || h[1].Holder != got.Holder || !strings.HasPrefix(got.Holder, "worker:") ||
		h[1].At != got.Result.SubmittedAt || h[0].At > h[1].At || h[0].ID >= h[1].ID {
		t.Fatalf("history %+v of a job done by %s at %s, want its claim and its submit", h, got.Holder, got.Result.SubmittedAt)
	}
}
