package store

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/tasks"
)

// MySQL server error numbers the store reacts to.
const (
	erDupEntry        = 1062
	erLockWaitTimeout = 1205
	erLockDeadlock    = 1213
)

// refusedValueErrors are the server errors that refuse a value written, rather than
// the statement or the connection: the value does not fit its column or breaks a
// CHECK. Where such a value comes from a caller, the caller is at fault.
var refusedValueErrors = []uint16{
	1048, // ER_BAD_NULL_ERROR: column cannot be null
	1153, // ER_NET_PACKET_TOO_LARGE: got a packet bigger than max_allowed_packet
	1264, // ER_WARN_DATA_OUT_OF_RANGE: out of range value for column
	1265, // WARN_DATA_TRUNCATED: data truncated for column
	1292, // ER_TRUNCATED_WRONG_VALUE: incorrect (datetime, double ...) value
	1300, // ER_INVALID_CHARACTER_STRING: invalid utf8mb4 character string
	1366, // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: incorrect string value for column
	1367, // ER_ILLEGAL_VALUE_FOR_TYPE: illegal value found during parsing
	1406, // ER_DATA_TOO_LONG: data too long for column
	1441, // ER_DATETIME_FUNCTION_OVERFLOW: datetime function field overflow
	1690, // ER_DATA_OUT_OF_RANGE: value is out of range (arithmetic)
	3140, // ER_INVALID_JSON_TEXT (MySQL): invalid JSON text
	3141, // ER_INVALID_JSON_TEXT_IN_PARAM (MySQL): invalid JSON text in argument
	3144, // ER_INVALID_JSON_CHARSET (MySQL): cannot create a JSON value from a binary string
	3146, // ER_INVALID_TYPE_FOR_JSON (MySQL): invalid data type for JSON data
	3157, // ER_JSON_DOCUMENT_TOO_DEEP (MySQL): the JSON document exceeds the maximum depth
	3819, // ER_CHECK_CONSTRAINT_VIOLATED (MySQL): check constraint is violated
	4025, // ER_CONSTRAINT_FAILED (MariaDB): CONSTRAINT failed, such as json_valid of a JSON column
}

// refusedValue wraps err with ErrInvalid, keeping it as the cause, when it is a
// server error in refusedValueErrors; other errors pass through. Store methods
// apply it to the writes of values their callers gave: validation runs first and
// should leave the server nothing to refuse, so this is the backstop that keeps a
// value the validation missed a caller's error.
func refusedValue(err error) error {
	if err == nil || errors.Is(err, tasks.ErrInvalid) || !mysqlErrorIs(err, refusedValueErrors...) {
		return err
	}
	return fmt.Errorf("%w: the database refused a value: %w", tasks.ErrInvalid, err)
}

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
		return tasks.ErrNotFound
	}
	return err
}
