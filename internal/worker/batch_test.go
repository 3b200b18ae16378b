package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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

// gatedCompletes is a store whose Complete waits for gate to open (closed),
// counting the calls and their members.
type gatedCompletes struct {
	*store.Store
	gate           chan struct{}
	calls, members atomic.Int64
	sizes          chan int
}

func (s *gatedCompletes) Complete(ctx context.Context, os []tasks.Outcome) ([]tasks.Completed, error) {
	<-s.gate
	s.calls.Add(1)
	s.members.Add(int64(len(os)))
	trySend(s.sizes, len(os))
	return s.Store.Complete(ctx, os)
}

func (s *gatedCompletes) CompleteAndClaim(ctx context.Context, os []tasks.Outcome, ps []tasks.ClaimParams) ([]tasks.Completed, []tasks.ClaimResult, error) {
	<-s.gate
	s.calls.Add(1)
	s.members.Add(int64(len(os)))
	trySend(s.sizes, len(os))
	return s.Store.CompleteAndClaim(ctx, os, ps)
}

// A stale member of a completion batch is refused alone: the others commit
// in the same transaction.
func TestWorkerCompletionBatchRefusesStaleMemberAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &gatedCompletes{Store: b.Store, gate: make(chan struct{}), sizes: make(chan int, 100)}
	close(store.gate)
	// A long lease: no renewal runs during the test, so the revoked claim is
	// found out only by its completion.
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
		return map[string]int64{"id": task.ID}, nil
	})
	// Three outcomes are written together: the batch size, and a flush
	// interval far longer than the test.
	w := startWorkerOn(t, d, worker.Config{
		Handler: mux, Concurrency: 3, BatchSize: 3, FlushInterval: time.Hour,
	})
	running := make(map[int64]*tasks.Task)
	for range 3 {
		task := awaitValue(t, started, "handler start")
		running[task.ID] = task
	}
	revoked := ids[1]
	if _, err := b.Store.ForceRelease(context.Background(), revoked); err != nil {
		t.Fatal(err)
	}
	// Not claimed again during the test.
	if _, err := b.DB.ExecContext(context.Background(), "UPDATE tasks SET run_after = NOW(3) + INTERVAL 1 HOUR WHERE id = ?", revoked); err != nil {
		t.Fatal(err)
	}
	close(release)
	if n := awaitValue(t, store.sizes, "completion batch"); n != 3 {
		t.Fatalf("first completion batch of %d members, want all 3", n)
	}
	testenv.Eventually(t, 10*time.Second, "outcomes recorded", func() bool {
		st := w.Totals()
		return st.Processed+st.LeaseLost >= 3
	})
	if st := w.Totals(); st.Processed != 2 || st.LeaseLost != 1 || st.Failed != 0 {
		t.Fatalf("stats %+v, want 2 processed and 1 lease lost", st)
	}
	if n := store.calls.Load(); n != 1 {
		t.Fatalf("%d completion transactions, want 1 (the stale member refused inside it)", n)
	}
	for _, id := range ids {
		got := b.Task(t, id)
		results := b.RowCount(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", id)
		if id == revoked {
			if got.Status != tasks.StatusPending || results != 0 {
				t.Fatalf("revoked task %d: %s with %d results, want pending with none", id, got.Status, results)
			}
			continue
		}
		if got.Status != tasks.StatusDone || got.Fence != running[id].Fence || results != 1 {
			t.Fatalf("task %d: %s fence %d with %d results, want done at fence %d with 1", id, got.Status, got.Fence, results, running[id].Fence)
		}
	}
	if n := d.Stats().RefusedWrites; n != 1 {
		t.Fatalf("%d writes refused as stale, want 1 (the revoked member)", n)
	}
	testenv.Eventually(t, 10*time.Second, "locks given back", func() bool {
		return b.RDB.Exists(context.Background(), b.LockKey(ids[0]), b.LockKey(ids[1]), b.LockKey(ids[2])).Val() == 0
	})
}

