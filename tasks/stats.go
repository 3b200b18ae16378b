package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// ExpiringWithinDefault is the window Stats uses when given none.
const ExpiringWithinDefault = time.Minute

// Stats is a snapshot of the pool.
type Stats struct {
	// ByStatus counts tasks per status; every status is present.
	ByStatus map[Status]int64
	// ByCategory counts tasks per category and status, ordered by category then status;
	// pairs with no tasks are left out.
	ByCategory []CategoryCount
	// Holders is the number of distinct holders with a live claim.
	Holders int64
	// Live is the number of live claims (assigned, lease not passed).
	Live int64
	// Expired is the number of assigned tasks whose lease has passed and that no claim
	// or sweep has taken back yet.
	Expired int64
	// ExpiringSoon is the number of live claims whose lease passes within the window
	// given to Stats.
	ExpiringSoon int64
	// Paused lists the paused categories by name (see PauseCategory); never nil.
	Paused []string
}

// CategoryCount is the number of tasks of one category in one status.
type CategoryCount struct {
	Category string `db:"category"`
	Status   Status `db:"status"`
	Count    int64  `db:"n"`
}

const (
	// statsByCategorySQL scans the candidate index, which covers it; its cost grows
	// with the table, which is acceptable for an operator's view.
	statsByCategorySQL = `SELECT category, status, COUNT(*) AS n FROM tasks FORCE INDEX (tasks_candidate)
GROUP BY status, category ORDER BY category, status`
	// statsClaimsSQL reads only assigned rows, from the expiry index.
	statsClaimsSQL = `SELECT
	COUNT(DISTINCT IF(lease_expires_at >= NOW(3), holder, NULL)) AS holders,
	COALESCE(SUM(lease_expires_at >= NOW(3)), 0) AS live,
	COALESCE(SUM(lease_expires_at < NOW(3)), 0) AS expired,
	COALESCE(SUM(lease_expires_at >= NOW(3) AND lease_expires_at < NOW(3) + INTERVAL ? MICROSECOND), 0) AS expiring
FROM tasks FORCE INDEX (tasks_expiry) WHERE status = 'assigned'`
	statsPausedSQL = `SELECT category FROM paused_categories ORDER BY category`
)

// Stats counts tasks by status and by category and status, reports the live claims:
// distinct holders, claims whose lease passes within expiringWithin (0 means
// ExpiringWithinDefault), and expired claims not yet taken back, and lists the paused
// categories. The queries are not one snapshot; counts may be off by the claims that
// changed in between. With a replica (Config.Replica) the counts are read there, and
// lag behind the primary by the replica's delay; the paused categories come from the
// primary.
func (s *Store) Stats(ctx context.Context, expiringWithin time.Duration) (*Stats, error) {
	if expiringWithin == 0 {
		expiringWithin = ExpiringWithinDefault
	}
	if expiringWithin < 0 {
		return nil, fmt.Errorf("stats: %w: window must not be negative", ErrInvalid)
	}
	st := &Stats{
		ByStatus:   make(map[Status]int64),
		ByCategory: []CategoryCount{},
	}
	for _, status := range Statuses() {
		st.ByStatus[status] = 0
	}
	var claims struct {
		Holders  int64 `db:"holders"`
		Live     int64 `db:"live"`
		Expired  int64 `db:"expired"`
		Expiring int64 `db:"expiring"`
	}
	_, err := s.read(ctx, false, func(ctx context.Context, db *sqlx.DB) error {
		st.ByCategory = []CategoryCount{}
		if err := db.SelectContext(ctx, &st.ByCategory, statsByCategorySQL); err != nil {
			return err
		}
		return db.GetContext(ctx, &claims, statsClaimsSQL, micros(expiringWithin))
	})
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	for _, c := range st.ByCategory {
		st.ByStatus[c.Status] += c.Count
	}
	st.Holders, st.Live, st.Expired, st.ExpiringSoon = claims.Holders, claims.Live, claims.Expired, claims.Expiring
	st.Paused = []string{}
	if err := s.db.SelectContext(ctx, &st.Paused, statsPausedSQL); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}
