package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

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
