package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// The hot writes (a claim of a pending task, a submit, a heartbeat) are statement
// batches: one transaction, "START TRANSACTION; ...; COMMIT", sent as one
// multi-statement query, so that a write and its audit records cost one round trip
// instead of one per statement plus BEGIN and COMMIT. The batch's SELECTs report what
// happened. The batches of concurrent claimants share one such transaction (see
// grouped, in group.go).
//
// Each write in a batch is guarded by the state of the rows, never by ROW_COUNT() of
// the statement before: a server whose client went away mid-batch (a canceled context,
// a crashed process) may run the rest of the batch to its COMMIT, and ROW_COUNT() is
// then not to be trusted, so only the report uses it.

// batch runs query, a statement batch as described above, on one connection and hands
// the rows of its one SELECT to scan. Every statement runs on the server whatever scan
// does; batch then reads the rest of the results, so an error in a statement after the
// SELECT (the COMMIT, say) is returned too.
//
// When a statement fails (a duplicate key, a deadlock, a lost connection), the server
// skips the rest of the batch, so the transaction the batch opened may still be open
// on the connection: batch rolls it back, and if that fails it discards the connection
// rather than hand it back to the pool inside a transaction. A deadlock victim is run
// again, as inTx does; scan must therefore set, not accumulate. The arguments of a
// batch are its caller's values, so a value the server refuses is an error wrapping
// ErrInvalid (see refusedValue).
func (s *Store) batch(ctx context.Context, query string, args []any, scan func(*sqlx.Rows) error) error {
	return refusedValue(s.retryDeadlocks(ctx, func() error { return s.batchOnce(ctx, query, args, scan) }))
}

func (s *Store) batchOnce(ctx context.Context, query string, args []any, scan func(*sqlx.Rows) error) error {
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	query, commitApart := s.galeraBatch(query)
	err = runBatch(ctx, conn, query, args, scan, commitApart)
	if err == nil && commitApart {
		_, err = conn.ExecContext(ctx, "COMMIT")
	}
	if errors.Is(err, errShortAnswer) {
		if commitApart {
			// The COMMIT was not sent: the transaction is rolled back below,
			// and run again as a deadlock victim's.
			err = fmt.Errorf("%w (%w)", errAborted, err)
		} else {
			// The COMMIT was in the batch, and its answer did not come: the
			// outcome is unknown, and the connection is not to be trusted.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			// The caller's time is up: discard the connection, which rolls the
			// transaction back on the server, rather than spend more time on
			// a server that may have stopped answering.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			return err
		}
		// Bounded: a server that stopped answering must not hold the caller.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if _, rerr := conn.ExecContext(rctx, "ROLLBACK"); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		return err
	}
	return nil
}

// rollbackTimeout bounds the ROLLBACK after a failed batch; when it runs out, the
// connection is discarded, which rolls the transaction back on the server too.
const rollbackTimeout = 2 * time.Second

// errShortAnswer is the error of a batch whose answer ended, with no error,
// before every result the batch's statements owe: a statement after the last
// result did not run, or its result was lost.
var errShortAnswer = errors.New("the batch's answer is missing results")

// runBatch sends query and scans its answer. With inTxChecked (a batch of
// galeraBatch), the answer must end with inTxCheck's row, and one that says the
// transaction is not open any more is errAborted.
func runBatch(ctx context.Context, conn *sqlx.Conn, query string, args []any, scan func(*sqlx.Rows) error, inTxChecked bool) error {
	rows, err := conn.QueryxContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := scan(rows); err != nil {
		return err
	}
	aborted, checked := false, false
	for rows.NextResultSet() {
		if cols, err := rows.Columns(); err == nil && len(cols) == 1 && cols[0] == "taskd_in_tx" {
			for rows.Next() {
				var in bool
				if err := rows.Scan(&in); err != nil {
					return err
				}
				aborted, checked = aborted || !in, true
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	switch {
	case aborted:
		return errAborted
	case inTxChecked && !checked:
		// Never COMMIT a batch whose last statements may not have run.
		return fmt.Errorf("%w: no transaction check", errShortAnswer)
	}
	return nil
}

// scanOne scans the first row of a batch's SELECT into dest and sets found.
func scanOne(dest any, found *bool) func(*sqlx.Rows) error {
	return func(rows *sqlx.Rows) error {
		*found = rows.Next()
		if !*found {
			return rows.Err()
		}
		return rows.StructScan(dest)
	}
}

// scanByID returns a scan that reads the rows of a batch's SELECT into byID,
// keyed by id. It empties byID first: a batch that runs again (a deadlock
// victim) scans again.
func scanByID[R any](byID map[int64]R, id func(*R) int64) func(*sqlx.Rows) error {
	return func(rows *sqlx.Rows) error {
		clear(byID)
		for rows.Next() {
			var r R
			if err := rows.StructScan(&r); err != nil {
				return err
			}
			byID[id(&r)] = r
		}
		return rows.Err()
	}
}
