package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// killedStore is the store of a worker process that was killed after its
// claims: nothing it would write about them (a renewal, an outcome, a give
// back at shutdown) reaches the database, so its claims can only expire.
type killedStore struct{ *store.Store }

func (killedStore) HeartbeatBatch(context.Context, []tasks.HeartbeatParams) ([]tasks.Renewed, error) {
	return nil, fmt.Errorf("heartbeat batch: %w", syscall.ECONNREFUSED)
}

func (killedStore) Complete(context.Context, []tasks.Outcome) ([]tasks.Completed, error) {
	return nil, fmt.Errorf("complete: %w", syscall.ECONNREFUSED)
}

func (killedStore) Release(context.Context, tasks.ReleaseParams) (*tasks.Ended, error) {
	return nil, fmt.Errorf("release: %w", syscall.ECONNREFUSED)
}

// TestWorkerFencesAccountedUnderFaults runs worker processes whose handlers
// snooze, fail, retry until dead, are stopped with runs in flight (released), and a
// process killed with claims in flight (expired: recycled, or taken over by
// another process's claim), with the sweeper's recycling beside them; then,
// from the database, every fence from 1 to each task's last is accounted for
// by exactly one record: its 'claimed' event or the result row that stands
// for it, the first-claim successes left no event, and every claim counted
// as an attempt but those a snooze ended.
func TestWorkerFencesAccountedUnderFaults(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	const n = 120
	nts := make([]tasks.NewTask, n)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "jobs", Title: fmt.Sprint(i), MaxAttempts: 3}
	}
	ins, err := b.D.AddTasks(context.Background(), nts)
	if err != nil {
		t.Fatal(err)
	}
	first := ins[0].ID
	lease := 400 * time.Millisecond
	newDispatcher := func(s dispatcher.Store) *dispatcher.Dispatcher {
		d, err := dispatcher.New(s, b.Locks, dispatcher.Config{Lease: lease, PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix, Batch: 8})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	noBackoff := func(int) time.Duration { return 10 * time.Millisecond }

	// The killed process: its runs never end on their own, and it loses
	// every lease.
	killedStarted := make(chan struct{}, n)
	killed := worker.NewMux()
	killed.HandleFunc("jobs", func(ctx context.Context, _ *tasks.Task) (any, error) {
		trySend(killedStarted, struct{}{})
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	zombie := startWorkerOn(t, newDispatcher(killedStore{b.Store}), worker.Config{
		Handler: killed, Concurrency: 6, ID: "killed", ShutdownTimeout: 100 * time.Millisecond,
	})

	// The others: some tasks snooze twice first, some fail their first
	// attempt, some fail every attempt (dead), some first runs on "stopped"
	// are in flight when it stops (released), the rest succeed.
	handler := func(stopping <-chan struct{}, blocked chan struct{}) worker.Handler {
		mux := worker.NewMux()
		mux.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
			k := task.ID - first
			switch {
			case k%5 == 2 && task.Snoozes < 2:
				return nil, worker.Snooze(10 * time.Millisecond)
			case k%11 == 0:
				return nil, errors.New("always fails")
			case k%4 == 0 && task.Attempts == 1:
				return nil, errors.New("fails once")
			case stopping != nil && k%6 == 1 && task.Attempts == 1:
				trySend(blocked, struct{}{})
				<-ctx.Done()
				return nil, context.Cause(ctx)
			}
			return map[string]int64{"fence": task.Fence}, nil
		})
		return mux
	}
	blocked := make(chan struct{}, n)
	stopping := make(chan struct{})
	stopped := startWorkerOn(t, newDispatcher(b.Store), worker.Config{
		Handler: handler(stopping, blocked), Concurrency: 6, ID: "stopped", RetryBackoff: noBackoff,
		ShutdownTimeout: 100 * time.Millisecond,
	})
	steady := startWorkerOn(t, newDispatcher(b.Store), worker.Config{
		Handler: handler(nil, nil), Concurrency: 6, ID: "steady", RetryBackoff: noBackoff,
	})

	// The sweeper's recycling of expired claims.
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	var sweeps sync.WaitGroup
	sweeps.Go(func() {
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sweepCtx.Done():
				return
			case <-tick.C:
				_, _ = b.Store.RecycleExpired(sweepCtx, tasks.RecycleParams{})
			}
		}
	})
	defer func() {
		stopSweep()
		sweeps.Wait()
	}()

	awaitValue(t, killedStarted, "a run on the killed process")
	awaitValue(t, blocked, "a run in flight on the process to stop")
	shutdownWorker(t, zombie)
	close(stopping)
	shutdownWorker(t, stopped)

	testenv.Eventually(t, 90*time.Second, "every task done or dead", func() bool {
		return b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE status NOT IN ('done', 'dead')") == 0
	})
	shutdownWorker(t, steady)
	stopSweep()
	sweeps.Wait()

	checked, bad := b.FenceAccounting(t)
	if len(bad) > 0 {
		t.Fatalf("%d of %d fences not accounted for by exactly one record, first %v", len(bad), checked, bad[:min(len(bad), 10)])
	}
	// The faults happened, each leaving its events.
	for _, c := range []struct {
		what  string
		query string
	}{
		{"snoozes", "SELECT COUNT(*) FROM task_events WHERE kind = 'snoozed'"},
		{"failed attempts", "SELECT COUNT(*) FROM task_events WHERE kind = 'failed'"},
		{"dead tasks", "SELECT COUNT(*) FROM task_events WHERE kind = 'dead'"},
		{"runs released at a shutdown", "SELECT COUNT(*) FROM task_events WHERE kind = 'released' AND detail = 'shutdown'"},
		{"claims of the killed process expired", "SELECT COUNT(*) FROM task_events WHERE kind IN ('recycled', 'expired') AND holder LIKE 'worker:killed:%'"},
		{"first-claim successes recorded by their results", "SELECT COUNT(*) FROM task_results WHERE claimed_at IS NOT NULL"},
	} {
		if got := b.RowCount(t, c.query); got == 0 {
			t.Errorf("no %s", c.what)
		}
	}
	// Every claim counted as an attempt but those a snooze ended: nothing here
	// revokes a claim or requeues a task.
	if got := b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE attempts + snoozes <> fence"); got != 0 {
		t.Errorf("%d tasks whose attempts and snoozes do not add up to their claims", got)
	}
	// A first-claim success left no event.
	if got := b.RowCount(t, `SELECT COUNT(*) FROM tasks t WHERE t.fence = 1 AND t.status = 'done'
		AND EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = t.id)`); got != 0 {
		t.Errorf("%d tasks done on their first claim have events", got)
	}
	t.Logf("%d fences of %d tasks accounted for", checked, n)
}
