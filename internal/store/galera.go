package store

import (
	"context"
	"database/sql"
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
