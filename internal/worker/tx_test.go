package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// effectsTableSQL is the table of a handler's own writes in these tests: one
// row per write, with the claim it was written under. Nothing in it keeps a
// task to one row: only the fence does.
const effectsTableSQL = `CREATE TABLE effects (
	id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
	task_id BIGINT UNSIGNED NOT NULL,
	fence BIGINT UNSIGNED NOT NULL,
	holder VARCHAR(128) NOT NULL,
	KEY effects_task (task_id)
)`

// pausedStore is the store of a worker process that is paused (a long GC
// pause, SIGSTOP, a frozen VM) while its handlers are not: its renewals never
// reach the database, so its claims expire while its handlers run.
type pausedStore struct{ *store.Store }

func (pausedStore) HeartbeatBatch(context.Context, []tasks.HeartbeatParams) ([]tasks.Renewed, error) {
	return nil, fmt.Errorf("heartbeat batch: %w", syscall.ETIMEDOUT)
}

// writeEffect is a handler's work in its own transaction: its row in
// effects, then the task's outcome with CompleteTx, then the COMMIT. It
// returns CompleteTx's error or the COMMIT's; the transaction is rolled back
// after any error.
func (b *bundle) writeEffect(ctx context.Context, task *tasks.Task, result any) error {
	tx, err := b.DB.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO effects (task_id, fence, holder) VALUES (?, ?, ?)", task.ID, task.Fence, task.Holder); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := worker.CompleteTx(ctx, tx, task, result); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// effectsTable creates the effects table in b's database.
func (b *bundle) effectsTable(t *testing.T) {
	t.Helper()
	if _, err := b.DB.ExecContext(t.Context(), effectsTableSQL); err != nil {
		t.Fatal(err)
	}
}

// effectsOf returns the holders and fences of task id's rows in effects.
func (b *bundle) effectsOf(t *testing.T, id int64) []string {
	t.Helper()
	var rows []string
	if err := b.DB.SelectContext(t.Context(), &rows, "SELECT CONCAT(holder, '@', fence) FROM effects WHERE task_id = ? ORDER BY id", id); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestCompleteTxStaleHandlerNeverCommits: a handler paused past its lease
// (its process paused: no renewal reaches the store) resumes after the
// sweeper recycled its task and another worker claimed and completed it,
// writing its own row in the handler's table in the same transaction as the
// outcome; the stale handler then writes its row and calls CompleteTx, which
// refuses with ErrLeaseLost, so its row never commits: the table has exactly
// one row for the task, written under the fence that completed it. The
// worker that committed its outcome in its transaction writes nothing more
// about it and logs no refusal.
func TestCompleteTxStaleHandlerNeverCommits(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	b.effectsTable(t)
	ids := b.Add(t, "jobs", 0, 1)
	id := ids[0]
	lease := 300 * time.Millisecond
	newDispatcher := func(s dispatcher.Store, lease time.Duration) *dispatcher.Dispatcher {
		d, err := dispatcher.New(s, b.Locks, dispatcher.Config{Lease: lease, PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// The stale executor: it claims the task, then pauses past its lease,
	// ignoring the cancellation of its context, as a paused process does.
	started := make(chan *tasks.Task, 1)
	resume := make(chan struct{})
	staleErr := make(chan error, 1)
	stale := worker.NewMux()
	stale.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		trySend(started, task)
		<-resume
		err := b.writeEffect(context.WithoutCancel(ctx), task, map[string]string{"by": "stale"})
		staleErr <- err
		return nil, err
	})
	startWorkerOn(t, newDispatcher(pausedStore{b.Store}, lease), worker.Config{
		Handler: stale, Concurrency: 1, ID: "stale", TxStore: b.Store, ShutdownTimeout: 100 * time.Millisecond,
	})
	first := awaitValue(t, started, "the stale worker's claim")

	// Its lease passes; the sweeper recycles the task.
	testenv.Eventually(t, 10*time.Second, "the stale claim recycled", func() bool {
		if _, err := b.Store.RecycleExpired(t.Context(), tasks.RecycleParams{}); err != nil {
			t.Fatal(err)
		}
		return b.Task(t, id).Status == tasks.StatusPending
	})

	// Another worker claims and completes it, its row with its outcome.
	var logs logBuffer
	current := worker.NewMux()
	current.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		return nil, b.writeEffect(ctx, task, map[string]string{"by": "current"})
	})
	// Its lease, and its lock's time to live, outlast the test.
	w := startWorkerOn(t, newDispatcher(b.Store, time.Minute), worker.Config{
		Handler: current, Concurrency: 1, ID: "current", TxStore: b.Store,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	testenv.Eventually(t, 10*time.Second, "the task done by the current worker", func() bool {
		return b.Task(t, id).Status == tasks.StatusDone
	})
	done := b.Task(t, id)

	// The stale handler resumes.
	close(resume)
	if err := awaitValue(t, staleErr, "the stale handler's commit"); !errors.Is(err, worker.ErrLeaseLost) || !errors.Is(err, tasks.ErrStale) {
		t.Errorf("the stale handler's CompleteTx: %v, want ErrLeaseLost", err)
	}
	want := []string{done.Holder + "@" + fmt.Sprint(done.Fence)}
	if got := b.effectsOf(t, id); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("effects of the task %v, want only %v: the current claim's (the stale claim had fence %d)", got, want, first.Fence)
	}
	if !strings.HasPrefix(done.Holder, "worker:current:") || done.Fence <= first.Fence {
		t.Fatalf("task done by %s with fence %d, want the current worker's claim after fence %d", done.Holder, done.Fence, first.Fence)
	}
	if n := b.RowCount(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ? AND fence = ? AND holder = ?", id, done.Fence, done.Holder); n != 1 {
		t.Fatalf("%d result rows of the current claim, want 1", n)
	}
	if n := b.RowCount(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", id); n != 1 {
		t.Fatalf("%d result rows, want 1", n)
	}

	// The current worker counted the task done, once, and wrote and logged
	// no refusal of its own outcome.
	testenv.Eventually(t, 5*time.Second, "the current worker's run counted", func() bool {
		return w.Totals().Processed == 1
	})
	if tt := w.Totals(); tt.LeaseLost != 0 || tt.Failed != 0 {
		t.Fatalf("current worker's totals %+v, want one processed, nothing lost or failed", tt)
	}
	// Its claim's lock is given back, as any completion's.
	testenv.Eventually(t, 5*time.Second, "the current claim's lock given back", func() bool {
		n, err := b.RDB.Exists(t.Context(), b.LockKey(id)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if s := logs.String(); strings.Contains(s, "refused") || strings.Contains(s, "lease lost") || !strings.Contains(s, "task done in the handler's transaction") {
		t.Fatalf("current worker's logs:\n%s\nwant the task done in the handler's transaction, no refusal", s)
	}
}

// TestCompleteTxAfterTheHandler: once the handler returns, a transaction that
// committed its outcome ends the run done whatever the handler returned, and
// nothing more is written; one that rolled back leaves the run to the
// handler's return: a result is written as usual, an error retries the task.
func TestCompleteTxAfterTheHandler(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	b.effectsTable(t)
	ins, err := b.D.AddTasks(t.Context(), []tasks.NewTask{
		{Category: "jobs", Title: "rolled back, then success"},
		{Category: "jobs", Title: "rolled back, then an error"},
		{Category: "jobs", Title: "committed, then an error"},
	})
	if err != nil {
		t.Fatal(err)
	}
	byTitle := map[string]int64{}
	for i, title := range []string{"rolled back, then success", "rolled back, then an error", "committed, then an error"} {
		byTitle[title] = ins[i].ID
	}
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		switch {
		case task.Title == "committed, then an error":
			if err := b.writeEffect(ctx, task, map[string]string{"by": "tx"}); err != nil {
				return nil, err
			}
			return nil, errors.New("an error after the commit")
		case task.Attempts > 1:
			return nil, b.writeEffect(ctx, task, map[string]string{"by": "tx"})
		}
		tx, err := b.DB.BeginTxx(ctx, nil)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (task_id, fence, holder) VALUES (?, ?, ?)", task.ID, task.Fence, task.Holder); err != nil {
			return nil, err
		}
		if err := worker.CompleteTx(ctx, tx, task, map[string]string{"by": "tx"}); err != nil {
			return nil, err
		}
		if err := tx.Rollback(); err != nil {
			return nil, err
		}
		if task.Title == "rolled back, then success" {
			return map[string]string{"by": "handler"}, nil
		}
		return nil, errors.New("rolled back")
	})
	w := startWorker(t, b, worker.Config{
		Handler: mux, Concurrency: 3, TxStore: b.Store, RetryBackoff: func(int) time.Duration { return 10 * time.Millisecond },
	})
	testenv.Eventually(t, 15*time.Second, "every task done", func() bool {
		return b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE status = 'done'") == len(ins)
	})
	result := func(id int64) string {
		var r string
		if err := b.DB.GetContext(t.Context(), &r, "SELECT result FROM task_results WHERE task_id = ?", id); err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(r, " ", "")
	}
	for title, c := range map[string]struct {
		result  string
		fence   int64
		effects int
	}{
		"rolled back, then success":  {`{"by":"handler"}`, 1, 0},
		"rolled back, then an error": {`{"by":"tx"}`, 2, 1},
		"committed, then an error":   {`{"by":"tx"}`, 1, 1},
	} {
		id := byTitle[title]
		task := b.Task(t, id)
		if got := result(id); got != c.result || task.Fence != c.fence || len(b.effectsOf(t, id)) != c.effects {
			t.Errorf("%s: result %s at fence %d, effects %v; want %s at fence %d, %d effects",
				title, got, task.Fence, b.effectsOf(t, id), c.result, c.fence, c.effects)
		}
	}
	if tt := w.Totals(); tt.Processed != 3 || tt.Failed != 1 || tt.LeaseLost != 0 {
		t.Errorf("totals %+v, want 3 processed, the rolled back error failed once, nothing lost", tt)
	}
	// The committed run's error was not recorded as a failure.
	if n := b.RowCount(t, "SELECT COUNT(*) FROM task_events WHERE task_id = ? AND kind = 'failed'", byTitle["committed, then an error"]); n != 0 {
		t.Errorf("%d failures of the committed run, want none", n)
	}
}

// TestCompleteTxRefusals: CompleteTx outside a handler's context, for another
// task, or with a result that is not JSON writes nothing and says why.
func TestCompleteTxRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	ids := b.Add(t, "jobs", 0, 1)
	tx, err := b.DB.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := worker.CompleteTx(t.Context(), tx, b.Task(t, ids[0]), nil); !errors.Is(err, tasks.ErrInvalid) {
		t.Fatalf("CompleteTx outside a handler: %v, want ErrInvalid", err)
	}
	errs := make(chan error, 2)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		other := *task
		other.ID++
		errs <- worker.CompleteTx(ctx, tx, &other, nil)
		errs <- worker.CompleteTx(ctx, tx, task, func() {})
		return nil, nil
	})
	startWorker(t, b, worker.Config{Handler: mux, Concurrency: 1, TxStore: b.Store})
	for _, what := range []string{"CompleteTx for another task", "CompleteTx of a result that is not JSON"} {
		if err := awaitValue(t, errs, what); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}
}

