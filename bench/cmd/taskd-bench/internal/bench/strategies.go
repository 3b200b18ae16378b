package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// Strategy names.
const (
	StrategyTaskd      = "taskd"
	StrategySeedNaive  = "seed-naive"
	StrategySkipLocked = "mysql-skip-locked"
)

// errNoTask means the pool has nothing claimable for the editor.
var errNoTask = errors.New("no task")

// ref names a claim.
type ref struct {
	id, fence int64
}

// editor is one simulated editor.
type editor struct {
	id         int64
	holder     string
	categories []string
	token      string // API token, in http mode
	// dispatcher is which of a spread strategy's dispatchers serves the
	// editor.
	dispatcher int
}

// strategy is one way of handing tasks out. Every strategy's submit writes the
// same durable result: the task done (fenced UPDATE) and a task_results row.
type strategy interface {
	// newEditor creates an editor taking tasks from categories.
	newEditor(ctx context.Context, name string, categories []string) (*editor, error)
	// claim claims the editor's next task, or returns errNoTask.
	claim(ctx context.Context, e *editor) (ref, error)
	// submit commits the editor's claim r. A strategy that finds the next
	// assignment in the same call returns it, with how long finding it took
	// after the commit.
	submit(ctx context.Context, e *editor, r ref) (next *ref, nextTook time.Duration, err error)
	// counts returns lock conflicts and refused claims so far (-1: unknown).
	counts() (conflicts, refused int64)
	close(ctx context.Context) error
}

// sqlEditors creates editors in the store, as every in-process strategy does.
type sqlEditors struct{ store *store.Store }

func (s sqlEditors) newEditor(ctx context.Context, name string, categories []string) (*editor, error) {
	token, hash := tasks.NewToken()
	e, err := s.store.CreateEditor(ctx, tasks.CreateEditorParams{Name: name, Categories: categories, TokenHash: hash})
	if err != nil {
		return nil, fmt.Errorf("create editor %s: %w", name, err)
	}
	return &editor{id: e.ID, holder: e.Holder(), categories: categories, token: token}, nil
}

const (
	// benchClaimSQL is the claim UPDATE of the baselines: a fenced move from
	// pending to assigned with the lease from the database clock.
	benchClaimSQL = `UPDATE tasks SET status = 'assigned', fence = fence + 1, holder = ?,
	assigned_at = NOW(3), lease_expires_at = NOW(3) + INTERVAL ? MICROSECOND, attempts = attempts + 1
WHERE id = ? AND fence = ? AND status = 'pending'`
	benchSubmitSQL = `UPDATE tasks SET status = 'done', done_at = NOW(3), lease_expires_at = NULL
WHERE id = ? AND fence = ? AND status = 'assigned' AND holder = ?`
	benchResultSQL = `INSERT INTO task_results (task_id, fence, holder, editor_id, result) VALUES (?, ?, ?, ?, '{}')`
)

