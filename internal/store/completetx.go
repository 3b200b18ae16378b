package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Tx is a transaction of a caller's on the store's database, as CompleteTx
// takes it: *sql.Tx and *sqlx.Tx implement it. It is an alias of an
// interface literal, so that a package that declares the same literal (the
// worker, which does not import the store) names the same type.
type Tx = interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	Commit() error
	Rollback() error
}

// sessionSQL reads what CompleteTx checks of a caller's connection: its time
// zone and its database.
const sessionSQL = "SELECT @@session.time_zone, COALESCE(DATABASE(), '')"

// utcZone is the session time zone Connector sets.
const utcZone = "+00:00"

// databaseSQL reads the store's database.
const databaseSQL = "SELECT COALESCE(DATABASE(), '')"

// submittedSQL says whether a claim ended with a result: task_results is
// keyed by (task_id, fence), one accepted submission per claim.
const submittedSQL = "SELECT EXISTS (SELECT 1 FROM task_results WHERE task_id = ? AND fence = ?)"

// CompleteTx ends the live claim of o, a successful outcome (Result set), in
// tx, a transaction of the caller's on the store's database, with the
// statements of Complete (see completeSQL), not another copy of them: the
// result row (for a claim ClaimBatch made without a 'claimed' event, with the
// claim's time and no event; else with the 'submitted' event), the outbox's
// record when webhooks subscribe to it, and the task done or, with stages, at
// its next stage. Its first statement after the instant is Complete's locking
// read of the claim's row, by id with o's fence and holder, assigned and its
// lease not passed at the instant: the row then stays locked until tx ends,
// so nothing can end or take over the claim in between (a recycle, a
// takeover, a force release wait for tx), and the outcome commits with tx's
// own writes or not at all. The instant is the database clock's when
// CompleteTx runs, not the COMMIT's.
//
// It returns an error wrapping ErrStale, having written nothing in tx, when
// the claim is not live; an error wrapping ErrInvalid for a bad o (no
// Result, a result the store refuses) or a tx whose connection the store
// cannot use (a session time zone other than UTC, another database: open the
// handle with Open or Connector); and a statement's error otherwise (a
// deadlock or a lock wait timeout wraps ErrBusy: the server may have rolled
// tx back). The caller rolls tx back after any error. Its statements run one
// at a time in tx (so the connection needs no multiStatements): six round
// trips, seven with the outbox's record, the first run of a store one more.
func (s *Store) CompleteTx(ctx context.Context, tx Tx, o tasks.Outcome) (*tasks.Ended, error) {
	fail := func(err error) (*tasks.Ended, error) {
		return nil, fmt.Errorf("complete task %d in transaction: %w", o.TaskID, err)
	}
	if o.Result == nil {
		return fail(fmt.Errorf("%w: no result", tasks.ErrInvalid))
	}
	if err := s.checkSession(ctx, tx); err != nil {
		return fail(err)
	}
	s.onGalera(ctx) // known, before completeSQL asks
	query, args, dead, err := s.completeSQL([]tasks.Outcome{o}, traceOf(ctx))
	if err != nil {
		return fail(err)
	}
	// The batch's own transaction is the caller's.
	body, ok1 := strings.CutPrefix(query, "START TRANSACTION;\n")
	body, ok2 := strings.CutSuffix(body, "COMMIT")
	if !ok1 || !ok2 {
		return fail(errors.New("the completion's statements do not open and close a transaction"))
	}
	a := newCompleteAnswer([]tasks.Outcome{o}, dead)
	for stmt := range strings.SplitSeq(strings.TrimSuffix(body, ";\n"), ";\n") {
		n := strings.Count(stmt, "?")
		if n > len(args) {
			return fail(errors.New("the completion's statements and arguments do not match"))
		}
		var err error
		if strings.HasPrefix(stmt, "SELECT") {
			// The report, which locks the row of a live claim.
			err = queryScan(ctx, tx, stmt, args[:n], a.scan)
			if err == nil && len(a.byID) == 0 {
				return fail(tasks.ErrStale)
			}
		} else {
			_, err = tx.ExecContext(ctx, stmt, args[:n]...)
		}
		if err != nil {
			if mysqlErrorIs(err, erLockDeadlock, erLockWaitTimeout) {
				err = fmt.Errorf("%w: %w", tasks.ErrBusy, err)
			}
			return fail(refusedValue(err))
		}
		args = args[n:]
	}
	return a.results()[0].Ended, nil
}

// queryScan runs query in tx and hands its rows to scan.
func queryScan(ctx context.Context, tx Tx, query string, args []any, scan func(*sqlx.Rows) error) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := scan(&sqlx.Rows{Rows: rows}); err != nil {
		return err
	}
	return rows.Close()
}

// checkSession returns an error wrapping ErrInvalid unless tx's connection is
// one the store's statements can run on: the session in UTC (NOW(3) is the
// instant every lease is compared with, and the times written), on the
// store's database.
func (s *Store) checkSession(ctx context.Context, tx Tx) error {
	var zone, db string
	err := queryScan(ctx, tx, sessionSQL, nil, func(rows *sqlx.Rows) error {
		if !rows.Next() {
			return cmp.Or(rows.Err(), sql.ErrNoRows)
		}
		return rows.Scan(&zone, &db)
	})
	if err != nil {
		return fmt.Errorf("read the session: %w", err)
	}
	own, err := s.database(ctx)
	if err != nil {
		return err
	}
	switch {
	case zone != utcZone:
		return fmt.Errorf("%w: the transaction's session time zone is %q, not UTC (%s): open its handle with OpenMySQL or MySQLConnector", tasks.ErrInvalid, zone, utcZone)
	case db != own:
		return fmt.Errorf("%w: the transaction is on database %q, the store's is %q", tasks.ErrInvalid, db, own)
	}
	return nil
}

// database returns the name of the store's database, asking the server once.
func (s *Store) database(ctx context.Context) (string, error) {
	if name := s.dbName.Load(); name != nil {
		return *name, nil
	}
	var name string
	if err := s.db.GetContext(ctx, &name, databaseSQL); err != nil {
		return "", fmt.Errorf("read the store's database: %w", err)
	}
	s.dbName.Store(&name)
	return name, nil
}

// Submitted reports whether the claim of task taskID with fence fence ended
// with a committed result (its task_results row): the outcome a CompleteTx
// wrote in a caller's transaction committed with it. One read, on the
// primary.
func (s *Store) Submitted(ctx context.Context, taskID, fence int64) (bool, error) {
	var ok bool
	if err := s.db.GetContext(ctx, &ok, submittedSQL, taskID, fence); err != nil {
		return false, fmt.Errorf("read the result of task %d fence %d: %w", taskID, fence, err)
	}
	return ok, nil
}