// completeTxFaultJobs is how many jobs TestCompleteTxEffectsOnceUnderFaults
// runs: enough for every fault to strike many times, few enough for a
// loaded 2-core machine to run them in well under a minute.
const completeTxFaultJobs = 2000

// dieBeforeCommit is the work of a handler whose process dies between
// CompleteTx and the COMMIT: its row and its outcome are written in its
// transaction, then its connection is cut (KILL, as the server sees a dead
// process's connection), which rolls the transaction back. It reports whether
// CompleteTx had written the outcome.
func (b *bundle) dieBeforeCommit(ctx context.Context, task *tasks.Task) (bool, error) {
	conn, err := b.DB.Connx(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	var connID int64
	if err := tx.GetContext(ctx, &connID, "SELECT CONNECTION_ID()"); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO effects (task_id, fence, holder) VALUES (?, ?, ?)", task.ID, task.Fence, task.Holder); err != nil {
		return false, err
	}
	if err := worker.CompleteTx(ctx, tx, task, nil); err != nil {
		return false, nil
	}
	if _, err := b.DB.ExecContext(ctx, fmt.Sprintf("KILL %d", connID)); err != nil {
		return true, err
	}
	return true, nil
}

// TestCompleteTxEffectsOnceUnderFaults runs completeTxFaultJobs jobs whose
// handlers write a row of their own in the transaction of their outcome
// (CompleteTx), on worker processes beside the sweeper's recycling: a
// process killed with runs in flight (its writes never reach the store;
// some of its runs die between CompleteTx and their COMMIT), a process
// paused (its renewals never reach the store) whose runs sometimes pause
// past their lease and then try to commit as stale executors, a process
// stopped with runs in flight (released), runs whose connection dies
// between CompleteTx and the commit, and runs that roll their transaction
// back and fail once. Then, from the database: every task is
// done, and the handlers' table has exactly one row per task, written under
// the fence that completed it (0 duplicates, 0 missing, 0 stale), and every
// fence is accounted for by exactly one record.
func TestCompleteTxEffectsOnceUnderFaults(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	b.effectsTable(t)
	const n = completeTxFaultJobs
	kOf := make(map[int64]int, n)
	for k := 0; k < n; k += tasks.BatchMax {
		nts := make([]tasks.NewTask, min(tasks.BatchMax, n-k))
		for i := range nts {
			nts[i] = tasks.NewTask{Category: "jobs", Title: fmt.Sprint(k + i), MaxAttempts: 10}
		}
		ins, err := b.D.AddTasks(t.Context(), nts)
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range ins {
			kOf[in.ID] = k + i
		}
	}
	lease := 500 * time.Millisecond
	newDispatcher := func(s dispatcher.Store) *dispatcher.Dispatcher {
		d, err := dispatcher.New(s, b.Locks, dispatcher.Config{Lease: lease, PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix, Batch: 16})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	retrySoon := func(int) time.Duration { return 10 * time.Millisecond }
	result := func(task *tasks.Task) any { return map[string]int64{"fence": task.Fence} }
	var killedMidCommit, cutMidCommit, staleRefused, staleCommitted, rolledBack atomic.Int64
	unexpected := make(chan error, n)

	// The killed process.
	killedStarted := make(chan struct{}, n)
	killed := worker.NewMux()
	var killedRuns atomic.Int64
	killed.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		trySend(killedStarted, struct{}{})
		if killedRuns.Add(1)%2 == 1 {
			written, err := b.dieBeforeCommit(context.WithoutCancel(ctx), task)
			if err != nil {
				trySend(unexpected, fmt.Errorf("task %d dying before its commit: %w", task.ID, err))
			}
			if written {
				killedMidCommit.Add(1)
			}
		}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	zombie := startWorkerOn(t, newDispatcher(killedStore{b.Store}), worker.Config{
		Handler: killed, Concurrency: 6, ID: "killed", TxStore: b.Store, ShutdownTimeout: 100 * time.Millisecond,
	})

	// The paused process.
	paused := worker.NewMux()
	paused.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		if kOf[task.ID]%10 == 3 && task.Attempts == 1 {
			time.Sleep(lease + lease/2)
			err := b.writeEffect(context.WithoutCancel(ctx), task, result(task))
			switch {
			case errors.Is(err, worker.ErrLeaseLost):
				staleRefused.Add(1)
			case err == nil:
				staleCommitted.Add(1)
			}
			return nil, err
		}
		return nil, b.writeEffect(ctx, task, result(task))
	})
	pausedW := startWorkerOn(t, newDispatcher(pausedStore{b.Store}), worker.Config{
		Handler: paused, Concurrency: 8, ID: "paused", TxStore: b.Store, RetryBackoff: retrySoon,
	})

	// The others: some runs roll back and fail once; on "stopped", some
	// first runs are in flight when it stops.
	handler := func(stopping <-chan struct{}, blocked chan struct{}) worker.Handler {
		mux := worker.NewMux()
		mux.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
			k := kOf[task.ID]
			switch {
			case stopping != nil && k%6 == 1 && task.Attempts == 1:
				trySend(blocked, struct{}{})
				<-ctx.Done()
				return nil, context.Cause(ctx)
			case k%13 == 5 && task.Attempts == 1:
				// The connection dies between CompleteTx and the commit.
				written, err := b.dieBeforeCommit(ctx, task)
				if err != nil {
					return nil, err
				}
				if written {
					cutMidCommit.Add(1)
				}
				return nil, errors.New("connection lost before the commit")
			case k%7 == 0 && task.Attempts == 1:
				tx, err := b.DB.BeginTxx(ctx, nil)
				if err != nil {
					return nil, err
				}
				defer func() { _ = tx.Rollback() }()
				if _, err := tx.ExecContext(ctx, "INSERT INTO effects (task_id, fence, holder) VALUES (?, ?, ?)", task.ID, task.Fence, task.Holder); err != nil {
					return nil, err
				}
				if err := worker.CompleteTx(ctx, tx, task, result(task)); err != nil {
					return nil, err
				}
				rolledBack.Add(1)
				return nil, errors.New("rolled back")
			}
			return nil, b.writeEffect(ctx, task, result(task))
		})
		return mux
	}
	blocked := make(chan struct{}, n)
	stopping := make(chan struct{})
	stopped := startWorkerOn(t, newDispatcher(b.Store), worker.Config{
		Handler: handler(stopping, blocked), Concurrency: 8, ID: "stopped", TxStore: b.Store, RetryBackoff: retrySoon,
		ShutdownTimeout: 100 * time.Millisecond,
	})
	var steady []*worker.Worker
	for i := range 2 {
		steady = append(steady, startWorkerOn(t, newDispatcher(b.Store), worker.Config{
			Handler: handler(nil, nil), Concurrency: 8, ID: fmt.Sprintf("steady%d", i), TxStore: b.Store, RetryBackoff: retrySoon,
		}))
	}

	// The sweeper's recycling of expired claims.
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	var sweeps sync.WaitGroup
	sweeps.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
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

	began := time.Now()
	awaitValue(t, killedStarted, "a run on the killed process")
	awaitValue(t, blocked, "a run in flight on the process to stop")
	shutdownWorker(t, zombie)
	close(stopping)
	shutdownWorker(t, stopped)
	testenv.Eventually(t, 120*time.Second, "every task done", func() bool {
		return b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE status <> 'done'") == 0
	})
	took := time.Since(began)
	for _, w := range append(steady, pausedW) {
		shutdownWorker(t, w)
	}
	stopSweep()
	sweeps.Wait()
	close(unexpected)
	for err := range unexpected {
		t.Error(err)
	}

	for _, c := range []struct {
		what  string
		query string
	}{
		{"tasks with more than one row of their handlers", "SELECT COUNT(*) FROM (SELECT task_id FROM effects GROUP BY task_id HAVING COUNT(*) > 1) d"},
		{"tasks without a row of their handlers", "SELECT COUNT(*) FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM effects e WHERE e.task_id = t.id)"},
		{"handlers' rows written under another claim than the one that completed their task",
			"SELECT COUNT(*) FROM effects e JOIN task_results r ON r.task_id = e.task_id WHERE e.fence <> r.fence OR e.holder <> r.holder"},
		{"handlers' rows of a fence not the task's last", "SELECT COUNT(*) FROM effects e JOIN tasks t ON t.id = e.task_id WHERE e.fence <> t.fence"},
		{"tasks with other than one result", "SELECT COUNT(*) FROM tasks t WHERE (SELECT COUNT(*) FROM task_results r WHERE r.task_id = t.id) <> 1"},
	} {
		if got := b.RowCount(t, c.query); got != 0 {
			t.Errorf("%d %s, want 0", got, c.what)
		}
	}
	if got := staleCommitted.Load(); got != 0 {
		t.Errorf("%d stale runs committed their effects, want 0", got)
	}
	checked, bad := b.FenceAccounting(t)
	if len(bad) > 0 {
		t.Errorf("%d of %d fences not accounted for by exactly one record, first %v", len(bad), checked, bad[:min(len(bad), 10)])
	}
	// The faults happened.
	for _, c := range []struct {
		what string
		n    int64
	}{
		{"runs of the killed process that died between CompleteTx and the commit", killedMidCommit.Load()},
		{"runs whose connection died between CompleteTx and the commit", cutMidCommit.Load()},
		{"stale runs refused", staleRefused.Load()},
		{"runs rolled back", rolledBack.Load()},
		{"runs released at a shutdown", int64(b.RowCount(t, "SELECT COUNT(*) FROM task_events WHERE kind = 'released' AND detail = 'shutdown'"))},
		{"claims of the killed process expired", int64(b.RowCount(t, "SELECT COUNT(*) FROM task_events WHERE kind IN ('recycled', 'expired') AND holder LIKE 'worker:killed:%'"))},
		{"claims of the paused process expired", int64(b.RowCount(t, "SELECT COUNT(*) FROM task_events WHERE kind IN ('recycled', 'expired') AND holder LIKE 'worker:paused:%'"))},
	} {
		if c.n == 0 {
			t.Errorf("no %s", c.what)
		}
	}
	t.Logf("%d jobs done in %v: %d rows of their handlers; between CompleteTx and the commit %d runs died with their process and %d lost their connection; %d stale runs refused, %d rolled back; %d fences accounted for",
		n, took.Round(time.Millisecond), b.RowCount(t, "SELECT COUNT(*) FROM effects"), killedMidCommit.Load(), cutMidCommit.Load(),
		staleRefused.Load(), rolledBack.Load(), checked)
}

