package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/taskd/taskd/tasks"
)

// Querier runs the statements of an insert: the store's own transaction
// (Insert) or a caller's (InsertIn); *sql.Tx and *sqlx.Tx satisfy it.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// The session's time zone around InsertIn: the column defaults
// (CURRENT_TIMESTAMP(3)) and NOW(3) must be UTC instants, as on the store's
// own connections (see Connector).
const (
	sessionTimeZoneSQL = `SELECT @@SESSION.time_zone`
	utcTimeZoneSQL     = `SET time_zone = '+00:00'`
	setTimeZoneSQL     = `SET time_zone = '%s'` // a name checked by timeZoneName
)

// timeZoneName is what a session's time_zone may be for InsertIn to put it
// back: an offset, SYSTEM, or a zone's name.
var timeZoneName = regexp.MustCompile(`^[A-Za-z0-9_+:/-]{1,64}$`)

// taskTimeText is the layout of a new task's times sent as text (InsertIn):
// the caller's connection may convert a time.Time to another zone.
const taskTimeText = "2006-01-02 15:04:05.000"

// InsertIn inserts ts as Insert does, in tx, a transaction of the caller on
// the store's database, and returns what it did with each task, in input
// order: nothing of it is seen outside tx until the caller commits, and a
// rollback leaves nothing. Invalid tasks return an error wrapping ErrInvalid,
// and nothing is written in tx.
//
// InsertIn makes one attempt: what Insert starts over for (a concurrent insert
// committed one of the keys first, InnoDB picked tx as a deadlock victim, a
// lock wait timed out) cannot be retried inside the caller's transaction, and
// returns an error wrapping ErrBusy: the caller rolls tx back (a deadlock has
// rolled it back already) and runs its transaction again.
//
// The statements run with the session's time zone UTC, as on the store's own
// connections: when tx's session has another, InsertIn sets UTC and puts the
// session's back before it returns. Round trips: that read, the same as one
// attempt of Insert, and the two SETs when the zone is not UTC.
func (s *Store) InsertIn(ctx context.Context, tx Querier, ts []tasks.NewTask) ([]tasks.Inserted, error) {
	if len(ts) == 0 {
		return []tasks.Inserted{}, nil
	}
	in, err := s.prepareInsert(ctx, ts)
	if err != nil {
		return nil, err
	}
	for i := range in.rows {
		r := &in.rows[i]
		if t, ok := r.runAfter.(time.Time); ok {
			r.runAfter = t.Format(taskTimeText)
		}
		if t, ok := r.dueAt.(time.Time); ok {
			r.dueAt = t.Format(taskTimeText)
		}
	}
	restore, err := utcSession(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("insert tasks in the caller's transaction: %w", err)
	}
	out := make([]tasks.Inserted, len(ts))
	err = s.insertTx(ctx, tx, in, out)
	if rerr := restore(); err == nil && rerr != nil {
		err = fmt.Errorf("restore the session's time zone: %w", rerr)
	}
	if err != nil {
		if insertConflict(err) {
			s.lockConflicts.Add(1)
			err = fmt.Errorf("%w (roll the transaction back and run it again): %w", tasks.ErrBusy, err)
		}
		return nil, fmt.Errorf("insert tasks in the caller's transaction: %w", refusedValue(err))
	}
	s.insertedKeys(ts)
	return out, nil
}

// utcSession sets the time zone of tx's session to UTC unless it is, and
// returns the function that puts it back.
func utcSession(ctx context.Context, tx Querier) (restore func() error, err error) {
	var zone string
	if err := tx.QueryRowContext(ctx, sessionTimeZoneSQL).Scan(&zone); err != nil {
		return nil, fmt.Errorf("read the session's time zone: %w", err)
	}
	if zone == "+00:00" {
		return func() error { return nil }, nil
	}
	if !timeZoneName.MatchString(zone) {
		return nil, fmt.Errorf("the session's time zone %q is not one taskd can put back: use UTC ('+00:00')", zone)
	}
	if _, err := tx.ExecContext(ctx, utcTimeZoneSQL); err != nil {
		return nil, fmt.Errorf("set the session's time zone: %w", err)
	}
	return func() error {
		// Even once ctx has ended: the session is the caller's.
		_, err := tx.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(setTimeZoneSQL, zone))
		return err
	}, nil
}

