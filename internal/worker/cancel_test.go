package worker_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// cancelLease is the lease of the cancel tests: the worker renews each claim
// every third to half of it, the latest a renewal learns of a cancel.
const cancelLease = 3 * time.Second

// doneAt is a handler whose run waits for its context and records when it
// ended and with what cause.
type doneAt struct {
	started chan *tasks.Task
	ended   chan cancelSeen
}

type cancelSeen struct {
	at    time.Time
	cause error
}

func newDoneAt() *doneAt {
	return &doneAt{started: make(chan *tasks.Task, 10), ended: make(chan cancelSeen, 10)}
}

// ProcessTask returns a result once its context is cancelled, as a handler
// that finished its work as the cancel came would: the worker must not
// commit it.
func (h *doneAt) ProcessTask(ctx context.Context, task *tasks.Task) (any, error) {
	trySend(h.started, task)
	<-ctx.Done()
	trySend(h.ended, cancelSeen{at: time.Now(), cause: context.Cause(ctx)})
	return map[string]string{"late": "result"}, nil
}

// TestWorkerCancelStopsTheHandler cancels a running task through a
// dispatcher of another process and checks that the worker's handler has
// its context cancelled with cause ErrCancelled, that its late result is
// dropped, and that nothing claims the task again. It measures the delay
// from the cancel call to the handler's ctx.Done(): with the announcement
// over Redis pub/sub, and by the next renewal alone.
func TestWorkerCancelStopsTheHandler(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		pubsub bool
		within time.Duration // the delay's bound
	}{
		{"announced over pubsub", true, time.Second},
		{"by the next renewal", false, cancelLease},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rdb := testenv.Redis(t)
			cfg := dispatcher.Config{Lease: cancelLease, PollInterval: 50 * time.Millisecond}
			if c.pubsub {
				cfg.PubSub = rdb
			}
			b := setup(t, setupOpts{Redis: rdb, Dispatcher: cfg})
			ctx := context.Background()
			if err := b.D.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.D.Stop(ctx) })
			// The operator's process: another dispatcher over the same stores.
			cfg.KeyPrefix = b.Prefix
			op, err := dispatcher.New(b.Store, b.Locks, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c.pubsub {
				testenv.Eventually(t, 10*time.Second, "the relay's subscription", func() bool {
					n, err := rdb.PubSubNumSub(ctx, b.Prefix+"wake").Result()
					return err == nil && n[b.Prefix+"wake"] > 0
				})
			}

			id := b.Add(t, "jobs", 0, 1)[0]
			h := newDoneAt()
			mux := worker.NewMux()
			mux.Handle("jobs", h)
			// Two workers: either runs the task, and the other would take it
			// were it back in the pool.
			ws := []*worker.Worker{
				startWorkerOn(t, b.D, worker.Config{Handler: mux, Concurrency: 2}),
				startWorkerOn(t, b.D, worker.Config{Handler: mux, Concurrency: 2}),
			}
			totals := func() (st worker.Totals) {
				for _, w := range ws {
					wt := w.Totals()
					st.Processed, st.Failed, st.LeaseLost = st.Processed+wt.Processed, st.Failed+wt.Failed, st.LeaseLost+wt.LeaseLost
					st.Cancelled += wt.Cancelled
				}
				return st
			}
			task := awaitValue(t, h.started, "handler start")

			sent := time.Now()
			if err := op.Cancel(ctx, tasks.ChangeParams{TaskID: id, By: "admin", Reason: "withdrawn"}); err != nil {
				t.Fatalf("cancel a running task: %v", err)
			}
			seen := awaitValue(t, h.ended, "the handler's cancellation")
			delay := seen.at.Sub(sent)
			t.Logf("cancel to the handler's ctx.Done(): %v", delay)
			if !errors.Is(seen.cause, worker.ErrCancelled) || errors.Is(seen.cause, worker.ErrLeaseLost) {
				t.Fatalf("cause %v, want ErrCancelled (and not ErrLeaseLost)", seen.cause)
			}
			if delay > c.within {
				t.Errorf("the handler learnt of the cancel after %v, want within %v", delay, c.within)
			}
			testenv.Eventually(t, 10*time.Second, "the run counted as cancelled", func() bool { return totals().Cancelled == 1 })

			// The task ended cancelled under the claim's fence, with no result,
			// its lock gone, and nothing claimed it again.
			time.Sleep(cancelLease / 2) // a renewal round and a poll or two
			got := b.Task(t, id)
			if got.Status != tasks.StatusCancelled || got.Fence != task.Fence || got.Holder != task.Holder {
				t.Errorf("task %s fence %d holder %s, want cancelled under the claim's fence %d and holder %s",
					got.Status, got.Fence, got.Holder, task.Fence, task.Holder)
			}
			if n := b.RowCount(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", id); n != 0 {
				t.Errorf("%d results committed for a cancelled task", n)
			}
			if n := b.RDB.Exists(ctx, b.LockKey(id)).Val(); n != 0 {
				t.Errorf("the cancelled claim's lock is still in Redis")
			}
			evs := b.workerEvents(t, id)
			if k := eventKinds(evs); len(k) != 2 || k[0] != tasks.EventClaimed || k[1] != tasks.EventCancelled {
				t.Fatalf("events %v, want [claimed cancelled]", k)
			}
			if e := evs[1]; e.Fence != task.Fence || e.Holder != task.Holder || e.Detail != "by admin: withdrawn" {
				t.Errorf("cancelled event %+v, want the claim's fence %d and holder %s, by admin", e, task.Fence, task.Holder)
			}
			if st := totals(); st.Processed != 0 || st.Failed != 0 || st.LeaseLost != 0 || st.Cancelled != 1 {
				t.Errorf("stats %+v, want one run cancelled, nothing processed, failed or lost", st)
			}
		})
	}
}