// TestCompleteTxHoldsTheClaim: from CompleteTx to its commit, the task's row
// is the handler's transaction's, so the worker renews that claim no more:
// a transaction held past the lease still commits, its handler is not
// cancelled, and the renewals of the worker's other claims, which would
// wait for that row, go on.
func TestCompleteTxHoldsTheClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: workerFastPoll})
	b.effectsTable(t)
	ins, err := b.D.AddTasks(t.Context(), []tasks.NewTask{
		{Category: "jobs", Title: "slow commit", Priority: 2}, {Category: "jobs", Title: "long run", Priority: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	lease := 300 * time.Millisecond
	d, err := dispatcher.New(b.Store, b.Locks, dispatcher.Config{Lease: lease, PollInterval: 50 * time.Millisecond, KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	mux := worker.NewMux()
	mux.HandleFunc("jobs", func(ctx context.Context, task *tasks.Task) (any, error) {
		if task.Title == "long run" {
			select {
			case <-time.After(3 * lease):
				errs <- nil
				return nil, nil
			case <-ctx.Done():
				errs <- fmt.Errorf("the long run: %w", context.Cause(ctx))
				return nil, context.Cause(ctx)
			}
		}
		tx, err := b.DB.BeginTxx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (task_id, fence, holder) VALUES (?, ?, ?)", task.ID, task.Fence, task.Holder); err != nil {
			return nil, err
		}
		if err := worker.CompleteTx(ctx, tx, task, nil); err != nil {
			return nil, err
		}
		time.Sleep(2 * lease) // the row held past the lease
		err = tx.Commit()
		if err != nil {
			err = fmt.Errorf("the slow commit: %w (cause %v)", err, context.Cause(ctx))
		}
		errs <- err
		return nil, err
	})
	w := startWorkerOn(t, d, worker.Config{Handler: mux, Concurrency: 2, TxStore: b.Store})
	for range 2 {
		if err := awaitValue(t, errs, "a run's end"); err != nil {
			t.Error(err)
		}
	}
	testenv.Eventually(t, 5*time.Second, "both tasks done", func() bool {
		return b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE status = 'done'") == 2
	})
	if n := len(b.effectsOf(t, ins[0].ID)); n != 1 {
		t.Errorf("%d rows of the slow commit, want 1", n)
	}
	if tt := w.Totals(); tt.Processed != 2 || tt.LeaseLost != 0 || tt.Failed != 0 {
		t.Errorf("totals %+v, want both processed, nothing lost", tt)
	}
}
