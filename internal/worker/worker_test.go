package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// workerFastPoll makes long-polling slots look again soon, so that a retry whose
// backoff passed is claimed without waiting for the default poll interval.
var workerFastPoll = dispatcher.Config{PollInterval: 50 * time.Millisecond}

// startWorker starts a worker on b's dispatcher and shuts it down when the
// test ends. A zero ShutdownTimeout becomes one second, and a nil Logger
// discards, so that blocked handlers do not hold the test up.
func startWorker(t *testing.T, b *bundle, cfg worker.Config) *worker.Worker {
	t.Helper()
	return startWorkerOn(t, b.D, cfg)
}

func startWorkerOn(t *testing.T, d *dispatcher.Dispatcher, cfg worker.Config, beforeStart ...func(*worker.Worker)) *worker.Worker {
	t.Helper()
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w, err := worker.New(d, cfg)
	if err != nil {
		t.Fatalf("new worker: %v", err)
	}
	for _, fn := range beforeStart {
		fn(w)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("shutdown worker: %v", err)
		}
	})
	return w
}

// shutdownWorker stops w and fails the test unless it stops cleanly.
func shutdownWorker(t *testing.T, w *worker.Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("shutdown worker: %v", err)
	}
}

// workerEvents returns a task's events, leaving out heartbeats.
func (b *bundle) workerEvents(t testing.TB, id int64) []tasks.Event {
	t.Helper()
	evs := b.History(t, id)
	return slices.DeleteFunc(evs, func(e tasks.Event) bool { return e.Kind == tasks.EventHeartbeat })
}

func eventKinds(evs []tasks.Event) []tasks.EventKind {
	out := make([]tasks.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// trySend sends v without blocking; the channels it feeds are buffered for
// more sends than a test makes.
func trySend[T any](c chan T, v T) {
	select {
	case c <- v:
	default:
	}
}

// awaitValue waits for a value on c, failing the test after a generous bound.
func awaitValue[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: nothing within 15s", what)
		panic("unreachable")
	}
}

func TestWorkerProcessesEachTaskOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	const n = 30
	ids := b.Add(t, "jobs", 0, n)

	var mu sync.Mutex
	seen := make(map[int64]int)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(_ context.Context, task *tasks.Task) (any, error) {
		mu.Lock()
		seen[task.ID]++
		mu.Unlock()
		return nil, nil
	})
	// Two workers compete for the same pool.
	w1 := startWorker(t, b, worker.Config{Handler: mux, Concurrency: 3})
	w2 := startWorker(t, b, worker.Config{Handler: mux, Concurrency: 3})
	testenv.Eventually(t, 30*time.Second, "all tasks processed", func() bool {
		return w1.Totals().Processed+w2.Totals().Processed >= n
	})
	shutdownWorker(t, w1)
	shutdownWorker(t, w2)

	if got := w1.Totals().Processed + w2.Totals().Processed; got != n {
		t.Fatalf("workers processed %d tasks, want %d", got, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Fatalf("handler saw %d distinct tasks, want %d", len(seen), n)
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("task %d handled %d times, want exactly once", id, seen[id])
		}
	}
	if done := b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE status = 'done' AND holder LIKE 'worker:%'"); done != n {
		t.Fatalf("%d tasks done by a worker, want %d", done, n)
	}
	var results []struct {
		TaskID int64  `db:"task_id"`
		Fence  int64  `db:"fence"`
		Result string `db:"result"`
	}
	if err := b.DB.SelectContext(context.Background(), &results, "SELECT task_id, fence, result FROM task_results"); err != nil {
		t.Fatal(err)
	}
	if len(results) != n {
		t.Fatalf("%d results, want one per task (%d)", len(results), n)
	}
	perTask := make(map[int64]int)
	for _, r := range results {
		perTask[r.TaskID]++
		if r.Result != "null" {
			t.Errorf("task %d: result %q, want null", r.TaskID, r.Result)
		}
		if task := b.Task(t, r.TaskID); task.Fence != r.Fence {
			t.Errorf("task %d: result for fence %d, but the task's fence is %d", r.TaskID, r.Fence, task.Fence)
		}
	}
	for _, id := range ids {
		if perTask[id] != 1 {
			t.Errorf("task %d has %d results, want 1", id, perTask[id])
		}
	}
	if st := w1.Totals(); st.Failed != 0 || st.LeaseLost != 0 || st.Running != 0 {
		t.Fatalf("worker 1 stats %+v, want no failures, no lost leases, nothing running", st)
	}
}

func TestWorkerRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	id := b.Add(t, "jobs", 0, 1)[0]
	const backoff = 200 * time.Millisecond

	var backoffs []int
	var mu sync.Mutex
	var calls atomic.Int32
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(_ context.Context, task *tasks.Task) (any, error) {
		calls.Add(1)
		if task.Attempts < 3 {
			return nil, fmt.Errorf("attempt %d: upstream not ready", task.Attempts)
		}
		return nil, nil
	})
	w := startWorker(t, b, worker.Config{
		Handler: mux, Concurrency: 1,
		RetryBackoff: func(attempt int) time.Duration {
			mu.Lock()
			backoffs = append(backoffs, attempt)
			mu.Unlock()
			return backoff
		},
	})
	testenv.Eventually(t, 30*time.Second, "task done", func() bool { return w.Totals().Processed == 1 })
	shutdownWorker(t, w)

	task := b.Task(t, id)
	if task.Status != tasks.StatusDone || task.Attempts != 3 {
		t.Fatalf("task %s after %d attempts, want done after 3", task.Status, task.Attempts)
	}
	if calls.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3", calls.Load())
	}
	if want := "attempt 2: upstream not ready"; task.LastError != want {
		t.Fatalf("last error %q, want %q", task.LastError, want)
	}
	mu.Lock()
	if !slices.Equal(backoffs, []int{1, 2}) {
		t.Fatalf("RetryBackoff called with attempts %v, want [1 2]", backoffs)
	}
	mu.Unlock()
	evs := b.workerEvents(t, id)
	want := []tasks.EventKind{
		tasks.EventClaimed, tasks.EventFailed,
		tasks.EventClaimed, tasks.EventFailed,
		tasks.EventClaimed, tasks.EventSubmitted,
	}
	if !slices.Equal(eventKinds(evs), want) {
		t.Fatalf("events %v, want %v", eventKinds(evs), want)
	}
	// The failure set run_after in the future; the next claim waited for it.
	failed2, claimed3 := evs[3], evs[4]
	if !task.RunAfter.After(failed2.At) {
		t.Fatalf("run_after %v is not after the failure at %v", task.RunAfter, failed2.At)
	}
	if claimed3.At.Before(task.RunAfter) {
		t.Fatalf("claimed at %v, before run_after %v", claimed3.At, task.RunAfter)
	}
	if gap := evs[2].At.Sub(evs[1].At); gap < backoff/2 {
		t.Fatalf("second claim %v after the first failure, want at least about the backoff %v", gap, backoff)
	}
	if st := w.Totals(); st.Failed != 2 || st.Processed != 1 {
		t.Fatalf("stats %+v, want 2 failed, 1 processed", st)
	}
}

func TestWorkerDeadAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	ids, err := dispatchtest.IDsOf(b.D.AddTasks(context.Background(), []tasks.NewTask{{Category: "jobs", Title: "doomed", MaxAttempts: 2}}))
	if err != nil {
		t.Fatal(err)
	}
	id := ids[0]
	var calls atomic.Int32
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(context.Context, *tasks.Task) (any, error) {
		calls.Add(1)
		return nil, errors.New("always broken")
	})
	w := startWorker(t, b, worker.Config{
		Handler: mux, Concurrency: 2,
		RetryBackoff: func(int) time.Duration { return 10 * time.Millisecond },
	})
	testenv.Eventually(t, 30*time.Second, "task dead", func() bool { return w.Totals().Failed == 2 })
	shutdownWorker(t, w)

	task := b.Task(t, id)
	if task.Status != tasks.StatusDead || task.Attempts != 2 || task.LastError != "always broken" {
		t.Fatalf("task %s, attempts %d, last error %q; want dead after 2 with the handler's error",
			task.Status, task.Attempts, task.LastError)
	}
	if calls.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2", calls.Load())
	}
	want := []tasks.EventKind{tasks.EventClaimed, tasks.EventFailed, tasks.EventClaimed, tasks.EventDead}
	if got := eventKinds(b.workerEvents(t, id)); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func TestWorkerSkipRetryMakesTheTaskDead(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	ids, err := dispatchtest.IDsOf(b.D.AddTasks(context.Background(), []tasks.NewTask{{Category: "jobs", Title: "malformed", MaxAttempts: 5}}))
	if err != nil {
		t.Fatal(err)
	}
	id := ids[0]
	var calls atomic.Int32
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(context.Context, *tasks.Task) (any, error) {
		calls.Add(1)
		return nil, fmt.Errorf("payload has no text: %w", worker.SkipRetry)
	})
	w := startWorker(t, b, worker.Config{
		Handler: mux, RetryBackoff: func(int) time.Duration { return 10 * time.Millisecond },
	})
	testenv.Eventually(t, 30*time.Second, "task failed", func() bool { return w.Totals().Failed == 1 })
	shutdownWorker(t, w)

	task := b.Task(t, id)
	if task.Status != tasks.StatusDead || task.Attempts != 1 || calls.Load() != 1 {
		t.Fatalf("task %s after %d attempts and %d calls; want dead after 1 with 4 attempts left",
			task.Status, task.Attempts, calls.Load())
	}
	want := []tasks.EventKind{tasks.EventClaimed, tasks.EventDead}
	if got := eventKinds(b.workerEvents(t, id)); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func TestWorkerStoresHandlerResults(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	ids, err := dispatchtest.IDsOf(b.D.AddTasks(context.Background(), []tasks.NewTask{
		{Category: "jobs", Title: "with result", Payload: json.RawMessage(`{"n":1}`)},
		{Category: "jobs", Title: "without result", Payload: json.RawMessage(`{"n":2}`)},
		{Category: "jobs", Title: "bad result", Payload: json.RawMessage(`{"n":3}`), MaxAttempts: 5},
		{Category: "jobs", Title: "too deep a result", Payload: json.RawMessage(`{"n":4}`), MaxAttempts: 5},
		{Category: "jobs", Title: "result json cannot encode", Payload: json.RawMessage(`{"n":5}`), MaxAttempts: 5},
	}))
	if err != nil {
		t.Fatal(err)
	}
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(_ context.Context, task *tasks.Task) (any, error) {
		switch string(task.Payload) {
		case `{"n": 1}`, `{"n":1}`:
			return map[string]int{"doubled": 2}, nil
		case `{"n": 3}`, `{"n":3}`:
			return json.RawMessage(`{not json`), nil
		case `{"n": 4}`, `{"n":4}`:
			return json.RawMessage(strings.Repeat("[", tasks.MaxJSONDepth+1) + strings.Repeat("]", tasks.MaxJSONDepth+1)), nil
		case `{"n": 5}`, `{"n":5}`:
			return func() {}, nil // json.Marshal cannot encode it
		}
		return nil, nil
	})
	w := startWorker(t, b, worker.Config{Handler: mux})
	testenv.Eventually(t, 30*time.Second, "tasks finished", func() bool {
		st := w.Totals()
		return st.Processed == 2 && st.Failed == 3
	})
	shutdownWorker(t, w)

	// The returned result is stored; none is JSON null.
	for i, want := range []string{`{"doubled": 2}`, `null`} {
		var got string
		if err := b.DB.GetContext(context.Background(), &got, "SELECT result FROM task_results WHERE task_id = ?", ids[i]); err != nil {
			t.Fatalf("result of task %d: %v", ids[i], err)
		}
		if strings.ReplaceAll(got, " ", "") != strings.ReplaceAll(want, " ", "") {
			t.Errorf("task %d result %s, want %s", ids[i], got, want)
		}
	}
	// A result the store refuses cannot be stored, and retrying will not fix it.
	for i, rule := range map[int]string{2: "valid JSON", 3: "levels deep", 4: "unsupported type"} {
		if task := b.Task(t, ids[i]); task.Status != tasks.StatusDead || !strings.Contains(task.LastError, rule) {
			t.Errorf("task with a bad result: status %s, last error %q; want dead, the error saying %q", task.Status, task.LastError, rule)
		}
	}
}

// logBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *logBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestWorkerRecoversPanics(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	ids, err := dispatchtest.IDsOf(b.D.AddTasks(context.Background(), []tasks.NewTask{
		{Category: "jobs", Title: "panics", Priority: 9, MaxAttempts: 1},
		{Category: "jobs", Title: "fine", Priority: 1},
	}))
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(_ context.Context, task *tasks.Task) (any, error) {
		if task.Title == "panics" {
			panic("boom")
		}
		return nil, nil
	})
	// One slot: the panicking task (higher priority) runs first, so the other
	// one proves the slot survived.
	w := startWorker(t, b, worker.Config{
		Handler: mux, Concurrency: 1,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
	})
	testenv.Eventually(t, 30*time.Second, "the second task processed", func() bool { return w.Totals().Processed == 1 })
	shutdownWorker(t, w)

	panicked := b.Task(t, ids[0])
	if panicked.Status != tasks.StatusDead || panicked.LastError != "panic: boom" {
		t.Fatalf("panicking task: %s with last error %q, want dead with %q", panicked.Status, panicked.LastError, "panic: boom")
	}
	if fine := b.Task(t, ids[1]); fine.Status != tasks.StatusDone {
		t.Fatalf("task after the panic: %s, want done", fine.Status)
	}
	if st := w.Totals(); st.Failed != 1 {
		t.Fatalf("stats %+v, want the panic counted as 1 failure", st)
	}
	out := logs.String()
	if !strings.Contains(out, `"msg":"handler panicked"`) || !strings.Contains(out, `"level":"ERROR"`) ||
		!strings.Contains(out, "worker_test.go") || !strings.Contains(out, fmt.Sprintf(`"task_id":%d`, ids[0])) {
		t.Fatalf("no error log with the stack and task id of the panic; logs:\n%s", out)
	}
}

// blockingWorkerHandler blocks every task until its context ends, and reports each
// start and each context's cause.
type blockingWorkerHandler struct {
	started chan *tasks.Task
	causes  chan error
	// result returns what the handler returns for its n-th call (from 1).
	result func(n int, cause error) error
	calls  atomic.Int32
}

func newBlockingWorkerHandler(result func(n int, cause error) error) *blockingWorkerHandler {
	return &blockingWorkerHandler{started: make(chan *tasks.Task, 100), causes: make(chan error, 100), result: result}
}

func (h *blockingWorkerHandler) ProcessTask(ctx context.Context, task *tasks.Task) (any, error) {
	n := int(h.calls.Add(1))
	trySend(h.started, task)
	<-ctx.Done()
	cause := context.Cause(ctx)
	trySend(h.causes, cause)
	return nil, h.result(n, cause)
}

// fenceEventsAfter returns the kinds of the task's events about fence that
// come after the first event of kind after.
func fenceEventsAfter(evs []tasks.Event, fence int64, after tasks.EventKind) []tasks.EventKind {
	var out []tasks.EventKind
	found := false
	for _, e := range evs {
		if e.Fence != fence {
			continue
		}
		if found {
			out = append(out, e.Kind)
		}
		if e.Kind == after {
			found = true
		}
	}
	return out
}

// heartbeatProbe reports the outcome of each heartbeat the store received.
type heartbeatProbe struct {
	*store.Store
	results chan error
}

func (p *heartbeatProbe) Heartbeat(ctx context.Context, hp tasks.HeartbeatParams) (time.Time, error) {
	t, err := p.Store.Heartbeat(ctx, hp)
	trySend(p.results, err)
	return t, err
}

// HeartbeatBatch reports each member's outcome, as Heartbeat does one.
func (p *heartbeatProbe) HeartbeatBatch(ctx context.Context, ps []tasks.HeartbeatParams) ([]tasks.Renewed, error) {
	res, err := p.Store.HeartbeatBatch(ctx, ps)
	if err != nil {
		trySend(p.results, err)
		return nil, err
	}
	for _, r := range res {
		trySend(p.results, r.Err)
	}
	return res, nil
}

// awaitHeartbeat waits for a heartbeat whose outcome satisfies ok.
func (p *heartbeatProbe) awaitHeartbeat(t *testing.T, what string, ok func(error) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case err := <-p.results:
			if ok(err) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: not within 30s", what)
		}
	}
}

func TestWorkerLeaseLossCancelsHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Heartbeats every second; the lease leaves them two more before it
	// would pass, so the claim ends only by the forced release below.
	probe := &heartbeatProbe{Store: b.Store, results: make(chan error, 100)}
	d, err := dispatcher.New(probe, b.Locks, dispatcher.Config{
		Lease: 3 * time.Second, PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := b.Add(t, "jobs", 0, 1)[0]
	// The first call returns nil once cancelled, as if the work got done: the
	// worker must still not commit it. Later calls (were the task claimed
	// again) would give up with the cause.
	h := newBlockingWorkerHandler(func(n int, cause error) error {
		if n == 1 {
			return nil
		}
		return cause
	})
	mux := worker.NewMux()
	mux.Handle("jobs", h)
	w := startWorkerOn(t, d, worker.Config{Handler: mux, Concurrency: 1})

	task := awaitValue(t, h.started, "handler start")
	// Heartbeats keep the claim alive meanwhile.
	probe.awaitHeartbeat(t, "an accepted heartbeat", func(err error) bool { return err == nil })
	// Once revoked, the task is not claimed again during the test (run_after
	// in an hour), so that only the revoked claim can count below.
	if _, err := b.DB.ExecContext(context.Background(),
		"UPDATE tasks SET run_after = NOW(3) + INTERVAL 1 HOUR WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.ForceRelease(context.Background(), id); err != nil {
		t.Fatalf("force release: %v", err)
	}
	probe.awaitHeartbeat(t, "a heartbeat refused as stale", func(err error) bool { return errors.Is(err, tasks.ErrStale) })
	cause := awaitValue(t, h.causes, "handler cancellation")
	if !errors.Is(cause, worker.ErrLeaseLost) || !errors.Is(cause, tasks.ErrStale) {
		t.Fatalf("cause %v, want ErrLeaseLost from a stale heartbeat", cause)
	}
	testenv.Eventually(t, 10*time.Second, "lease loss counted", func() bool { return w.Totals().LeaseLost == 1 })

	// Nothing about the revoked claim reached the store after the forced release.
	if after := fenceEventsAfter(b.workerEvents(t, id), task.Fence, tasks.EventReleased); len(after) != 0 {
		t.Fatalf("events about fence %d after the forced release: %v", task.Fence, after)
	}
	if n := b.RowCount(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", id); n != 0 {
		t.Fatalf("%d results committed for a revoked claim", n)
	}
	if got := b.Task(t, id); got.Status == tasks.StatusDone || got.Fence <= task.Fence {
		t.Fatalf("task %s with fence %d after forced release of fence %d", got.Status, got.Fence, task.Fence)
	}
	if st := w.Totals(); st.Processed != 0 || st.Failed != 0 {
		t.Fatalf("stats %+v, want nothing processed or failed", st)
	}
	// The store refused the one heartbeat after the forced release, and the
	// worker sent nothing else about the claim (a submit would be refused too).
	if n := d.Stats().RefusedWrites; n != 1 {
		t.Fatalf("%d writes refused as stale, want 1 (the heartbeat)", n)
	}
	if n := h.calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want once", n)
	}
}

// refusedHeartbeats is a store whose heartbeats never reach the database, as
// if it were unreachable.
type refusedHeartbeats struct{ *store.Store }

func (refusedHeartbeats) Heartbeat(context.Context, tasks.HeartbeatParams) (time.Time, error) {
	return time.Time{}, fmt.Errorf("heartbeat: %w", syscall.ECONNREFUSED)
}

func (refusedHeartbeats) HeartbeatBatch(context.Context, []tasks.HeartbeatParams) ([]tasks.Renewed, error) {
	return nil, fmt.Errorf("heartbeat batch: %w", syscall.ECONNREFUSED)
}

