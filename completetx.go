package taskd

import (
	"context"
	"database/sql"

	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// Tx is a transaction of the caller's on the engine's database, as InsertTx,
// InsertManyTx and CompleteTx take it: *sql.Tx and *sqlx.Tx implement it
// (a *sql.DB or *sql.Conn does not: it must be a transaction). Begin it on
// the handle given to WithDB, or on another handle of the same database
// opened with OpenMySQL or MySQLConnector (CompleteTx refuses a session whose
// time zone is not UTC or whose database is another).
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	Commit() error
	Rollback() error
}

// CompleteTx commits a handler's outcome with the handler's own writes: in
// tx, a transaction of the handler's on the engine's database, it writes
// what the engine writes when the handler returns result (the task done, or
// at its next stage; its result row, events and webhook records, as for any
// success), fenced on the handler's claim. It first locks the task's row
// with the claim's fence and holder, still assigned and its lease not
// passed, so either the claim is the current one and stays so until tx ends
// (a recycle, a takeover or a force release waits for tx), and the outcome
// commits with tx's other writes or not at all; or it is not, and CompleteTx
// writes nothing and returns an error wrapping ErrLeaseLost: the handler
// rolls tx back, so that none of its writes commit, and returns. A handler
// whose lease passed while it was paused (a stale executor) therefore never
// commits its writes once another claim has run the task. On Galera, where a
// row lock holds off only its own node's transactions, a takeover on another
// node after CompleteTx commits first and tx's Commit then fails
// certification (MySQL error 1213): none of tx's writes commit either.
//
// ctx is the handler's (or derived from it), t its task (job.Task for a
// typed job) and result encoded as a Handler's result is. Call it last in
// tx, then commit at once and return: from CompleteTx until tx ends, the
// task's row is locked and the claim is not renewed. It returns an error
// wrapping ErrInvalid for a ctx that is not a handler's of this engine, another task, or a
// result the store refuses; and the database's error otherwise. After any
// error, roll tx back. The statements run one at a time in tx: six round trips (seven with
// webhooks subscribed to submits), the first call of an engine one more.
//
// When the handler returns, the engine reads whether tx committed the
// outcome (one read). If it did, the task is done whatever the handler
// returns, and nothing more is written. If tx rolled back, the handler's
// return decides as for any handler: an error retries the task after a
// backoff (or makes it dead), and a nil error completes it with the result
// returned, written by the engine as usual (without tx's writes). So
// return the error of Commit.
func CompleteTx(ctx context.Context, tx Tx, t *tasks.Task, result any) error {
	return worker.CompleteTx(ctx, tx, t, result)
}