// TestWorkerBulkCancelStopsTheHandlers cancels a category by filter, through
// a dispatcher of another process, while a worker runs its tasks: every
// running handler has its context cancelled with cause ErrCancelled soon
// after, and no late result commits.
func TestWorkerBulkCancelStopsTheHandlers(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	cfg := dispatcher.Config{Lease: time.Minute, PollInterval: 50 * time.Millisecond, PubSub: rdb}
	b := setup(t, setupOpts{Redis: rdb, Dispatcher: cfg})
	ctx := context.Background()
	if err := b.D.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.D.Stop(ctx) })
	cfg.KeyPrefix = b.Prefix
	op, err := dispatcher.New(b.Store, b.Locks, cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the relay's subscription", func() bool {
		n, err := rdb.PubSubNumSub(ctx, b.Prefix+"wake").Result()
		return err == nil && n[b.Prefix+"wake"] > 0
	})
	ids := b.Add(t, "jobs", 0, 5)
	h := newDoneAt()
	mux := worker.NewMux()
	mux.Handle("jobs", h)
	w := startWorkerOn(t, b.D, worker.Config{Handler: mux, Concurrency: 3})
	for range 3 {
		awaitValue(t, h.started, "handler start")
	}

	// The lease is a minute: only the cancel's announcement can stop the
	// handlers within the wait below.
	sent := time.Now()
	res, err := op.CancelMatching(ctx, tasks.BulkParams{Category: "jobs", Reason: "withdrawn"})
	if err != nil {
		t.Fatalf("cancel matching: %v", err)
	}
	t.Logf("the bulk cancel's call: %v", time.Since(sent))
	if res.Changed != 5 || res.Running != 3 {
		t.Errorf("cancel matching = %+v, want 5 cancelled, 3 of them running", res)
	}
	for range 3 {
		seen := awaitValue(t, h.ended, "a handler's cancellation")
		if !errors.Is(seen.cause, worker.ErrCancelled) {
			t.Errorf("cause %v, want ErrCancelled", seen.cause)
		}
		t.Logf("bulk cancel to a handler's ctx.Done(): %v", seen.at.Sub(sent))
	}
	testenv.Eventually(t, 10*time.Second, "the runs counted", func() bool { return w.Totals().Cancelled == 3 })
	if st := w.Totals(); st.LeaseLost != 0 {
		t.Errorf("stats %+v, want the runs counted cancelled, not lost", st)
	}
	for _, id := range ids {
		if got := b.Task(t, id); got.Status != tasks.StatusCancelled {
			t.Errorf("task %d is %s, want cancelled", id, got.Status)
		}
	}
	if n := b.RowCount(t, "SELECT COUNT(*) FROM task_results"); n != 0 {
		t.Errorf("%d results committed for cancelled tasks", n)
	}
}

