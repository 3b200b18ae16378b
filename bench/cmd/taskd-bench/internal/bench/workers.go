package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// workerResult is what every no-op handler returns, committed as the task's
// result by both worker strategies.
const workerResult = `{"ok":true}`

// workerRun is what background workers did in one timed window.
type workerRun struct {
	elapsed time.Duration
	jobs    int64 // tasks whose result was committed in the timed window
	// counted is the jobs done when the slots had stopped (the counters
	// are read then, so that no job is in flight).
	counted    int64
	errors     int64
	firstError string
}

// workerPool is background workers taking tasks of categories in slots.
type workerPool interface {
	// start starts the slots; jobs then reports the results committed.
	start(ctx context.Context) error
	jobs() int64
	// stop stops the slots and waits for them; the error is the first a
	// slot met, if any.
	stop(ctx context.Context) (errors int64, first string, err error)
}

// runWorkers starts p, lets it run for d (or until ctx ends), stops it and
// then calls counted: the counters are read with no job in flight.
func runWorkers(ctx context.Context, p workerPool, d time.Duration, counted func()) (workerRun, error) {
	var wr workerRun
	j0 := p.jobs()
	start := time.Now()
	if err := p.start(ctx); err != nil {
		return wr, err
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	wr.jobs = p.jobs() - j0
	wr.elapsed = time.Since(start)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var err error
	wr.errors, wr.firstError, err = p.stop(sctx)
	wr.counted = p.jobs() - j0
	counted()
	return wr, err
}

// taskdWorkers is taskd's worker.Worker with a handler that does nothing
// but return a small result.
type taskdWorkers struct{ w *worker.Worker }

func newTaskdWorkers(d *dispatcher.Dispatcher, slots int, categories []string) (*taskdWorkers, error) {
	return newTaskdWorkersWith(d, slots, categories, worker.HandlerFunc(func(context.Context, *tasks.Task) (any, error) {
		return map[string]bool{"ok": true}, nil
	}))
}

// newTaskdWorkersWith is newTaskdWorkers with a handler of the caller's.
func newTaskdWorkersWith(d *dispatcher.Dispatcher, slots int, categories []string, h worker.Handler) (*taskdWorkers, error) {
	w, err := worker.New(d, worker.Config{
		Concurrency: slots,
		Handler:     h,
		Categories:  categories,
		ID:          "bench",
		Wait:        time.Second,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	return &taskdWorkers{w: w}, nil
}

func (t *taskdWorkers) start(ctx context.Context) error { return t.w.Start(ctx) }
func (t *taskdWorkers) jobs() int64                     { return t.w.Totals().Processed }

func (t *taskdWorkers) stop(ctx context.Context) (int64, string, error) {
	err := t.w.Stop(ctx)
	st := t.w.Totals()
	n := st.Failed + st.LeaseLost
	first := ""
	if n > 0 {
		first = fmt.Sprintf("%d failed, %d leases lost", st.Failed, st.LeaseLost)
	}
	return n, first, err
}

// skipLockedWorkers is a worker loop in River's model on the same schema:
// each slot claims one task in a transaction of its own (SELECT ... FOR
// UPDATE SKIP LOCKED LIMIT 1, UPDATE to assigned, COMMIT), runs the no-op
// handler, then completes the task in a second transaction (fenced UPDATE to
// done and the result row). River itself fetches several jobs per query and
// completes them in batches; this loop is the one-job-at-a-time shape of
// that model, the same unit of work taskd's slots do.
type skipLockedWorkers struct {
	db         *sqlx.DB
	slots      int
	categories []string
	lease      time.Duration

	cancel     context.CancelFunc
	wg         sync.WaitGroup
	done       atomic.Int64
	errs       atomic.Int64
	firstOnce  sync.Once
	firstError string
}

// skipLockedIdle is how long a slot waits when no task is pending (River's
// fetch poll interval is of this order).
const skipLockedIdle = 50 * time.Millisecond

const workerCompleteSQL = `UPDATE tasks SET status = 'done', done_at = NOW(3), lease_expires_at = NULL
WHERE id = ? AND fence = ? AND status = 'assigned' AND holder = ?`

const workerResultSQL = `INSERT INTO task_results (task_id, fence, holder, editor_id, result) VALUES (?, ?, ?, NULL, ?)`

func (s *skipLockedWorkers) start(ctx context.Context) error {
	ctx, s.cancel = context.WithCancel(ctx)
	claimer := &skipLocked{db: s.db, lease: s.lease}
	for i := range s.slots {
		e := &editor{holder: "worker:bench-skip-locked:" + strconv.Itoa(i), categories: s.categories}
		s.wg.Go(func() {
			for ctx.Err() == nil {
				r, err := claimer.claim(ctx, e)
				if errors.Is(err, errNoTask) {
					sleepCtx(ctx, skipLockedIdle)
					continue
				}
				if err == nil {
					err = s.complete(ctx, e, r)
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					s.fail(err)
					sleepCtx(ctx, 10*time.Millisecond)
					continue
				}
				s.done.Add(1)
			}
		})
	}
	return nil
}

// complete completes r, and runs the transaction again when InnoDB chose it
// as a deadlock's victim, as the store does: a completion's index moves and a
// claim's SKIP LOCKED scan of the same index can meet that way.
func (s *skipLockedWorkers) complete(ctx context.Context, e *editor, r ref) error {
	var err error
	for range deadlockAttempts {
		if err = s.completeOnce(ctx, e, r); !isDeadlock(err) {
			return err
		}
	}
	return err
}

// deadlockAttempts bounds how often the baseline runs a transaction that
// InnoDB chose as a deadlock's victim.
const deadlockAttempts = 5

// isDeadlock reports whether err is InnoDB's deadlock error (1213).
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

func (s *skipLockedWorkers) completeOnce(ctx context.Context, e *editor, r ref) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	res, err := tx.ExecContext(ctx, workerCompleteSQL, r.id, r.fence, e.holder)
	if err != nil {
		return fmt.Errorf("complete task %d: %w", r.id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("complete task %d: %w", r.id, tasks.ErrStale)
	}
	if _, err := tx.ExecContext(ctx, workerResultSQL, r.id, r.fence, e.holder, workerResult); err != nil {
		return fmt.Errorf("complete task %d: %w", r.id, err)
	}
	return tx.Commit()
}

func (s *skipLockedWorkers) fail(err error) {
	s.errs.Add(1)
	s.firstOnce.Do(func() { s.firstError = err.Error() })
}

func (s *skipLockedWorkers) jobs() int64 { return s.done.Load() }

func (s *skipLockedWorkers) stop(context.Context) (int64, string, error) {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	return s.errs.Load(), s.firstError, nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
