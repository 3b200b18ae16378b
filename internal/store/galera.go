package store

import (
	"context"
	"database/sql"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// What the store knows of its server being a Galera node (Store.galera).
const (
	galeraUnknown int32 = iota
	galeraOff
	galeraOn
)

// onGalera reports whether the store's server is a node of a Galera cluster
// (wsrep_on), asking it once. While the answer is unknown (the question
// failed), it reports true: what the store does on Galera is only more
// careful.
func (s *Store) onGalera(ctx context.Context) bool {
	switch s.galera.Load() {
	case galeraOff:
		return false
	case galeraOn:
		return true
	}
	var on sql.NullString
	err := s.db.GetContext(ctx, &on, "SELECT @@wsrep_on")
	switch {
	case mysqlErrorIs(err, erUnknownSystemVariable):
		s.galera.Store(galeraOff)
		return false
	case err != nil:
		return true
	case on.String == "1":
		s.galera.Store(galeraOn)
		return true
	default:
		s.galera.Store(galeraOff)
		return false
	}
}

// countClaimSQL writes a claiming editor's row (see 0010_editor_claims.sql).
const countClaimSQL = `UPDATE editors SET claims = claims + 1 WHERE id = ?`

// On Galera, a transaction that a write replicated from another node aborts
// (a brute-force abort) is rolled back at once; but the statements of a
// batch that follow may then run on their own, each committed as it runs,
// and with no error sent. So on Galera every write of a batch ends with
// endWrite's guard, which makes it change nothing outside the transaction the
// batch began, and the batch's report says whether that transaction was still
// open (inTxColumn): when not, the batch answers errAborted, which is retried
// as a deadlock is.

// endWrite ends a write statement of a batch: on Galera (or while unknown)
// with a condition that holds only inside a transaction.
func (s *Store) endWrite(q *strings.Builder) {
	if s.galera.Load() != galeraOff {
		q.WriteString(" AND @@in_transaction = 1")
	}
	q.WriteString(";\n")
}

// inTxColumn is the expression of a report's in_tx column: whether the batch's
// transaction is still open (always 1 off Galera, where MySQL has no
// in_transaction).
func (s *Store) inTxColumn() string {
	if s.galera.Load() != galeraOff {
		return "@@in_transaction"
	}
	return "1"
}

// errAborted is the answer of a batch whose transaction was aborted before its
// report: what a deadlock victim is, so that it is retried as one.
var errAborted = &mysql.MySQLError{Number: erLockDeadlock, Message: "the transaction was aborted by a conflicting write of another Galera node"}
