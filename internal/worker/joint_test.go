package worker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// jointCounter is a store that counts its joint completions and claims, and
// with fail set refuses each of them.
type jointCounter struct {
	*store.Store
	fail            bool
	calls, outcomes atomic.Int64
}

func (s *jointCounter) CompleteAndClaim(ctx context.Context, os []tasks.Outcome, ps []tasks.ClaimParams) ([]tasks.Completed, []tasks.ClaimResult, error) {
	s.calls.Add(1)
	if s.fail {
		return nil, nil, errors.New("joint batch refused")
	}
	s.outcomes.Add(int64(len(os)))
	return s.Store.CompleteAndClaim(ctx, os, ps)
}

// burnDown runs a worker on st over n tasks until each is done, and checks
// that each ran once, is done, and has its lock given back.
func burnDown(t *testing.T, b *bundle, st dispatcher.Store) {
	t.Helper()
	d, err := dispatcher.New(st, b.Locks, dispatcher.Config{PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	ids := b.Add(t, "jobs", 0, n)
	var mu sync.Mutex
	runs := make(map[int64]int)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(_ context.Context, task *tasks.Task) (any, error) {
		mu.Lock()
		runs[task.ID]++
		mu.Unlock()
		time.Sleep(time.Duration(task.ID%4) * time.Millisecond)
		return map[string]int64{"id": task.ID}, nil
	})
	w := startWorkerOn(t, d, worker.Config{Handler: mux, Concurrency: 8, BatchSize: 4})
	testenv.Eventually(t, time.Minute, "all tasks processed", func() bool { return w.Totals().Processed >= n })
	shutdownWorker(t, w)
	if tot := w.Totals(); tot.Processed != n || tot.Failed != 0 || tot.LeaseLost != 0 {
		t.Errorf("totals %+v, want %d processed and nothing else", tot, n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if runs[id] != 1 {
			t.Errorf("task %d ran %d times, want once", id, runs[id])
		}
		if got := b.Task(t, id); got.Status != tasks.StatusDone {
			t.Errorf("task %d %s, want done", id, got.Status)
		}
		if n := b.RDB.Exists(context.Background(), b.LockKey(id)).Val(); n != 0 {
			t.Errorf("task %d's lock is still there", id)
		}
	}
}

// A claim made while outcomes wait carries them: one transaction completes
// them and makes the claims.
func TestWorkerClaimsCarryOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	st := &jointCounter{Store: b.Store}
	burnDown(t, b, st)
	if st.calls.Load() == 0 || st.outcomes.Load() == 0 {
		t.Fatalf("%d joint transactions carried %d outcomes, want some", st.calls.Load(), st.outcomes.Load())
	}
	t.Logf("%d joint transactions carried %d outcomes", st.calls.Load(), st.outcomes.Load())
}

// When the joint transaction fails, the outcomes are written alone and the
// claims made after: every task is still done once.
func TestWorkerJointFailureWritesAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	st := &jointCounter{Store: b.Store, fail: true}
	burnDown(t, b, st)
	if st.calls.Load() == 0 {
		t.Fatal("no joint transaction was tried")
	}
}