func TestWorkerLeaseLostWhenHeartbeatsFail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d, err := dispatcher.New(refusedHeartbeats{b.Store}, b.Locks, dispatcher.Config{
		Lease: 300 * time.Millisecond, PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := b.Add(t, "jobs", 0, 1)[0]
	h := newBlockingWorkerHandler(func(_ int, cause error) error { return cause })
	mux := worker.NewMux()
	mux.Handle("jobs", h)
	w := startWorkerOn(t, d, worker.Config{Handler: mux, Concurrency: 1})

	task := awaitValue(t, h.started, "handler start")
	cause := awaitValue(t, h.causes, "handler cancellation")
	if !errors.Is(cause, worker.ErrLeaseLost) || errors.Is(cause, tasks.ErrStale) ||
		!strings.Contains(cause.Error(), "without a renewal") || !strings.Contains(cause.Error(), "connection refused") {
		t.Fatalf("cause %v, want ErrLeaseLost for a lease that passed without a heartbeat", cause)
	}
	testenv.Eventually(t, 10*time.Second, "lease loss counted", func() bool { return w.Totals().LeaseLost >= 1 })
	// The worker gave up without writing: no failure was recorded for the claim.
	for _, e := range b.workerEvents(t, id) {
		if e.Fence == task.Fence && e.Kind != tasks.EventClaimed && e.Kind != tasks.EventExpired {
			t.Fatalf("event %s about the lost claim (fence %d)", e.Kind, task.Fence)
		}
	}
	if st := w.Totals(); st.Failed != 0 || st.Processed != 0 {
		t.Fatalf("stats %+v, want nothing failed or processed", st)
	}
	if n := d.Stats().RefusedWrites; n != 0 {
		t.Fatalf("%d writes refused as stale: the worker wrote about a claim it had lost", n)
	}
}

func TestWorkerGracefulShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids, err := dispatchtest.IDsOf(b.D.AddTasks(context.Background(), []tasks.NewTask{
		{Category: "finishes", Title: "a"},
		{Category: "stuck", Title: "b"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	idA, idB := ids[0], ids[1]

	startedA := make(chan struct{}, 10)
	finishA := make(chan struct{})
	stuck := newBlockingWorkerHandler(func(_ int, cause error) error { return cause })
	mux := worker.NewMux()
	mux.HandleFunc("finishes", func(ctx context.Context, _ *tasks.Task) (any, error) {
		trySend(startedA, struct{}{})
		select {
		case <-finishA:
			return nil, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	mux.Handle("stuck", stuck)
	// Two slots run a and b; the third long-polls for more until Shutdown
	// stops claiming, which is how the test sees the drain begin.
	w := startWorker(t, b, worker.Config{
		Handler: mux, Concurrency: 3, ShutdownTimeout: 500 * time.Millisecond,
	})
	awaitValue(t, startedA, "handler a start")
	taskB := awaitValue(t, stuck.started, "handler b start")
	testenv.Eventually(t, 10*time.Second, "the idle slot long-polling", func() bool { return b.D.Stats().Waiting > 0 })

	errc := make(chan error, 1)
	go func() { errc <- w.Stop(context.Background()) }()
	testenv.Eventually(t, 10*time.Second, "claiming stopped", func() bool { return b.D.Stats().Waiting == 0 })
	select {
	case err := <-errc:
		t.Fatalf("shutdown returned %v while handlers were running", err)
	default:
	}
	close(finishA) // a finishes during the drain
	if err := awaitValue(t, errc, "shutdown"); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	// Shutdown waited for everything: no polling needed from here on.
	if cause := awaitValue(t, stuck.causes, "cancellation of b"); !errors.Is(cause, worker.ErrWorkerShutdown) {
		t.Fatalf("b's context cause %v, want ErrWorkerShutdown", cause)
	}
	if a := b.Task(t, idA); a.Status != tasks.StatusDone {
		t.Fatalf("task a %s, want done: the drain should let it finish", a.Status)
	}
	if n := b.RowCount(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", idA); n != 1 {
		t.Fatalf("task a has %d results, want 1", n)
	}
	got := b.Task(t, idB)
	if got.Status != tasks.StatusPending || got.Fence != taskB.Fence || got.Holder != "" {
		t.Fatalf("task b %s, fence %d, holder %q; want pending, fence %d, no holder", got.Status, got.Fence, got.Holder, taskB.Fence)
	}
	evs := b.workerEvents(t, idB)
	last := evs[len(evs)-1]
	if last.Kind != tasks.EventReleased || last.Detail != "shutdown" || last.Fence != taskB.Fence {
		t.Fatalf("last event of b: %s %q fence %d; want released \"shutdown\" fence %d", last.Kind, last.Detail, last.Fence, taskB.Fence)
	}
	if n := b.RowCount(t, "SELECT COUNT(*) FROM task_events WHERE kind IN ('failed', 'dead')"); n != 0 {
		t.Fatalf("%d failures recorded; a shutdown is not a failure", n)
	}
	if n := b.RDB.Exists(context.Background(), b.LockKey(idA), b.LockKey(idB)).Val(); n != 0 {
		t.Fatalf("%d task locks left in Redis after shutdown", n)
	}
	if st := w.Totals(); st.Processed != 1 || st.Released != 1 || st.Running != 0 {
		t.Fatalf("stats %+v, want 1 processed, 1 released, none running", st)
	}
	if err := w.Start(context.Background()); !errors.Is(err, dispatcher.ErrStopped) {
		t.Fatalf("start after shutdown: %v, want ErrStopped", err)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
}

func TestWorkerShutdownContextEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.Add(t, "jobs", 0, 1)[0]
	release := make(chan struct{})
	h := newBlockingWorkerHandler(func(_ int, cause error) error {
		<-release // ignores its cancellation for a while
		return cause
	})
	mux := worker.NewMux()
	mux.Handle("jobs", h)
	w := startWorker(t, b, worker.Config{Handler: mux, Concurrency: 1, ShutdownTimeout: time.Hour})
	task := awaitValue(t, h.started, "handler start")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := w.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown with an ending context: %v, want context.DeadlineExceeded", err)
	}
	if cause := awaitValue(t, h.causes, "handler cancellation"); !errors.Is(cause, worker.ErrWorkerShutdown) {
		t.Fatalf("cause %v, want ErrWorkerShutdown", cause)
	}
	if st := w.Totals(); st.Running != 1 {
		t.Fatalf("stats %+v, want the handler still running", st)
	}
	close(release)
	// A second Shutdown waits for the handler and its release.
	shutdownWorker(t, w)
	got := b.Task(t, id)
	if got.Status != tasks.StatusPending || got.Fence != task.Fence {
		t.Fatalf("task %s fence %d, want pending with fence %d", got.Status, got.Fence, task.Fence)
	}
	if st := w.Totals(); st.Released != 1 || st.Running != 0 {
		t.Fatalf("stats %+v, want 1 released, none running", st)
	}
}

func TestWorkerStartContextStopsIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.Add(t, "jobs", 0, 1)[0]
	h := newBlockingWorkerHandler(func(_ int, cause error) error { return cause })
	mux := worker.NewMux()
	mux.Handle("jobs", h)
	w, err := worker.New(b.D, worker.Config{Handler: mux, Concurrency: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); !errors.Is(err, dispatcher.ErrStarted) {
		t.Fatalf("second start: %v, want ErrStarted", err)
	}
	task := awaitValue(t, h.started, "handler start")
	cancel()
	if cause := awaitValue(t, h.causes, "handler cancellation"); !errors.Is(cause, context.Canceled) {
		t.Fatalf("cause %v, want the start context's", cause)
	}
	shutdownWorker(t, w)
	if got := b.Task(t, id); got.Status != tasks.StatusPending || got.Fence != task.Fence {
		t.Fatalf("task %s fence %d, want released: pending with fence %d", got.Status, got.Fence, task.Fence)
	}
}

func TestWorkerConcurrencyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	const n, slots = 40, 4
	ids := b.Add(t, "jobs", 0, n)

	var running, peak atomic.Int32
	full := make(chan struct{})
	var fullOnce sync.Once
	var mu sync.Mutex
	seen := make(map[int64]int)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		now := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		if now == slots {
			fullOnce.Do(func() { close(full) })
		}
		// The first handlers wait until all slots run at once, which proves
		// the slots are concurrent; the limit is what the peak checks.
		select {
		case <-full:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(15 * time.Second):
			return nil, errors.New("slots never all ran at once")
		}
		mu.Lock()
		seen[task.ID]++
		mu.Unlock()
		return nil, nil
	})
	w := startWorker(t, b, worker.Config{Handler: mux, Concurrency: slots})
	testenv.Eventually(t, 60*time.Second, "all tasks processed", func() bool {
		st := w.Totals()
		return st.Processed+st.Failed >= n
	})
	shutdownWorker(t, w)

	if st := w.Totals(); st.Processed != n || st.Failed != 0 {
		t.Fatalf("stats %+v, want %d processed, none failed", st, n)
	}
	if p := peak.Load(); p != slots {
		t.Fatalf("at most %d handlers ran at once, want exactly %d", p, slots)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("task %d handled %d times, want once", id, seen[id])
		}
	}
	if done := b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE status = 'done'"); done != n {
		t.Fatalf("%d tasks done, want %d", done, n)
	}
}

func TestWorkerConfig(t *testing.T) {
	t.Parallel()
	d, err := dispatcher.New(nil, nil, dispatcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	nop := worker.HandlerFunc(func(context.Context, *tasks.Task) (any, error) { return nil, nil })
	mux := worker.NewMux()
	mux.Handle("news", nop)
	mux.Handle("sports", nop)

	w, err := worker.New(d, worker.Config{Handler: mux})
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cfg := w.Config()
	if cfg.Concurrency != worker.ConcurrencyDefault || cfg.Wait != worker.WaitDefault ||
		cfg.ShutdownTimeout != worker.ShutdownTimeoutDefault || cfg.RetryBackoff == nil || cfg.Logger == nil {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
	if !slices.Equal(cfg.Categories, []string{"news", "sports"}) {
		t.Fatalf("default categories %v, want the mux's", cfg.Categories)
	}
	host, _ := os.Hostname()
	parts := strings.Split(cfg.ID, ":")
	if len(parts) != 3 || parts[0] != host || parts[1] != strconv.Itoa(os.Getpid()) || len(parts[2]) != 6 {
		t.Fatalf("default id %q, want hostname:pid:<6 random characters>", cfg.ID)
	}
	other, err := worker.New(d, worker.Config{Handler: mux})
	if err != nil {
		t.Fatal(err)
	}
	if other.Config().ID == cfg.ID {
		t.Fatalf("two workers got the same default id %q", cfg.ID)
	}
	if got := (worker.Config{}).WithDefaults().Categories; len(got) != 0 {
		t.Fatalf("categories %v without a mux, want none", got)
	}

	// Holders are "worker:<id>:<slot>", at most 128 characters.
	id119 := strings.Repeat("x", 128-len("worker:")-len(":9"))
	if _, err := worker.New(d, worker.Config{Handler: mux, ID: id119, Concurrency: 10}); err != nil {
		t.Fatalf("id making 128-character holders: %v", err)
	}

	cases := []struct {
		name string
		cfg  worker.Config
		is   error
	}{
		{"no handler", worker.Config{Categories: []string{"news"}}, nil},
		{"no categories without a mux", worker.Config{Handler: nop}, nil},
		{"mux without handlers", worker.Config{Handler: worker.NewMux()}, nil},
		{"category the mux does not handle", worker.Config{Handler: mux, Categories: []string{"news", "weather"}}, worker.ErrNoHandler},
		{"negative wait", worker.Config{Handler: mux, Wait: -time.Second}, nil},
		{"id too long", worker.Config{Handler: mux, ID: id119, Concurrency: 11}, nil},
		{"id not utf-8", worker.Config{Handler: mux, ID: "w\xff"}, nil},
	}
	for _, c := range cases {
		_, err := worker.New(d, c.cfg)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.is)
		}
	}
	if _, err := worker.New(nil, worker.Config{Handler: mux}); err == nil {
		t.Error("nil dispatcher: no error")
	}

	// A worker shut down before it started cannot start.
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("shutdown before start: %v", err)
	}
	if err := w.Start(context.Background()); !errors.Is(err, dispatcher.ErrStopped) {
		t.Fatalf("start after shutdown: %v, want ErrStopped", err)
	}
}

