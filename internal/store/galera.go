package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// What the store knows of its server being a Galera node (Store.galera).
const (
	galeraUnknown int32 = iota
	galeraOff
	galeraOn
)

// Galera reports whether the store's server is a node of a Galera cluster
// (wsrep_on), asking it once: the answer is kept. A store asks by itself on
// its first write; a caller that counts round trips, or wants the answer at
// start-up (the engine logs it), asks first.
func (s *Store) Galera(ctx context.Context) (bool, error) {
	if st := s.galera.Load(); st != galeraUnknown {
		return st == galeraOn, nil
	}
	var on sql.NullString
	err := s.db.GetContext(ctx, &on, "SELECT @@wsrep_on")
	switch {
	case mysqlErrorIs(err, erUnknownSystemVariable):
		s.galera.Store(galeraOff)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read wsrep_on: %w", err)
	case on.String == "1":
		s.galera.Store(galeraOn)
		return true, nil
	default:
		s.galera.Store(galeraOff)
		return false, nil
	}
}

// onGalera reports whether the store's server is a node of a Galera cluster
// (wsrep_on), asking it once. While the answer is unknown (the question
// failed), it reports true: what the store does on Galera is only more
// careful.
func (s *Store) onGalera(ctx context.Context) bool {
	on, err := s.Galera(ctx)
	return on || err != nil
}

// countClaimSQL writes a claiming editor's row (see 0010_editor_claims.sql).
const countClaimSQL = `UPDATE editors SET claims = claims + 1 WHERE id = ?`

// On Galera, a transaction that a write replicated from another node aborts
// (a brute-force abort) is rolled back at once; but the statements of a
// batch that follow may then run on their own, each committed as it runs,
// and with no error sent. So on Galera every write of a claim's batch ends
// with endWrite's guard, which makes it change nothing outside the
// transaction the batch began; and every batch ends with inTxCheck, which
// reports whether that transaction was still open, and then its COMMIT apart
// (see galeraBatch): when either fails, the batch answers as a deadlock
// victim, and is retried as one.

// endWrite ends a write statement of a batch: on Galera (or while unknown)
// with a condition that holds only inside a transaction.
func (s *Store) endWrite(q *strings.Builder) {
	s.guardWrite(q)
	q.WriteString(";\n")
}

// guardWrite writes endWrite's guard alone, for a statement whose WHERE is
// followed by more (an ORDER BY, an ON DUPLICATE KEY UPDATE).
func (s *Store) guardWrite(q *strings.Builder) {
	if s.galera.Load() != galeraOff {
		q.WriteString(" AND @@in_transaction = 1")
	}
}

// inTxCheck is the statement a batch ends with on Galera, where its COMMIT is
// sent apart: its one row says whether the batch's transaction is still open.
const inTxCheck = "SELECT @@in_transaction AS taskd_in_tx"

// galeraBatch returns query, a batch ending with COMMIT, as it runs on Galera
// (or while that is unknown): with inTxCheck instead of its COMMIT, which the
// caller sends on its own once the batch answered (commitApart true). A
// brute-force abort that lands between the statements of one batch lets the
// rest run on their own, a COMMIT included, with no error; a COMMIT sent as a
// command of its own is refused (1213) when the transaction was aborted.
// Elsewhere, and for a batch without a COMMIT, query comes back as it is.
func (s *Store) galeraBatch(query string) (q string, commitApart bool) {
	if s.galera.Load() == galeraOff || !strings.HasSuffix(query, "COMMIT") {
		return query, false
	}
	return strings.TrimSuffix(query, "COMMIT") + inTxCheck, true
}

// errAborted is the answer of a batch whose transaction was aborted before its
// COMMIT: what a deadlock victim is, so that it is retried as one.
var errAborted = &mysql.MySQLError{Number: erLockDeadlock, Message: "the transaction was aborted by a conflicting write of another Galera node"}

// execInTx runs query, statements separated by ";\n" whose arguments are args
// in order, inside tx: in one round trip, or on Galera (or while that is
// unknown) one statement at a time, since a brute-force abort between the
// statements of one round trip lets the rest run on their own, outside the
// transaction; a statement sent apart after an abort is refused (1213), and
// the transaction is retried as a deadlock victim. It returns the result of
// the last statement.
func (s *Store) execInTx(ctx context.Context, tx *sqlx.Tx, query string, args []any) (sql.Result, error) {
	if s.galera.Load() == galeraOff {
		return tx.ExecContext(ctx, query, args...)
	}
	var res sql.Result
	for stmt := range strings.SplitSeq(query, ";\n") {
		n := strings.Count(stmt, "?")
		var err error
		if res, err = tx.ExecContext(ctx, stmt, args[:n]...); err != nil {
			return nil, err
		}
		args = args[n:]
	}
	return res, nil
}
