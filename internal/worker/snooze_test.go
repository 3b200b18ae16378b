package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

func TestSnoozeError(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("issuer busy: %w", worker.Snooze(1500*time.Millisecond))
	var sn *worker.SnoozeError
	if !errors.As(err, &sn) || sn.Duration != 1500*time.Millisecond {
		t.Fatalf("errors.As(%v) = %v, want the snooze of 1.5s", err, sn)
	}
	if got, want := err.Error(), "issuer busy: snooze 1.5s"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	for d, want := range map[time.Duration]time.Duration{
		-time.Second:                       0,
		0:                                  0,
		1500 * time.Microsecond:            time.Millisecond,
		time.Hour:                          time.Hour,
		tasks.SnoozeMax + time.Millisecond: tasks.SnoozeMax,
		time.Duration(1<<63 - 1):           tasks.SnoozeMax,
	} {
		if got := worker.SnoozeFor(d); got != want {
			t.Errorf("a snooze of %v puts the task off %v, want %v", d, got, want)
		}
	}
}

// snoozeRun is what a handler saw of one run.
type snoozeRun struct {
	at                time.Time
	attempts, snoozes int
}

// TestWorkerSnoozeRunsTheTaskAgainLater: a handler's Snooze puts its task
// back in the pool, claimable after the delay, its attempt not counted and a
// 'snoozed' event written; the claim's lock is given back, and the worker
// wakes the category's claims when the task is due, so that it runs again
// then, not at the next poll, and can succeed.
func TestWorkerSnoozeRunsTheTaskAgainLater(t *testing.T) {
	t.Parallel()
	// A poll far longer than the delay: only a wake-up runs the task again in
	// time. A lease far longer too: only a lock given back lets it be claimed.
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{PollInterval: 10 * time.Second, Lease: 30 * time.Second}})
	id := b.Add(t, "jobs", 0, 1)[0]
	const delay = 300 * time.Millisecond
	var mu sync.Mutex
	var runs []snoozeRun
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(_ context.Context, task *tasks.Task) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, snoozeRun{at: time.Now(), attempts: task.Attempts, snoozes: task.Snoozes})
		if len(runs) == 1 {
			return "ignored", worker.Snooze(delay)
		}
		return map[string]bool{"ok": true}, nil
	})
	w := startWorker(t, b, worker.Config{Handler: mux})
	testenv.Eventually(t, 30*time.Second, "the task done", func() bool { return w.Totals().Processed == 1 })
	shutdownWorker(t, w)

	task := b.Task(t, id)
	if task.Status != tasks.StatusDone || task.Attempts != 1 || task.Snoozes != 1 {
		t.Fatalf("task %s after %d attempts and %d snoozes, want done after 1 and 1", task.Status, task.Attempts, task.Snoozes)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 || runs[0].attempts != 1 || runs[1].attempts != 1 || runs[0].snoozes != 0 || runs[1].snoozes != 1 {
		t.Fatalf("runs %+v, want two, each its task's first attempt, the second after a snooze", runs)
	}
	evs := b.workerEvents(t, id)
	want := []tasks.EventKind{tasks.EventClaimed, tasks.EventSnoozed, tasks.EventClaimed, tasks.EventSubmitted}
	if !slices.Equal(eventKinds(evs), want) {
		t.Fatalf("events %v, want %v", eventKinds(evs), want)
	}
	snoozed, claimed := evs[1], evs[2]
	if snoozed.Fence != 1 || snoozed.Detail != "300ms" || claimed.Fence != 2 {
		t.Errorf("snoozed event %+v, then claimed at fence %d; want fence 1, detail 300ms, then fence 2", snoozed, claimed.Fence)
	}
	due := snoozed.At.Add(delay)
	if claimed.At.Before(due) {
		t.Errorf("claimed again at %v, before the snooze's end %v", claimed.At, due)
	}
	// The database's clock and the test's are the machine's.
	if late := runs[1].at.Sub(due); late > 2*time.Second {
		t.Errorf("ran again %v after the snooze's end, want within 2s (the poll interval is 10s, the lease 30s)", late)
	}
	if st := w.Totals(); st.Snoozed != 1 || st.Processed != 1 || st.Failed != 0 || st.LeaseLost != 0 {
		t.Errorf("totals %+v, want 1 snoozed, 1 processed", st)
	}
	if n := b.RDB.Exists(context.Background(), b.LockKey(id)).Val(); n != 0 {
		t.Errorf("the task's lock is still held")
	}
}

