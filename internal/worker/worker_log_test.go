package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// TestWorkerLogsWhyATaskIsDead checks the warning of a task that failed for
// good: a SkipRetry failure says so, not that no attempts were left.
func TestWorkerLogsWhyATaskIsDead(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	ids, err := dispatchtest.IDsOf(b.D.AddTasks(context.Background(), []tasks.NewTask{
		{Category: "jobs", Title: "malformed", MaxAttempts: 5},
		{Category: "jobs", Title: "flaky", MaxAttempts: 1},
	}))
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(_ context.Context, task *tasks.Task) (any, error) {
		if task.Title == "malformed" {
			return nil, fmt.Errorf("payload has no text: %w", worker.SkipRetry)
		}
		return nil, fmt.Errorf("upstream timed out")
	})
	w := startWorker(t, b, worker.Config{Handler: mux, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	testenv.Eventually(t, 30*time.Second, "both tasks failed", func() bool { return w.Totals().Failed == 2 })
	shutdownWorker(t, w)

	lines := map[int64]string{}
	for line := range strings.Lines(logs.String()) {
		for _, id := range ids {
			if strings.Contains(line, `"msg":"task failed`) && strings.Contains(line, fmt.Sprintf(`"task_id":%d,`, id)) {
				lines[id] = line
			}
		}
	}
	if l := lines[ids[0]]; !strings.Contains(l, `"msg":"task failed; not retried: SkipRetry"`) || !strings.Contains(l, `"status":"dead"`) {
		t.Errorf("the SkipRetry failure logged %q, want it named as SkipRetry", l)
	}
	if l := lines[ids[1]]; !strings.Contains(l, `"msg":"task failed; no attempts left"`) {
		t.Errorf("the last attempt's failure logged %q, want no attempts left", l)
	}
}

// TestWorkerLogsWhenARetryRuns: the warning of a failed task says when its
// retry is claimable (retry_at, the run_after the store wrote), and the retry
// runs then, not at the claims' next poll.
func TestWorkerLogsWhenARetryRuns(t *testing.T) {
	t.Parallel()
	// A poll far longer than the backoff: only a wake-up runs the retry in time.
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{PollInterval: 10 * time.Second}})
	ids, err := dispatchtest.IDsOf(b.D.AddTasks(context.Background(), []tasks.NewTask{{Category: "jobs", Title: "flaky", MaxAttempts: 3}}))
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	var mu sync.Mutex
	var runs []time.Time
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(context.Context, *tasks.Task) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, time.Now())
		if len(runs) == 1 {
			return nil, errors.New("upstream timed out")
		}
		return map[string]bool{"ok": true}, nil
	})
	const backoff = 300 * time.Millisecond
	w := startWorker(t, b, worker.Config{
		Handler: mux, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		RetryBackoff: func(int) time.Duration { return backoff },
	})
	testenv.Eventually(t, 30*time.Second, "the retry succeeded", func() bool { return w.Totals().Processed == 1 })
	shutdownWorker(t, w)

	var line struct {
		RetryIn time.Duration `json:"retry_in"`
		RetryAt time.Time     `json:"retry_at"`
	}
	found := false
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `"msg":"task failed; will retry"`) && strings.Contains(l, fmt.Sprintf(`"task_id":%d,`, ids[0])) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("no warning of the failure:\n%s", logs.String())
	}
	var runAfter time.Time
	if err := b.DB.GetContext(context.Background(), &runAfter, `SELECT run_after FROM tasks WHERE id = ?`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if line.RetryIn != backoff || !line.RetryAt.Equal(runAfter) {
		t.Errorf("logged retry_in=%v retry_at=%v, want %v and the task's run_after %v", line.RetryIn, line.RetryAt, backoff, runAfter)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	// The database's clock and the test's are the machine's.
	if late := runs[1].Sub(runAfter); late < -20*time.Millisecond || late > 2*time.Second {
		t.Errorf("the retry ran %v after the logged retry_at, want within 2s of it (the poll interval is 10s)", late)
	}
}
