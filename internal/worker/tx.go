package worker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

// Tx is a transaction of a handler's own on the engine's database, as
// CompleteTx takes it: *sql.Tx and *sqlx.Tx implement it. It is the same
// type as the store's Tx (an alias of the same interface literal).
type Tx = interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	Commit() error
	Rollback() error
}

// TxStore is what CompleteTx needs of the store; *store.Store implements it.
type TxStore interface {
	// CompleteTx writes a successful outcome in tx, fenced: it locks the
	// claim's row with its fence and holder, assigned and its lease not
	// passed, or refuses it (tasks.ErrStale) writing nothing.
	CompleteTx(ctx context.Context, tx Tx, o tasks.Outcome) (*tasks.Ended, error)
	// Submitted reports whether a claim ended with a committed result.
	Submitted(ctx context.Context, taskID, fence int64) (bool, error)
}

// txRunKey is the key of a run's *txRun in its handler's context.
type txRunKey struct{}

// txRun is what a handler's context carries of its run for CompleteTx: the
// claim, and the outcome written in a transaction of the handler's.
type txRun struct {
	w      *Worker
	ref    dispatcher.ClaimRef
	holder string

	mu    sync.Mutex
	ended *tasks.Ended // the last CompleteTx's; nil when none wrote
}

// written returns the claim's end as the last CompleteTx wrote it, or nil.
func (r *txRun) written() *tasks.Ended {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// CompleteTx writes the outcome of the handler's claim of t, done with
// result (encoded as a Handler's result is), in tx, a transaction of the
// handler's own on the engine's database, fenced: it first locks the task's
// row with the claim's fence and holder, assigned and its lease not passed,
// then writes what the worker writes for a success (see TxStore). The row
// stays locked until tx ends, so the outcome and tx's other writes commit
// together or not at all, and no other claim of the task can commit
// anything in between. From CompleteTx on, the worker renews the claim no
// more (the locked row needs no lease), and its lease passing cancels
// nothing.
//
// ctx must be the handler's (or one derived from it, context.WithoutCancel
// included), and t its task. It returns an error wrapping ErrLeaseLost (and
// tasks.ErrStale) when the claim is no longer the current one, having
// written nothing; one wrapping tasks.ErrInvalid for a ctx that is not a
// handler's of a worker with a TxStore, another task, or a result that is
// not JSON or that the store refuses; and the store's error otherwise. After
// any error the handler rolls tx back.
//
// When the handler returns, the worker asks the store whether the outcome
// committed (one read): if it did, the run is done, whatever the handler
// returned, and the worker writes nothing more; if not (tx rolled back),
// the handler's return decides as for any run: its result is written as
// usual, its error retries the task.
func CompleteTx(ctx context.Context, tx Tx, t *tasks.Task, result any) error {
	r, _ := ctx.Value(txRunKey{}).(*txRun)
	switch {
	case r == nil:
		return fmt.Errorf("complete in transaction: %w: ctx is not a handler's of a worker with a TxStore", tasks.ErrInvalid)
	case t == nil || t.ID != r.ref.TaskID:
		return fmt.Errorf("complete in transaction: %w: not the task of the handler's claim, task %d", tasks.ErrInvalid, r.ref.TaskID)
	case tx == nil:
		return fmt.Errorf("complete task %d in transaction: %w: no transaction", t.ID, tasks.ErrInvalid)
	}
	raw, err := resultJSON(result)
	if err != nil {
		return fmt.Errorf("complete task %d in transaction: %w: result: %w", t.ID, tasks.ErrInvalid, err)
	}
	o := tasks.Outcome{TaskID: r.ref.TaskID, Fence: r.ref.Fence, Holder: r.holder, Result: raw}
	ended, err := r.w.cfg.TxStore.CompleteTx(ctx, tx, o)
	switch {
	case errors.Is(err, tasks.ErrStale):
		return fmt.Errorf("%w: %w", ErrLeaseLost, err)
	case err != nil:
		return err
	}
	r.mu.Lock()
	r.ended = ended
	r.mu.Unlock()
	r.w.leases.hold(r.ref)
	return nil
}

// committedInTx ends a run whose handler wrote its outcome in a transaction
// of its own (CompleteTx) when that committed: it counts the task done,
// gives the claim's lock back and reports true. When the outcome did not
// commit (the transaction rolled back), or the store cannot tell, it
// reports false and the run ends as any other. handlerErr is what the
// handler returned.
func (w *Worker) committedInTx(ctx context.Context, r *txRun, task *tasks.Task, log *runLog, span trace.Span, handlerErr error) bool {
	ended := r.written()
	if ended == nil {
		return false
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), workerFinishTimeout)
	defer cancel()
	ok, err := w.cfg.TxStore.Submitted(cctx, r.ref.TaskID, r.ref.Fence)
	if err != nil {
		log.get().WarnContext(ctx, "read whether the handler's transaction committed its outcome", "err", err)
		return false
	}
	if !ok {
		if w.log.Enabled(ctx, slog.LevelDebug) {
			log.get().DebugContext(ctx, "the handler's transaction did not commit its outcome", "handler_err", handlerErr)
		}
		return false
	}
	w.out.settled(nil)
	w.leases.remove(r.ref)
	w.processed.Add(1)
	w.meter.ended(ctx, task.Category, RunDone)
	if handlerErr != nil {
		log.get().WarnContext(ctx, "handler error ignored: its transaction committed the outcome", "err", handlerErr)
	} else if w.log.Enabled(ctx, slog.LevelDebug) {
		log.get().DebugContext(ctx, "task done in the handler's transaction", "status", ended.Status)
	}
	w.d.EndedApart(ctx, span, ended)
	span.SetAttributes(attrOutcome.String(string(ended.Status)))
	endSpan(span, handlerErr)
	w.d.ReleaseLock(cctx, r.ref.TaskID, r.holder)
	return true
}

// txRunOf returns the run's *txRun for a worker with a TxStore, and ctx with
// it for the handler; nil and ctx without.
func (w *Worker) txRunOf(ctx context.Context, ref dispatcher.ClaimRef, holder string) (*txRun, context.Context) {
	if w.cfg.TxStore == nil {
		return nil, ctx
	}
	r := &txRun{w: w, ref: ref, holder: holder}
	return r, context.WithValue(ctx, txRunKey{}, r)
}