// TestWorkerCancelRacesCompletion cancels tasks while their handlers
// return: for each, exactly one of the cancel and the completion wins, and
// the audit trail says which, every fence accounted for.
func TestWorkerCancelRacesCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{Lease: cancelLease, PollInterval: 50 * time.Millisecond}})
	const n = 60
	ids := b.Add(t, "jobs", 0, n)
	started := make(chan int64, n)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		started <- task.ID
		select {
		case <-ctx.Done():
			// Done all the same: the worker must drop it.
		case <-time.After(time.Duration(rand.IntN(4000)) * time.Microsecond):
		}
		return task.ID, nil
	})
	w := startWorker(t, b, worker.Config{Handler: mux, Concurrency: 8})

	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	cancelled := make(map[int64]bool) // task id: the cancel won
	for range n {
		id := awaitValue(t, started, "a handler's start")
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(20000)) * time.Microsecond)
			err := b.D.Cancel(ctx, tasks.ChangeParams{TaskID: id, By: "admin"})
			var se *tasks.StatusError
			switch {
			case err == nil:
				mu.Lock()
				cancelled[id] = true
				mu.Unlock()
			case errors.As(err, &se) && se.Status == tasks.StatusDone:
			default:
				t.Errorf("cancel task %d: %v", id, err)
			}
		})
	}
	wg.Wait()
	testenv.Eventually(t, 15*time.Second, "every run settled", func() bool {
		st := w.Totals()
		return st.Running == 0 && st.Processed+st.Cancelled+st.LeaseLost == n
	})

	wonByCancel := 0
	for _, id := range ids {
		task := b.Task(t, id)
		results := b.RowCount(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", id)
		cancels := b.RowCount(t, "SELECT COUNT(*) FROM task_events WHERE task_id = ? AND kind = 'cancelled' AND fence = ? AND holder = ?",
			id, task.Fence, task.Holder)
		switch {
		case cancelled[id]:
			wonByCancel++
			if task.Status != tasks.StatusCancelled || results != 0 || cancels != 1 {
				t.Errorf("task %d: the cancel won, but it is %s with %d results and %d cancelled events of its claim", id, task.Status, results, cancels)
			}
		default:
			if task.Status != tasks.StatusDone || results != 1 || cancels != 0 {
				t.Errorf("task %d: the completion won, but it is %s with %d results and %d cancelled events", id, task.Status, results, cancels)
			}
		}
		if task.Fence != 1 {
			t.Errorf("task %d claimed %d times, want once", id, task.Fence)
		}
	}
	if st := w.Totals(); st.Processed != int64(n-wonByCancel) || st.Cancelled != int64(wonByCancel) || st.LeaseLost != 0 {
		t.Errorf("stats %+v, want %d processed and %d cancelled, none lost", st, n-wonByCancel, wonByCancel)
	}
	t.Logf("%d of %d cancels won against the completion", wonByCancel, n)
	if wonByCancel == 0 || wonByCancel == n {
		t.Errorf("%d of %d cancels won: the race was not run both ways", wonByCancel, n)
	}
	if checked, bad := b.FenceAccounting(t); len(bad) > 0 || checked != n {
		t.Errorf("fence accounting: %d checked, want %d; %v", checked, n, bad)
	}
}