// While the completer is behind (MaxBacklog outcomes wait), the worker claims
// nothing new: claims in flight stay bounded by the slots, the batch being
// written and the backlog.
func TestWorkerBackPressure(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	store := &gatedCompletes{Store: b.Store, gate: make(chan struct{}), sizes: make(chan int, 100)}
	d, err := dispatcher.New(store, b.Locks, dispatcher.Config{PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	const n, slots, batch, backlog = 40, 2, 1, 1
	// The most a worker may hold: a handler per slot, the batches being
	// written, and the backlog (which can grow past MaxBacklog by the
	// outcomes of handlers that were running when it filled).
	bound := int64(slots + worker.Writers(worker.Config{Concurrency: slots})*batch + backlog + slots)
	b.Add(t, "jobs", 0, n)
	var calls atomic.Int64
	over := make(chan struct{})
	var overOnce sync.Once
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(context.Context, *tasks.Task) (any, error) {
		if calls.Add(1) > bound {
			overOnce.Do(func() { close(over) })
		}
		return nil, nil
	})
	parked := make(chan struct{}, 1)
	w := startWorkerOn(t, d, worker.Config{
		Handler: mux, Concurrency: slots, BatchSize: batch, MaxBacklog: backlog, FlushInterval: -1,
	}, func(w *worker.Worker) {
		w.OnBackPressure(func() {
			select {
			case parked <- struct{}{}:
			default:
			}
		})
	})
	// Cleanups run last first: the gate opens before the worker stops.
	openGate := sync.OnceFunc(func() { close(store.gate) })
	t.Cleanup(openGate)
	// The completer blocks on its first write, so the claim loop must stop
	// claiming for back-pressure, and stays stopped while the gate is shut.
	// Without back-pressure it would go on claiming the whole pool and never
	// stop.
	select {
	case <-parked:
	case <-over:
		t.Fatalf("%d handlers ran while the completer was blocked, want at most %d", calls.Load(), bound)
	case <-time.After(time.Minute):
		t.Fatal("the claim loop did not stop for back-pressure while the completer was blocked")
	}
	if c := calls.Load(); c > bound {
		t.Fatalf("%d handlers ran while the completer was blocked, want at most %d", c, bound)
	}
	if c := calls.Load(); c < slots {
		t.Fatalf("%d handlers ran before back-pressure, want at least %d", c, slots)
	}
	openGate()
	testenv.Eventually(t, 60*time.Second, "all tasks processed", func() bool { return w.Totals().Processed >= n })
	if c := calls.Load(); c != n {
		t.Fatalf("handlers ran %d times for %d tasks", c, n)
	}
	if m := store.members.Load(); m != n {
		t.Fatalf("%d outcomes written, want %d", m, n)
	}
}

// batchProbe records the members of each renewal batch and their answers.
type batchProbe struct {
	*store.Store
	mu      sync.Mutex
	batches [][]tasks.HeartbeatParams
	results chan tasks.Renewed
}

func (p *batchProbe) HeartbeatBatch(ctx context.Context, ps []tasks.HeartbeatParams) ([]tasks.Renewed, error) {
	res, err := p.Store.HeartbeatBatch(ctx, ps)
	p.mu.Lock()
	p.batches = append(p.batches, slices.Clone(ps))
	p.mu.Unlock()
	for _, r := range res {
		trySend(p.results, r)
	}
	return res, err
}

// One renewal batch renews every claim the worker holds; a lease lost in it
// cancels exactly that claim's handler.
func TestWorkerBatchedRenewalCancelsOnlyTheLostHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	probe := &batchProbe{Store: b.Store, results: make(chan tasks.Renewed, 1000)}
	d, err := dispatcher.New(probe, b.Locks, dispatcher.Config{
		Lease: 3 * time.Second, PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix,
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := b.Add(t, "jobs", 0, 3)
	var mu sync.Mutex
	causes := make(map[int64]error)
	started := make(chan *tasks.Task, 10)
	cancelled := make(chan int64, 10)
	finish := make(chan struct{})
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		trySend(started, task)
		select {
		case <-ctx.Done():
			mu.Lock()
			causes[task.ID] = context.Cause(ctx)
			mu.Unlock()
			trySend(cancelled, task.ID)
			return nil, context.Cause(ctx)
		case <-finish:
			return nil, nil
		}
	})
	w := startWorkerOn(t, d, worker.Config{Handler: mux, Concurrency: 3})
	for range 3 {
		awaitValue(t, started, "handler start")
	}
	// Renewals of all three claims, in one batch.
	testenv.Eventually(t, 30*time.Second, "a renewal batch of all three claims", func() bool {
		probe.mu.Lock()
		defer probe.mu.Unlock()
		return slices.ContainsFunc(probe.batches, func(ps []tasks.HeartbeatParams) bool { return len(ps) == 3 })
	})
	lost := ids[0]
	if _, err := b.DB.ExecContext(context.Background(), "UPDATE tasks SET run_after = NOW(3) + INTERVAL 1 HOUR WHERE id = ?", lost); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.ForceRelease(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	if id := awaitValue(t, cancelled, "cancellation of the revoked claim's handler"); id != lost {
		t.Fatalf("handler of task %d cancelled, want only %d's", id, lost)
	}
	mu.Lock()
	cause := causes[lost]
	mu.Unlock()
	if !errors.Is(cause, worker.ErrLeaseLost) || !errors.Is(cause, tasks.ErrStale) {
		t.Fatalf("cause %v, want ErrLeaseLost from a stale renewal", cause)
	}
	// The others are renewed on: wait for two more accepted renewals of them
	// after the loss, then let them finish.
	for drained := false; !drained; {
		select {
		case <-probe.results:
		default:
			drained = true
		}
	}
	accepted := 0
	for accepted < 2 {
		if r := awaitValue(t, probe.results, "a renewal after the loss"); r.Err == nil {
			accepted++
		}
	}
	select {
	case id := <-cancelled:
		t.Fatalf("handler of task %d cancelled too", id)
	default:
	}
	close(finish)
	testenv.Eventually(t, 10*time.Second, "the others processed", func() bool { return w.Totals().Processed == 2 })
	if st := w.Totals(); st.LeaseLost != 1 || st.Failed != 0 {
		t.Fatalf("stats %+v, want 1 lease lost and nothing failed", st)
	}
	for _, id := range ids[1:] {
		if got := b.Task(t, id); got.Status != tasks.StatusDone {
			t.Fatalf("task %d %s, want done", id, got.Status)
		}
	}
}

// Two worker processes (each its own dispatcher and candidate pool) burn
// down one pool in batches; the database shows each task done once, by one
// claim, with one result.
func TestWorkersBatchNoDoubleExecution(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	const n = 300
	ids := b.Add(t, "jobs", 0, n)
	var mu sync.Mutex
	seen := make(map[int64]int)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(_ context.Context, task *tasks.Task) (any, error) {
		mu.Lock()
		seen[task.ID]++
		mu.Unlock()
		return map[string]int64{"fence": task.Fence}, nil
	})
	var workers []*worker.Worker
	for i := range 2 {
		d, err := dispatcher.New(b.Store, b.Locks, dispatcher.Config{PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix, Batch: 16})
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, startWorkerOn(t, d, worker.Config{
			Handler: mux, Concurrency: 12, BatchSize: 8, ID: fmt.Sprintf("w%d", i),
		}))
	}
	testenv.Eventually(t, 60*time.Second, "all tasks processed", func() bool {
		return workers[0].Totals().Processed+workers[1].Totals().Processed >= n
	})
	for _, w := range workers {
		shutdownWorker(t, w)
	}
	if got := workers[0].Totals().Processed + workers[1].Totals().Processed; got != n {
		t.Fatalf("workers processed %d, want %d", got, n)
	}
	if workers[0].Totals().Processed == 0 || workers[1].Totals().Processed == 0 {
		t.Logf("one worker processed everything: %+v %+v", workers[0].Totals(), workers[1].Totals())
	}
	// From the database: each task done, exactly one result, for the task's
	// final fence, and that fence's submit recorded once (its 'submitted'
	// event, or the result itself when it stands for the claim's events);
	// every fence accounted for by one claim record.
	var bad []struct {
		ID int64 `db:"id"`
	}
	if err := b.DB.SelectContext(context.Background(), &bad, `SELECT t.id FROM tasks t
		WHERE t.status <> 'done'
		   OR (SELECT COUNT(*) FROM task_results r WHERE r.task_id = t.id) <> 1
		   OR (SELECT COUNT(*) FROM task_results r WHERE r.task_id = t.id AND r.fence = t.fence) <> 1
		   OR (SELECT COUNT(*) FROM task_events e WHERE e.task_id = t.id AND e.kind = 'submitted')
		      + (SELECT COUNT(*) FROM task_results r WHERE r.task_id = t.id AND r.claimed_at IS NOT NULL) <> 1
		   OR (SELECT COUNT(*) FROM task_events e WHERE e.task_id = t.id AND e.kind = 'submitted' AND e.fence = t.fence)
		      + (SELECT COUNT(*) FROM task_results r WHERE r.task_id = t.id AND r.claimed_at IS NOT NULL AND r.fence = t.fence) <> 1`); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("%d tasks break the invariant (done once, one result and one submit for the final fence), first %d", len(bad), bad[0].ID)
	}
	if n, fs := b.FenceAccounting(t); len(fs) > 0 || n < len(ids) {
		t.Fatalf("%d fences checked, %d not accounted for once: %v", n, len(fs), fs)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("task %d handled %d times, want once", id, seen[id])
		}
	}
}

