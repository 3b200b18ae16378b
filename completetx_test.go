package taskd_test

import (
	"context"
	"errors"
	"fmt"
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