// inList returns "?, ?, ..." for n values.
func inList(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

func catArgs(cats []string) []any {
	out := make([]any, len(cats))
	for i, c := range cats {
		out[i] = c
	}
	return out
}

// submitSQL is the baselines' submit: fenced UPDATE to done and the result
// row, in one transaction.
func submitSQL(ctx context.Context, db *sqlx.DB, e *editor, r ref) (err error) {
	// InnoDB may choose the submit as a deadlock's victim (its result's
	// foreign key takes a shared lock on the task's row while claims lock
	// others): it runs again, as the store's does.
	for range deadlockAttempts {
		if err = submitOnce(ctx, db, e, r); !isDeadlock(err) {
			return err
		}
	}
	return err
}

// submitOnce is one transaction of submitSQL.
func submitOnce(ctx context.Context, db *sqlx.DB, e *editor, r ref) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	res, err := tx.ExecContext(ctx, benchSubmitSQL, r.id, r.fence, e.holder)
	if err != nil {
		return fmt.Errorf("submit task %d: %w", r.id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("submit task %d: %w", r.id, tasks.ErrStale)
	}
	if _, err := tx.ExecContext(ctx, benchResultSQL, r.id, r.fence, e.holder, e.id); err != nil {
		return fmt.Errorf("submit task %d: %w", r.id, err)
	}
	return tx.Commit()
}

// naive is the seed algorithm as the classic article writes it: read the
// candidates, SET NX their locks one at a time in order until one sticks, then
// update the row.
type naive struct {
	sqlEditors
	db        *sqlx.DB
	rdb       *redis.Client
	prefix    string
	lease     time.Duration
	conflicts atomic.Int64
	refused   atomic.Int64
}

const naiveCandidatesSQL = `SELECT id, fence FROM tasks
WHERE pool_status = 'pending' AND category IN (%s) ORDER BY priority DESC, due_order, id LIMIT 16`

func (s *naive) key(id int64) string { return s.prefix + "task:" + strconv.FormatInt(id, 10) }

func (s *naive) claim(ctx context.Context, e *editor) (ref, error) {
	q := fmt.Sprintf(naiveCandidatesSQL, inList(len(e.categories)))
	for {
		var cands []tasks.Candidate
		if err := s.db.SelectContext(ctx, &cands, q, catArgs(e.categories)...); err != nil {
			return ref{}, fmt.Errorf("candidates: %w", err)
		}
		if len(cands) == 0 {
			return ref{}, errNoTask
		}
		for _, c := range cands {
			ok, err := s.rdb.SetNX(ctx, s.key(c.ID), e.holder, s.lease).Result()
			if err != nil {
				return ref{}, fmt.Errorf("lock task %d: %w", c.ID, err)
			}
			if !ok {
				s.conflicts.Add(1)
				continue
			}
			res, err := s.db.ExecContext(ctx, benchClaimSQL, e.holder, s.lease.Microseconds(), c.ID, c.Fence)
			if err != nil {
				return ref{}, fmt.Errorf("claim task %d: %w", c.ID, err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				return ref{c.ID, c.Fence + 1}, nil
			}
			s.refused.Add(1)
			if err := s.rdb.Del(ctx, s.key(c.ID)).Err(); err != nil {
				return ref{}, fmt.Errorf("unlock task %d: %w", c.ID, err)
			}
		}
	}
}

func (s *naive) submit(ctx context.Context, e *editor, r ref) (*ref, time.Duration, error) {
	if err := submitSQL(ctx, s.db, e, r); err != nil {
		return nil, 0, err
	}
	return nil, 0, s.rdb.Del(ctx, s.key(r.id)).Err()
}

func (s *naive) counts() (int64, int64)      { return s.conflicts.Load(), s.refused.Load() }
func (s *naive) close(context.Context) error { return nil }

// skipLocked claims with one transaction: SELECT ... FOR UPDATE SKIP LOCKED
// LIMIT 1 and the UPDATE. No Redis.
type skipLocked struct {
	sqlEditors
	db    *sqlx.DB
	lease time.Duration
}

const skipLockedSQL = `SELECT id, fence FROM tasks
WHERE pool_status = 'pending' AND category IN (%s) ORDER BY priority DESC, due_order, id LIMIT 1 FOR UPDATE SKIP LOCKED`

// claim claims one task, and runs the transaction again when InnoDB chose it
// as a deadlock's victim, as the store does.
func (s *skipLocked) claim(ctx context.Context, e *editor) (r ref, err error) {
	for range deadlockAttempts {
		if r, err = s.claimOnce(ctx, e); !isDeadlock(err) {
			return r, err
		}
	}
	return r, err
}

func (s *skipLocked) claimOnce(ctx context.Context, e *editor) (ref, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return ref{}, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	var c tasks.Candidate
	err = tx.GetContext(ctx, &c, fmt.Sprintf(skipLockedSQL, inList(len(e.categories))), catArgs(e.categories)...)
	if errors.Is(err, sql.ErrNoRows) {
		return ref{}, errNoTask
	}
	if err != nil {
		return ref{}, fmt.Errorf("candidate: %w", err)
	}
	res, err := tx.ExecContext(ctx, benchClaimSQL, e.holder, s.lease.Microseconds(), c.ID, c.Fence)
	if err != nil {
		return ref{}, fmt.Errorf("claim task %d: %w", c.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ref{}, fmt.Errorf("claim task %d: locked row changed: %w", c.ID, tasks.ErrStale)
	}
	if err := tx.Commit(); err != nil {
		return ref{}, fmt.Errorf("claim task %d: %w", c.ID, err)
	}
	return ref{c.ID, c.Fence + 1}, nil
}

func (s *skipLocked) submit(ctx context.Context, e *editor, r ref) (*ref, time.Duration, error) {
	return nil, 0, submitSQL(ctx, s.db, e, r)
}

func (s *skipLocked) counts() (int64, int64)      { return 0, 0 }
func (s *skipLocked) close(context.Context) error { return nil }

// inproc is the dispatcher as built, in this process. Its Submit commits and
// claims the next task in one call, as the HTTP API's submit does; the store
// wrapper notes when the commit ended, so the time spent finding the next
// assignment is measured apart.
type inproc struct {
	sqlEditors
	d     *dispatcher.Dispatcher
	store *store.Store
	locks *locker.Client
}

func newInproc(store *store.Store, rdb *redis.Client, prefix string, lease time.Duration) (*inproc, error) {
	locks := locker.New(rdb)
	d, err := dispatcher.New(timedStore{store}, locks, dispatcher.Config{
		Lease:     lease,
		KeyPrefix: prefix,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	return &inproc{sqlEditors: sqlEditors{store}, d: d, store: store, locks: locks}, nil
}

func (s *inproc) claimant(e *editor) dispatcher.Claimant {
	return dispatcher.Claimant{Holder: e.holder, EditorID: e.id, Categories: e.categories}
}

func (s *inproc) claim(ctx context.Context, e *editor) (ref, error) {
	c, err := s.d.Next(ctx, s.claimant(e), 0)
	if errors.Is(err, dispatcher.ErrNoTask) {
		return ref{}, errNoTask
	}
	if err != nil {
		return ref{}, err
	}
	return ref{c.Task.ID, c.Fence}, nil
}

func (s *inproc) submit(ctx context.Context, e *editor, r ref) (*ref, time.Duration, error) {
	var committed time.Time
	ctx = context.WithValue(ctx, commitTimeKey{}, &committed)
	next, err := s.d.Submit(ctx, s.claimant(e), dispatcher.ClaimRef{TaskID: r.id, Fence: r.fence}, json.RawMessage(`{}`))
	if err != nil || next == nil {
		return nil, 0, err
	}
	if committed.IsZero() {
		// Neither store call ran (the next claim was one already held):
		// nothing to time.
		return &ref{next.Task.ID, next.Fence}, -1, nil
	}
	return &ref{next.Task.ID, next.Fence}, time.Since(committed), nil
}

func (s *inproc) counts() (int64, int64) {
	return s.d.Stats().Conflicts, s.d.Stats().RefusedClaims
}
func (s *inproc) close(context.Context) error { return nil }

// commitTimeKey carries a *time.Time that timedStore sets where a submit's
// next claim starts: when Submit returns (the claim follows), or when
// SubmitAndClaim is sent (the claim goes in the submit's own transaction, so
// the editor waits for all of it).
type commitTimeKey struct{}

// timedStore is the store, noting where a submit's next claim starts.
type timedStore struct{ *store.Store }

var _ dispatcher.Store = timedStore{}

func (s timedStore) Submit(ctx context.Context, p tasks.SubmitParams) (*tasks.Ended, error) {
	ended, err := s.Store.Submit(ctx, p)
	if t, ok := ctx.Value(commitTimeKey{}).(*time.Time); ok {
		*t = time.Now()
	}
	return ended, err
}

func (s timedStore) SubmitAndClaim(ctx context.Context, sp tasks.SubmitParams, cp tasks.ClaimParams) (*tasks.Handover, error) {
	if t, ok := ctx.Value(commitTimeKey{}).(*time.Time); ok {
		*t = time.Now()
	}
	return s.Store.SubmitAndClaim(ctx, sp, cp)
}