// claimSizes records the members of each ClaimBatch.
type claimSizes struct {
	*store.Store
	mu    sync.Mutex
	sizes []int
}

func (s *claimSizes) ClaimBatch(ctx context.Context, ps []tasks.ClaimParams) ([]tasks.ClaimResult, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(ps))
	s.mu.Unlock()
	return s.Store.ClaimBatch(ctx, ps)
}

func (s *claimSizes) CompleteAndClaim(ctx context.Context, os []tasks.Outcome, ps []tasks.ClaimParams) ([]tasks.Completed, []tasks.ClaimResult, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(ps))
	s.mu.Unlock()
	return s.Store.CompleteAndClaim(ctx, os, ps)
}

func (s *claimSizes) all() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sizes)
}

// Slots that free up together share one claim: while fewer than half of
// them are free and others still busy, the claim loop waits for more (here
// for as long as it takes) instead of claiming for the first one free.
func TestWorkerClaimsForSlotsFreedTogether(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	store := &claimSizes{Store: b.Store}
	d, err := dispatcher.New(store, b.Locks, dispatcher.Config{PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	const slots, n = 8, 16
	b.Add(t, "jobs", 0, n)
	started := make(chan struct{}, n)
	release := make(chan struct{})
	var calls atomic.Int64
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(context.Context, *tasks.Task) (any, error) {
		if calls.Add(1) <= slots {
			started <- struct{}{}
			<-release
		}
		return nil, nil
	})
	w, err := worker.New(d, worker.Config{
		Handler: mux, Concurrency: slots, BatchSize: slots, ShutdownTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.SetClaimGather(time.Minute)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdownWorker(t, w) })
	for range slots {
		<-started
	}
	if got := store.all(); !slices.Equal(got, []int{slots}) {
		t.Fatalf("claim batches %v before any slot freed, want one of %d", got, slots)
	}
	close(release)
	testenv.Eventually(t, 60*time.Second, "all tasks processed", func() bool { return w.Totals().Processed >= n })
	got := store.all()
	if len(got) < 2 || got[1] < slots/2 {
		t.Fatalf("claim batches %v: the first after the slots freed has %v members, want at least %d", got, got[1:], slots/2)
	}
	if c := calls.Load(); c != n {
		t.Fatalf("handlers ran %d times for %d tasks", c, n)
	}
}

// A slot free alone while the others stay busy is still claimed for, once
// the claim loop's short wait for others passed.
func TestWorkerClaimsForALoneFreeSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	const slots, blocked, n = 4, 3, 6
	b.Add(t, "jobs", 0, n)
	release := make(chan struct{})
	var calls atomic.Int64
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(context.Context, *tasks.Task) (any, error) {
		if calls.Add(1) <= blocked {
			<-release
		}
		return nil, nil
	})
	w := startWorker(t, b, worker.Config{Handler: mux, Concurrency: slots, BatchSize: slots})
	// Cleanups run last first: the handlers return before the worker stops.
	t.Cleanup(func() { close(release) })
	testenv.Eventually(t, 60*time.Second, "the tasks not blocked processed", func() bool { return w.Totals().Processed >= n-blocked })
	if r := w.Totals().Running; r != blocked {
		t.Fatalf("%d handlers running, want the %d blocked", r, blocked)
	}
}

