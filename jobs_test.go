package taskd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// resize is a typed task's args.
type resize struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

func (resize) Category() string { return "resize" }

// badArgs cannot be encoded as JSON.
type badArgs struct{ C chan int }

func (badArgs) Category() string { return "resize" }

// listArgs encodes as a JSON array, which is not a task payload.
type listArgs []int

func (listArgs) Category() string { return "resize" }

// ended waits until task id has ended and returns it.
func ended(t *testing.T, e *taskd.Engine, id int64) *tasks.Task {
	t.Helper()
	var task *tasks.Task
	testenv.Eventually(t, 20*time.Second, "task ends", func() bool {
		var err error
		if task, err = e.Task(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return task.Status == tasks.StatusDone || task.Status == tasks.StatusDead
	})
	return task
}

// TestJobHandler: a typed handler gets the payload decoded into its args,
// and its result is committed; a payload that does not decode makes the task
// dead at once without calling the handler.
func TestJobHandler(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	got := make(chan resize, 4)
	e := newEngine(t, taskd.Config{}, taskd.WithJobHandler(func(ctx context.Context, job *taskd.Job[resize]) (any, error) {
		calls.Add(1)
		got <- job.Args
		return map[string]any{"done": job.Args.Image, "task": job.ID}, nil
	}))
	ctx := t.Context()
	id, err := e.Insert(ctx, resize{Image: "cat.png", Width: 640}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if task := ended(t, e, id); task.Status != tasks.StatusDone || task.Title != "resize" || task.Category != "resize" {
		t.Fatalf("task %d: status %s, title %q, category %q; want done, with the category as title", id, task.Status, task.Title, task.Category)
	}
	if a := <-got; a != (resize{Image: "cat.png", Width: 640}) {
		t.Errorf("handler got %+v", a)
	}
	res, err := e.AcceptedResult(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Done string
		Task int64
	}
	if err := json.Unmarshal(res.Result, &out); err != nil || out.Done != "cat.png" || out.Task != id {
		t.Errorf("result %s (%v), want the handler's", res.Result, err)
	}

	// A payload written by someone else that is no resize.
	ids, err := e.InsertTasks(ctx, []tasks.NewTask{{Category: "resize", Title: "bad", Payload: json.RawMessage(`{"width": "wide"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	task := ended(t, e, ids[0].ID)
	if task.Status != tasks.StatusDead || task.Attempts != 1 {
		t.Errorf("task with a bad payload: status %s after %d attempts, want dead after 1", task.Status, task.Attempts)
	}
	if !strings.Contains(task.LastError, "decode the payload") || !strings.Contains(task.LastError, "taskd_test.resize") {
		t.Errorf("last error %q, want the decode error naming the type", task.LastError)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("handler called %d times, want once (not for the bad payload)", n)
	}
}

// TestJobHandlerSnoozes: a typed handler's snooze, wrapped in an error of its
// own, runs the task again without spending an attempt, a middleware tells it
// apart from a failure, and Config.Worker.MaxSnoozes bounds it: the snooze
// past the limit makes the task dead with the limit's error.
func TestJobHandlerSnoozes(t *testing.T) {
	t.Parallel()
	var calls, snoozes atomic.Int64
	seen := func(next taskd.Handler) taskd.Handler {
		return taskd.HandlerFunc(func(ctx context.Context, task *tasks.Task) (any, error) {
			res, err := next.ProcessTask(ctx, task)
			if sn := (*taskd.SnoozeError)(nil); errors.As(err, &sn) && sn.Duration == -time.Second {
				snoozes.Add(1)
			}
			return res, err
		})
	}
	cfg := taskd.Config{Worker: taskd.WorkerConfig{MaxSnoozes: 2}}
	e := newEngine(t, cfg, taskd.WithMiddleware(seen), taskd.WithJobHandler(func(ctx context.Context, job *taskd.Job[resize]) (any, error) {
		calls.Add(1)
		if job.Attempts != 1 {
			return nil, fmt.Errorf("%w: attempt %d, want every run the first", taskd.SkipRetry, job.Attempts)
		}
		return nil, fmt.Errorf("%s is busy: %w", job.Args.Image, taskd.Snooze(-time.Second)) // at once
	}))
	ctx := t.Context()
	id, err := e.Insert(ctx, resize{Image: "cat.png"}, &taskd.InsertOpts{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	task := ended(t, e, id)
	if want := "snoozed 2 times, the limit"; task.Status != tasks.StatusDead || task.LastError != want || task.Snoozes != 2 || task.Attempts != 0 {
		t.Errorf("task %s, last error %q, %d snoozes, %d attempts; want dead with %q, 2 snoozes, no attempt spent",
			task.Status, task.LastError, task.Snoozes, task.Attempts, want)
	}
	if calls.Load() != 3 || snoozes.Load() != 3 {
		t.Errorf("%d runs, %d snoozes seen by the middleware; want 3 and 3", calls.Load(), snoozes.Load())
	}
}

// TestInsert: typed inserts take their options, keep keys idempotent, and
// refuse bad args with ErrInvalid, adding nothing.
func TestInsert(t *testing.T) {
	t.Parallel()
	e := newEngine(t, taskd.Config{})
	ctx := t.Context()
	due := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	opts := &taskd.InsertOpts{Title: "Resize the cat", Priority: 7, MaxAttempts: 2, Key: "cat-640", DueAt: due}
	id, err := e.Insert(ctx, resize{Image: "cat.png", Width: 640}, opts)
	if err != nil {
		t.Fatal(err)
	}
	task, err := e.Task(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var payload resize
	if err := json.Unmarshal(task.Payload, &payload); err != nil || payload != (resize{Image: "cat.png", Width: 640}) {
		t.Errorf("payload %s (%v)", task.Payload, err)
	}
	if task.Title != opts.Title || task.Priority != 7 || task.MaxAttempts != 2 || task.Key != "cat-640" || task.DueAt == nil || !task.DueAt.Equal(due) {
		t.Errorf("task %+v, want the options' values", task)
	}
	again, err := e.Insert(ctx, resize{Image: "other.png"}, &taskd.InsertOpts{Key: "cat-640"})
	if err != nil || again != id {
		t.Errorf("insert with an existing key: id %d (%v), want %d", again, err, id)
	}

	for _, tc := range []struct {
		name string
		ps   []taskd.InsertParams
		want string
	}{
		{"no args", []taskd.InsertParams{{}}, "no args"},
		{"not JSON", []taskd.InsertParams{{Args: badArgs{C: make(chan int)}}}, "encode taskd_test.badArgs"},
		{"not an object", []taskd.InsertParams{{Args: listArgs{1, 2}}}, "payload"},
		{"title too long", []taskd.InsertParams{{Args: resize{}, Opts: &taskd.InsertOpts{Title: strings.Repeat("t", 513)}}}, "title"},
		{"one bad of two", []taskd.InsertParams{{Args: resize{Image: "ok.png"}}, {Args: resize{}, Opts: &taskd.InsertOpts{MaxAttempts: 101}}}, "task 2 of 2"},
	} {
		ids, err := e.InsertMany(ctx, tc.ps)
		if !errors.Is(err, tasks.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || ids != nil {
			t.Errorf("%s: ids %v, error %v; want ErrInvalid mentioning %q", tc.name, ids, err, tc.want)
		}
	}
	st, err := e.PoolStats(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.ByStatus[tasks.StatusPending]; n != 1 {
		t.Errorf("%d tasks pending after the refused inserts, want the first one only", n)
	}
}
