package worker_test

import (
	"context"
	"strconv"
	"strings"
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

// A worker runs a claim loop per two batches of slots, and a completion
// writer more per further loop.
func TestWorkerClaimLoopsAndWritersBySlots(t *testing.T) {
	t.Parallel()
	cases := []struct {
		slots, batch   int
		loops, writers int
	}{
		{0, 0, 1, 2}, // the defaults: 4 slots, batches of 500
		{16, 500, 1, 2},
		{1000, 500, 1, 2},
		{1001, 500, 2, 3},
		{1000, 250, 2, 3},
		{1000, 100, 5, 6},
		{16, 1, 8, 9},
	}
	for _, c := range cases {
		cfg := worker.Config{Concurrency: c.slots, BatchSize: c.batch}
		if got := worker.ClaimLoops(cfg); got != c.loops {
			t.Errorf("%d slots, batches of %d: %d claim loops, want %d", c.slots, c.batch, got, c.loops)
		}
		if got := worker.Writers(cfg); got != c.writers {
			t.Errorf("%d slots, batches of %d: %d writers, want %d", c.slots, c.batch, got, c.writers)
		}
	}
}

// slowClaims is a store whose ClaimBatch takes a while, counting the batches
// in flight at once.
type slowClaims struct {
	*store.Store
	inFlight, most atomic.Int64
}

func (s *slowClaims) ClaimBatch(ctx context.Context, ps []tasks.ClaimParams) ([]tasks.ClaimResult, error) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	return s.Store.ClaimBatch(ctx, ps)
}

func (s *slowClaims) CompleteAndClaim(ctx context.Context, os []tasks.Outcome, ps []tasks.ClaimParams) ([]tasks.Completed, []tasks.ClaimResult, error) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	return s.Store.CompleteAndClaim(ctx, os, ps)
}

// The claim loops of a worker claim at once, and share its slots: no slot
// runs two tasks at a time, no task runs twice, and no more run at once than
// there are slots.
func TestWorkerClaimLoopsShareSlots(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	st := &slowClaims{Store: b.Store}
	d, err := dispatcher.New(st, b.Locks, dispatcher.Config{PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	const n, slots, batch = 300, 24, 4
	cfg := worker.Config{Concurrency: slots, BatchSize: batch}
	if loops := worker.ClaimLoops(cfg); loops < 2 {
		t.Fatalf("%d claim loops for %d slots in batches of %d, want several", loops, slots, batch)
	}
	b.Add(t, "jobs", 0, n)
	var mu sync.Mutex
	busy := make(map[string]bool) // holders running a task
	runs := make(map[int64]int)
	running, most := 0, 0
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(_ context.Context, task *tasks.Task) (any, error) {
		slot, err := strconv.Atoi(task.Holder[strings.LastIndexByte(task.Holder, ':')+1:])
		mu.Lock()
		if err != nil || slot < 0 || slot >= slots {
			t.Errorf("task %d ran in slot %q", task.ID, task.Holder)
		}
		if busy[task.Holder] {
			t.Errorf("task %d ran in slot %s, which was running another", task.ID, task.Holder)
		}
		busy[task.Holder] = true
		runs[task.ID]++
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(time.Duration(task.ID%3) * time.Millisecond)
		mu.Lock()
		busy[task.Holder] = false
		running--
		mu.Unlock()
		return nil, nil
	})
	cfg.Handler = mux
	w := startWorkerOn(t, d, cfg)
	testenv.Eventually(t, time.Minute, "all tasks processed", func() bool { return w.Totals().Processed >= n })
	shutdownWorker(t, w)
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != n {
		t.Errorf("%d tasks ran, want %d", len(runs), n)
	}
	for id, c := range runs {
		if c != 1 {
			t.Errorf("task %d ran %d times, want once", id, c)
		}
	}
	if most > slots {
		t.Errorf("%d tasks ran at once in %d slots", most, slots)
	}
	if m := st.most.Load(); m < 2 {
		t.Errorf("at most %d claim batch in flight at once, want the loops' claims together", m)
	}
}