// enteredCompletes reports the members of each Complete as it starts, then
// holds it until gate closes.
type enteredCompletes struct {
	*store.Store
	gate    chan struct{}
	entered chan int
}

func (s *enteredCompletes) Complete(ctx context.Context, os []tasks.Outcome) ([]tasks.Completed, error) {
	s.entered <- len(os)
	<-s.gate
	return s.Store.Complete(ctx, os)
}

// While the first writer's batch is in flight, the second writes only a
// full batch (BatchSize outcomes): it never splits what the first would
// write in one transaction.
func TestWorkerSecondWriterWritesFullBatches(t *testing.T) {
	t.Parallel()
	if worker.Writers(worker.Config{Concurrency: 1}) < 2 {
		t.Skip("one writer")
	}
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	store := &enteredCompletes{Store: b.Store, gate: make(chan struct{}), entered: make(chan int, 100)}
	d, err := dispatcher.New(store, b.Locks, dispatcher.Config{PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	const n, batch = 8, 3
	b.Add(t, "jobs", 0, n)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(context.Context, *tasks.Task) (any, error) { return nil, nil })
	// One slot: outcomes arrive one by one, and the first writer writes
	// each at once (no flush interval), until its write is held.
	// The claims carry no outcomes: the writers alone write them.
	w := startWorkerOn(t, d, worker.Config{
		Handler: mux, Concurrency: 1, BatchSize: batch, MaxBacklog: 2 * batch, FlushInterval: -1,
	}, (*worker.Worker).WriteApart)
	openGate := sync.OnceFunc(func() { close(store.gate) })
	t.Cleanup(openGate)
	var first int
	select {
	case first = <-store.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no completion started")
	}
	select {
	case second := <-store.entered:
		if second != batch {
			t.Fatalf("the second writer wrote %d outcomes while the first wrote %d, want a full batch of %d", second, first, batch)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the second writer wrote nothing while the first held %d outcomes and the backlog filled", first)
	}
	openGate()
	testenv.Eventually(t, 60*time.Second, "all tasks processed", func() bool { return w.Totals().Processed >= n })
}

// countedWrites counts the store's completions alone and those joined to a
// claim.
type countedWrites struct {
	*store.Store
	alone, joint atomic.Int64
}

func (s *countedWrites) Complete(ctx context.Context, os []tasks.Outcome) ([]tasks.Completed, error) {
	s.alone.Add(1)
	return s.Store.Complete(ctx, os)
}

func (s *countedWrites) CompleteAndClaim(ctx context.Context, os []tasks.Outcome, ps []tasks.ClaimParams) ([]tasks.Completed, []tasks.ClaimResult, error) {
	if len(os) > 0 && len(ps) > 0 {
		s.joint.Add(1)
	}
	return s.Store.CompleteAndClaim(ctx, os, ps)
}

// With SlotsUntilWritten, a slot is taken until its outcome is written, and
// a category's MaxInFlight equal to the slots leaves no room while they are
// all taken; still the claim loop carries the waiting outcomes and claims
// for their slots in the same transaction. With one slot, every claim but
// the first carries the outcome before it.
func TestWorkerLimitedClaimCarriesOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll, Store: store.Config{Workflows: map[string]tasks.Workflow{"jobs": {MaxInFlight: 1}}}})
	st := &countedWrites{Store: b.Store}
	d, err := dispatcher.New(st, b.Locks, dispatcher.Config{PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	b.Add(t, "jobs", 0, n)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(context.Context, *tasks.Task) (any, error) { return nil, nil })
	// The outcomes wait for the claim up to a second: long enough that
	// only a claim that cannot carry them leaves them to the writer.
	w := startWorkerOn(t, d, worker.Config{
		Handler: mux, Concurrency: 1, BatchSize: 8, FlushInterval: time.Second, SlotsUntilWritten: true,
	})
	testenv.Eventually(t, 60*time.Second, "all tasks processed", func() bool { return w.Totals().Processed >= n })
	if j := st.joint.Load(); j < n-1 {
		t.Errorf("%d of %d outcomes written with the next claim (%d alone), want all but the last", j, n, st.alone.Load())
	}
	if a := w.Totals().LeaseLost; a != 0 {
		t.Errorf("%d leases lost", a)
	}
}
