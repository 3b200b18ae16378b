package taskd_test

import (
	"context"
	"sync"
	"testing"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
)

// TestWithMiddleware: middleware wraps every handler, the first added
// outermost, with the root package's handler types alone.
func TestWithMiddleware(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	wrap := func(name string) taskd.MiddlewareFunc {
		return func(next taskd.Handler) taskd.Handler {
			return taskd.HandlerFunc(func(ctx context.Context, task *tasks.Task) (any, error) {
				note(name + " in")
				res, err := next.ProcessTask(ctx, task)
				note(name + " out")
				return res, err
			})
		}
	}
	e := newEngine(t, taskd.Config{},
		taskd.WithHandler("mw", taskd.HandlerFunc(func(context.Context, *tasks.Task) (any, error) {
			note("handler")
			return nil, nil
		})),
		taskd.WithMiddleware(wrap("outer")),
		taskd.WithMiddleware(wrap("inner")),
	)
	ctx := t.Context()
	ids, err := e.InsertTasks(ctx, []tasks.NewTask{{Category: "mw", Title: "wrapped"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if task := ended(t, e, ids[0].ID); task.Status != tasks.StatusDone {
		t.Fatalf("task %s, want done", task.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"outer in", "inner in", "handler", "inner out", "outer out"}
	if len(order) != len(want) {
		t.Fatalf("calls %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("calls %v, want %v", order, want)
		}
	}
}
