package tasks

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

var (
	// ErrNotFound means the task or editor does not exist, or the editor holds no live
	// claim.
	ErrNotFound = errors.New("not found")

	// ErrStale means a fenced write matched no row: the fence is not the current one, the
	// task is not assigned to the given holder, or its lease has already passed (and it
	// may have been taken over or recycled). Nothing was changed.
	ErrStale = errors.New("stale claim")

	// ErrSkipped means the editor skipped the task (Release with Skip) and may not
	// claim it again before the skip passes; others may. Nothing was changed.
	ErrSkipped = errors.New("skipped by the editor")

	// ErrHoldLimit means a heartbeat cannot extend the lease because the claim has
	// reached the maximum hold time (Config.MaxHold). The claim stays valid until its
	// current lease passes.
	ErrHoldLimit = errors.New("hold limit reached")

	// ErrEditorBusy means the editor already holds a live claim on another task; the
	// store refuses a second one (see Claim).
	ErrEditorBusy = errors.New("editor already holds a task")

	// ErrInvalid wraps validation failures; the message names the offending field.
	ErrInvalid = errors.New("invalid input")

	// ErrBusy means a transaction lost lock conflicts on every attempt: InnoDB picked it
	// as a deadlock victim each time, or a lock wait timed out. Nothing was changed; the
	// same call may succeed a moment later.
	ErrBusy = errors.New("busy: the transaction kept losing lock conflicts")

	// ErrDuplicate means a unique value (an editor's name or token hash) is taken.
	ErrDuplicate = errors.New("already exists")
)

// MySQL server error numbers the store reacts to.
const (
	erDupEntry        = 1062
	erLockWaitTimeout = 1205
	erLockDeadlock    = 1213
)

// mysqlErrorIs reports whether err is a MySQL server error with one of the numbers.
func mysqlErrorIs(err error, numbers ...uint16) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	for _, n := range numbers {
		if me.Number == n {
			return true
		}
	}
	return false
}

// notFound turns sql.ErrNoRows into ErrNotFound and leaves other errors alone.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// Unreachable reports whether err means the database could not be reached or the
// connection broke (as opposed to a refused or invalid request): callers should retry
// later.
func Unreachable(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn)
}
