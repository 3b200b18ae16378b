package taskd_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// TestCompleteTxHandlers: a typed and an untyped handler commit a row of
// their own with their task's outcome (taskd.CompleteTx); each task is done
// with the result given to CompleteTx, its row written once under the fence
// that completed it; outside a handler, CompleteTx refuses.
func TestCompleteTxHandlers(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "CREATE TABLE effects (task_id BIGINT NOT NULL, fence BIGINT NOT NULL, kind VARCHAR(16) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	// effect writes the handler's row and the outcome in one transaction.
	effect := func(ctx context.Context, task *tasks.Task, kind string) (any, error) {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects VALUES (?, ?, ?)", task.ID, task.Fence, kind); err != nil {
			return nil, err
		}
		if err := taskd.CompleteTx(ctx, tx, task, map[string]string{"kind": kind}); err != nil {
			return nil, err
		}
		return nil, tx.Commit()
	}
	e := newEngine(t, taskd.Config{}, taskd.WithDB(db),
		taskd.WithJobHandler(func(ctx context.Context, job *taskd.Job[resize]) (any, error) {
			return effect(ctx, job.Task, "typed")
		}),
		taskd.WithHandler("raw", taskd.HandlerFunc(func(ctx context.Context, task *tasks.Task) (any, error) {
			return effect(ctx, task, "untyped")
		})))
	typed, err := e.Insert(ctx, resize{Image: "a.png", Width: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := e.InsertTasks(ctx, []tasks.NewTask{{Category: "raw", Title: "raw"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for id, kind := range map[int64]string{typed: "typed", ins[0].ID: "untyped"} {
		task := ended(t, e, id)
		var rows []string
		if err := db.SelectContext(ctx, &rows, "SELECT CONCAT(kind, '@', fence) FROM effects WHERE task_id = ?", id); err != nil {
			t.Fatal(err)
		}
		var result string
		if err := db.GetContext(ctx, &result, "SELECT JSON_VALUE(result, '$.kind') FROM task_results WHERE task_id = ? AND fence = ?", id, task.Fence); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%s@%d", kind, task.Fence); task.Status != tasks.StatusDone || len(rows) != 1 || rows[0] != want || result != kind {
			t.Errorf("%s task: %s, effects %v, result %q; want done, effects [%s], result %q", kind, task.Status, rows, result, want, kind)
		}
	}

	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := taskd.CompleteTx(ctx, tx, &tasks.Task{ID: typed}, nil); !errors.Is(err, taskd.ErrInvalid) {
		t.Fatalf("CompleteTx outside a handler: %v, want ErrInvalid", err)
	}
}

// TestSubmitFencedWrites: a service behind the editor API keys its own writes
// by the fence it holds (docs/api.md, Your own writes with a submit): the
// writes of a claim whose submit was refused, as stale, never join an
// accepted result; those of the accepted submit join exactly one.
func TestSubmitFencedWrites(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "CREATE TABLE service_writes (task_id BIGINT UNSIGNED NOT NULL, fence BIGINT UNSIGNED NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, taskd.Config{AdminToken: testAdminToken}, taskd.WithDB(db))
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.HTTPHandler())
	defer srv.Close()
	var editor struct{ Token string }
	if code := post(srv.URL+"/v1/editors", testAdminToken, `{"name": "svc", "categories": ["news"]}`, &editor); code != http.StatusCreated {
		t.Fatalf("create editor: %d", code)
	}
	var added struct{ IDs []int64 }
	if code := post(srv.URL+"/v1/tasks", testAdminToken, `[{"category": "news", "title": "a"}]`, &added); code != http.StatusCreated {
		t.Fatalf("add task: %d", code)
	}
	id := added.IDs[0]
	// claim takes the task and writes the service's row, committed, keyed
	// by the fence it holds; submit hands its result in.
	claim := func() int64 {
		var next struct{ Fence int64 }
		if code := post(srv.URL+"/v1/assignments/next", editor.Token, `{}`, &next); code != http.StatusOK {
			t.Fatalf("next: %d", code)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO service_writes VALUES (?, ?)", id, next.Fence); err != nil {
			t.Fatal(err)
		}
		return next.Fence
	}
	submit := func(fence int64) int {
		return post(srv.URL+"/v1/assignments/"+strconv.FormatInt(id, 10)+"/submit", editor.Token,
			fmt.Sprintf(`{"fence": %d, "result": {}}`, fence), nil)
	}
	// The first claim is lost before its submit: an operator takes it back.
	lost := claim()
	if code := post(srv.URL+"/v1/admin/tasks/"+strconv.FormatInt(id, 10)+"/release", testAdminToken, `{}`, nil); code != http.StatusNoContent {
		t.Fatalf("force release: %d", code)
	}
	if code := submit(lost); code != http.StatusConflict {
		t.Fatalf("submit of the lost claim: %d, want 409", code)
	}
	accepted := claim()
	if code := submit(accepted); code != http.StatusOK {
		t.Fatalf("submit of the current claim: %d", code)
	}
	var joined []int64
	if err := db.SelectContext(ctx, &joined, `SELECT w.fence FROM service_writes w
		JOIN task_results r ON r.task_id = w.task_id AND r.fence = w.fence WHERE w.task_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if len(joined) != 1 || joined[0] != accepted || accepted == lost {
		t.Fatalf("writes joined to accepted results: fences %v, want only %d (not the lost claim's %d)", joined, accepted, lost)
	}
}