// The statements of a CommitWaiter.
const (
	// awaitCommitSQL is a locking read of a task another transaction may
	// have inserted: it waits until that transaction ends (the row's
	// implicit lock), then finds the row if it committed and none if it
	// rolled back. Autocommit: the shared lock lasts the statement.
	awaitCommitSQL = `SELECT id FROM tasks FORCE INDEX (PRIMARY) WHERE id = ? LOCK IN SHARE MODE`
	// awaitLockWaitSQL makes a wait short (1 s, MySQL's least), keeping
	// the session's own value; awaitRestoreSQL puts it back.
	awaitLockWaitSQL = `SET @taskd_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = 1`
	awaitRestoreSQL  = `SET SESSION innodb_lock_wait_timeout = @taskd_lock_wait, @taskd_lock_wait = NULL`
)

// commitWaiterCloseTimeout bounds putting a CommitWaiter's session back.
const commitWaiterCloseTimeout = 2 * time.Second

// ErrStillOpen is returned by CommitWaiter.Await when the transaction it
// waits on is still open at the end of its wait.
var ErrStillOpen = errors.New("the inserting transaction is still open")

// CommitWaiter waits for other transactions to end, on one connection of the
// store's pool which it holds until Close. It is not safe for concurrent use.
type CommitWaiter struct {
	conn *sql.Conn
}

// NewCommitWaiter takes a connection from the store's pool (waiting for one
// as long as ctx lets it) and sets it up for Await.
func (s *Store) NewCommitWaiter(ctx context.Context) (*CommitWaiter, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("commit waiter: %w", err)
	}
	w := &CommitWaiter{conn: conn}
	if _, err := conn.ExecContext(ctx, awaitLockWaitSQL); err != nil {
		w.discard()
		return nil, fmt.Errorf("commit waiter: %w", err)
	}
	return w, nil
}

// Await waits until the transaction that inserted task id ends, for at most
// a second (one lock wait), and reports whether the task is there then: true
// when that transaction committed (or had committed before), false when it
// rolled back. It returns an error wrapping ErrStillOpen when the transaction
// is still open after the second: call again to wait more. On any other error
// (ctx's, when ctx ends first) the connection is closed and the waiter
// unusable. Nothing is locked once Await has returned.
func (w *CommitWaiter) Await(ctx context.Context, id int64) (committed bool, err error) {
	if w.conn == nil {
		return false, errors.New("await commit: the waiter is closed")
	}
	var got int64
	err = w.conn.QueryRowContext(ctx, awaitCommitSQL, id).Scan(&got)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case mysqlErrorIs(err, erLockWaitTimeout) && ctx.Err() == nil:
		return false, fmt.Errorf("await commit of task %d: %w", id, ErrStillOpen)
	default:
		w.discard()
		return false, fmt.Errorf("await commit of task %d: %w", id, err)
	}
}

// Close gives the connection back to the pool with its lock wait timeout
// restored, or closes it when that fails. A second Close does nothing.
func (w *CommitWaiter) Close() {
	if w.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitWaiterCloseTimeout)
	defer cancel()
	if _, err := w.conn.ExecContext(ctx, awaitRestoreSQL); err != nil {
		w.discard()
		return
	}
	_ = w.conn.Close()
	w.conn = nil
}

// discard closes the waiter's connection instead of giving it back: its
// session may be waiting or keep the short lock wait timeout.
func (w *CommitWaiter) discard() {
	_ = w.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = w.conn.Close()
	w.conn = nil
}
