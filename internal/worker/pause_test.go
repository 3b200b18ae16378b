package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// TestWorkerLeavesPausedCategoryAlone pauses a category while a worker's handler
// runs one of its tasks: that run completes and is submitted, the worker goes on with
// another category, takes nothing more from the paused one, and after the resume
// runs all of it, each task once.
func TestWorkerLeavesPausedCategoryAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	ctx := context.Background()
	first := b.Add(t, "jobs", 0, 1)[0]

	started, proceed := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	seen := map[string]map[int64]int{"jobs": {}, "other": {}}
	mux := worker.NewMux()
	handle := func(_ context.Context, task *tasks.Task) (any, error) {
		if task.ID == first {
			close(started)
			<-proceed
		}
		mu.Lock()
		seen[task.Category][task.ID]++
		mu.Unlock()
		return nil, nil
	}
	mux.HandleFunc("jobs", handle)
	mux.HandleFunc("other", handle)
	handled := func(cat string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, k := range seen[cat] {
			n += k
		}
		return n
	}
	w := startWorker(t, b, worker.Config{Handler: mux, Concurrency: 2, Wait: 100 * time.Millisecond})
	<-started

	if _, paused, err := b.D.PauseCategory(ctx, "jobs"); err != nil || !paused {
		t.Fatalf("pause = %v, %v", paused, err)
	}
	// The paused tasks rank above every task of the other category: a claim that
	// did not leave them alone would take them first.
	jobs := b.Add(t, "jobs", 9, 20)
	b.Add(t, "other", 0, 5)
	close(proceed)
	// The run that was live when the pause came is submitted; the worker keeps
	// working on the other category.
	testenv.Eventually(t, 30*time.Second, "the other category done", func() bool { return handled("other") == 5 })
	testenv.Eventually(t, 30*time.Second, "the paused category's live run submitted", func() bool {
		return w.Totals().Processed >= 6
	})
	if s := b.Task(t, first).Status; s != tasks.StatusDone {
		t.Fatalf("the run live at the pause left its task %s, want done", s)
	}

	// More of the other category, below the paused tasks: the worker claims and
	// runs them, so its claims passed over the paused ones, and took none of them.
	b.Add(t, "other", 0, 3)
	testenv.Eventually(t, 30*time.Second, "the later tasks of the other category done", func() bool { return handled("other") == 8 })
	if n := handled("jobs"); n != 1 {
		t.Fatalf("the worker ran %d tasks of jobs, want only the one that was live at the pause", n)
	}
	if n := b.RowCount(t, `SELECT COUNT(*) FROM (`+dispatchtest.ClaimsSQL+`) c JOIN tasks t ON t.id = c.task_id
		WHERE t.category = 'jobs'`); n != 1 {
		t.Fatalf("%d claims of jobs in the database, want 1", n)
	}
	testenv.Eventually(t, 30*time.Second, "the later tasks submitted", func() bool { return w.Totals().Processed >= 9 })
	if got := w.Totals().Processed; got != 9 {
		t.Fatalf("the worker processed %d tasks, want 9: the other category's 8 and the run live at the pause", got)
	}

	if _, err := b.D.ResumeCategory(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "jobs done after the resume", func() bool { return handled("jobs") == 21 })
	shutdownWorker(t, w)
	mu.Lock()
	defer mu.Unlock()
	for _, id := range append(jobs, first) {
		if seen["jobs"][id] != 1 {
			t.Errorf("task %d run %d times, want once", id, seen["jobs"][id])
		}
	}
}