func TestExponentialRetryBackoff(t *testing.T) {
	t.Parallel()
	backoff := worker.ExponentialRetryBackoff(time.Second, 10*time.Minute)
	for _, c := range []struct {
		attempt int
		full    time.Duration
	}{
		{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{10, 512 * time.Second}, {11, 10 * time.Minute}, {100, 10 * time.Minute}, {1 << 30, 10 * time.Minute},
	} {
		var lowest, highest time.Duration = c.full, 0
		for range 500 {
			d := backoff(c.attempt)
			if d < c.full/2 || d >= c.full {
				t.Fatalf("attempt %d: backoff %v outside [%v, %v)", c.attempt, d, c.full/2, c.full)
			}
			lowest, highest = min(lowest, d), max(highest, d)
		}
		// Equal jitter spreads the draws over the range, not on one value.
		if highest-lowest < c.full/8 {
			t.Fatalf("attempt %d: 500 draws within [%v, %v], want them spread over [%v, %v)",
				c.attempt, lowest, highest, c.full/2, c.full)
		}
	}
	if d := worker.ExponentialRetryBackoff(0, time.Minute)(3); d != 0 {
		t.Fatalf("zero base: %v, want 0", d)
	}

	def := worker.Config{}.WithDefaults().RetryBackoff
	for range 100 {
		if d := def(1); d < worker.RetryBackoffBaseDefault/2 || d >= worker.RetryBackoffBaseDefault {
			t.Fatalf("default backoff for attempt 1: %v, want [%v, %v)", d, worker.RetryBackoffBaseDefault/2, worker.RetryBackoffBaseDefault)
		}
	}
}