// TestWorkerSnoozeLimitMakesTheTaskDead: a task that always snoozes is dead at
// the snooze past Config.MaxSnoozes, with the limit's error and a 'dead'
// event; no snooze counted an attempt.
func TestWorkerSnoozeLimitMakesTheTaskDead(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	ids, err := dispatchtest.IDsOf(b.D.AddTasks(context.Background(), []tasks.NewTask{{Category: "jobs", Title: "never ready", MaxAttempts: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	id := ids[0]
	var calls atomic.Int32
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(context.Context, *tasks.Task) (any, error) {
		calls.Add(1)
		return nil, fmt.Errorf("not ready: %w", worker.Snooze(-time.Hour)) // at once
	})
	w := startWorker(t, b, worker.Config{Handler: mux, MaxSnoozes: 2})
	testenv.Eventually(t, 30*time.Second, "the task dead", func() bool { return w.Totals().Failed == 1 })
	shutdownWorker(t, w)

	task := b.Task(t, id)
	const limitErr = "snoozed 2 times, the limit"
	if task.Status != tasks.StatusDead || task.LastError != limitErr || task.Snoozes != 2 || task.Attempts != 0 {
		t.Fatalf("task %s, last error %q, %d snoozes, %d attempts; want dead with %q, 2 snoozes, no attempt spent",
			task.Status, task.LastError, task.Snoozes, task.Attempts, limitErr)
	}
	if calls.Load() != 3 {
		t.Errorf("handler ran %d times, want 3 (max_attempts 1 counts no snooze)", calls.Load())
	}
	evs := b.workerEvents(t, id)
	want := []tasks.EventKind{tasks.EventClaimed, tasks.EventSnoozed, tasks.EventClaimed, tasks.EventSnoozed, tasks.EventClaimed, tasks.EventDead}
	if !slices.Equal(eventKinds(evs), want) {
		t.Fatalf("events %v, want %v", eventKinds(evs), want)
	}
	if last := evs[len(evs)-1]; last.Detail != limitErr || last.Fence != 3 || evs[1].Detail != "0s" {
		t.Errorf("events %+v, want the dead one at fence 3 with %q, the snoozes' detail 0s", evs, limitErr)
	}
	if st := w.Totals(); st.Snoozed != 2 || st.Failed != 1 || st.Processed != 0 {
		t.Errorf("totals %+v, want 2 snoozed, 1 failed", st)
	}
}

// TestWorkerStaleSnoozeChangesNothing: the snooze of a claim the worker lost
// (revoked and taken by another holder while the handler ran) is refused as
// stale in the batch that commits the other members' snoozes: the new claim
// keeps its fence, holder and attempts, and no snooze is recorded for it.
func TestWorkerStaleSnoozeChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &gatedCompletes{Store: b.Store, gate: make(chan struct{}), sizes: make(chan int, 100)}
	close(store.gate)
	// A long lease: no renewal runs during the test, so the revoked claim is
	// found out only by its outcome.
	d, err := dispatcher.New(store, b.Locks, dispatcher.Config{Lease: time.Minute, KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	ids := b.Add(t, "jobs", 0, 3)
	release := make(chan struct{})
	started := make(chan *tasks.Task, 10)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		trySend(started, task)
		<-release
		return nil, worker.Snooze(time.Hour) // not claimed again during the test
	})
	w := startWorkerOn(t, d, worker.Config{Handler: mux, Concurrency: 3, BatchSize: 3, FlushInterval: time.Hour})
	for range 3 {
		awaitValue(t, started, "handler start")
	}
	revoked := ids[1]
	ctx := context.Background()
	if _, err := b.Store.ForceRelease(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	cur := b.Task(t, revoked)
	res, err := b.Store.ClaimBatch(ctx, []tasks.ClaimParams{{TaskID: revoked, Fence: cur.Fence, Status: cur.Status, Holder: "worker:other", Lease: time.Minute}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("claim the revoked task: %v %+v", err, res)
	}
	taken := b.Task(t, revoked)
	close(release)
	if n := awaitValue(t, store.sizes, "completion batch"); n != 3 {
		t.Fatalf("first completion batch of %d members, want all 3", n)
	}
	testenv.Eventually(t, 10*time.Second, "outcomes recorded", func() bool {
		st := w.Totals()
		return st.Snoozed+st.LeaseLost >= 3
	})
	if st := w.Totals(); st.Snoozed != 2 || st.LeaseLost != 1 || st.Failed != 0 {
		t.Fatalf("totals %+v, want 2 snoozed and 1 lease lost", st)
	}
	for _, id := range ids {
		got := b.Task(t, id)
		if id == revoked {
			if got.Status != tasks.StatusAssigned || got.Holder != "worker:other" || got.Fence != taken.Fence ||
				got.Attempts != taken.Attempts || got.Snoozes != 0 || !got.LeaseExpiresAt.Equal(*taken.LeaseExpiresAt) {
				t.Errorf("the revoked task changed: %+v, was %+v", got, taken)
			}
			continue
		}
		if got.Status != tasks.StatusPending || got.Attempts != 0 || got.Snoozes != 1 || got.RunAfter.Before(time.Now().Add(50*time.Minute)) {
			t.Errorf("task %d: %+v, want pending for an hour, no attempt, 1 snooze", id, got)
		}
	}
	if n := b.RowCount(t, "SELECT COUNT(*) FROM task_events WHERE kind = 'snoozed'"); n != 2 {
		t.Errorf("%d snoozed events, want 2 (none of the stale claim)", n)
	}
	if n := b.RowCount(t, "SELECT COUNT(*) FROM task_events WHERE kind = 'snoozed' AND task_id = ?", revoked); n != 0 {
		t.Errorf("%d snoozed events of the revoked task, want none", n)
	}
	if n := d.Stats().RefusedWrites; n != 1 {
		t.Errorf("%d writes refused as stale, want 1 (the stale snooze)", n)
	}
	testenv.Eventually(t, 10*time.Second, "the worker's locks given back", func() bool {
		return b.RDB.Exists(context.Background(), b.LockKey(ids[0]), b.LockKey(ids[1]), b.LockKey(ids[2])).Val() == 0
	})
}

// TestWorkerSnoozeAtShutdown: a snooze returned while the worker stops is
// recorded as the snooze it is, not given back as a shutdown's release.
func TestWorkerSnoozeAtShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.Add(t, "jobs", 0, 1)[0]
	started := make(chan struct{}, 1)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(ctx context.Context, _ *tasks.Task) (any, error) {
		trySend(started, struct{}{})
		<-ctx.Done()
		return nil, worker.Snooze(time.Hour)
	})
	w := startWorker(t, b, worker.Config{Handler: mux, ShutdownTimeout: 50 * time.Millisecond})
	awaitValue(t, started, "handler start")
	shutdownWorker(t, w)
	got := b.Task(t, id)
	if got.Status != tasks.StatusPending || got.Snoozes != 1 || got.Attempts != 0 {
		t.Fatalf("task %+v, want snoozed: pending, 1 snooze, no attempt", got)
	}
	want := []tasks.EventKind{tasks.EventClaimed, tasks.EventSnoozed}
	if k := eventKinds(b.workerEvents(t, id)); !slices.Equal(k, want) {
		t.Fatalf("events %v, want %v", k, want)
	}
	if st := w.Totals(); st.Snoozed != 1 || st.Released != 0 {
		t.Errorf("totals %+v, want 1 snoozed, none released", st)
	}
}
