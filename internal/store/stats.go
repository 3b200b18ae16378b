package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

const (
	// statsByCategorySQL counts, per category, the ended tasks by status and the
	// live ones (ended_status NULL, counted as statusLive) from tasks_category_created,
	// which covers it in its order, and the assigned ones from the claims' range of
	// tasks_expiry: the pending are the live less the assigned. One statement, so one
	// snapshot. Its cost grows with the table, which is acceptable for an operator's
	// view.
	statsByCategorySQL = `SELECT category, status, COUNT(*) AS n FROM tasks FORCE INDEX (tasks_expiry)
WHERE status = 'assigned' GROUP BY category
UNION ALL
SELECT category, COALESCE(ended_status, '` + statusLive + `'), COUNT(*) FROM tasks FORCE INDEX (tasks_category_created)
GROUP BY category, ended_status`
	// statsClaimsSQL reads only assigned rows, from the expiry index.
	statsClaimsSQL = `SELECT
	COUNT(DISTINCT IF(lease_expires_at >= NOW(3), holder, NULL)) AS holders,
	COALESCE(SUM(lease_expires_at >= NOW(3)), 0) AS live,
	COALESCE(SUM(lease_expires_at < NOW(3)), 0) AS expired,
	COALESCE(SUM(lease_expires_at >= NOW(3) AND lease_expires_at < NOW(3) + INTERVAL ? MICROSECOND), 0) AS expiring
FROM tasks FORCE INDEX (tasks_expiry) WHERE status = 'assigned'`
	// statsByStageSQL counts the tasks with stages by category, stage and status:
	// the non-NULL part of tasks_stage_candidate, whose leading columns cover it,
	// so tasks without stages (all in its NULL range) cost it nothing.
	statsByStageSQL = `SELECT category, stage_name, stage_status AS status, COUNT(*) AS n
FROM tasks FORCE INDEX (tasks_stage_candidate) WHERE stage_status IS NOT NULL
GROUP BY stage_status, category, stage_name ORDER BY category, stage_name, status`
	statsPausedSQL = `SELECT category FROM paused_categories ORDER BY category`
	// statusLive stands for pending and assigned in statsByCategorySQL's answer.
	statusLive = "live"
)

// PoolStats counts tasks by status and by category and status (pending are the
// tasks that can be claimed: those held out of the pool by gold tasks are
// counted in no status), the tasks with
// stages by category, stage and status, reports the live claims:
// distinct holders, claims whose lease passes within expiringWithin (0 means
// ExpiringWithinDefault), and expired claims not yet taken back, and lists the paused
// categories. The queries are not one snapshot; counts may be off by the claims that
// changed in between. With a replica (Config.Replica) the counts are read there, and
// lag behind the primary by the replica's delay; the paused categories come from the
// primary.
func (s *Store) PoolStats(ctx context.Context, expiringWithin time.Duration) (*tasks.PoolStats, error) {
	if expiringWithin == 0 {
		expiringWithin = tasks.ExpiringWithinDefault
	}
	if expiringWithin < 0 {
		return nil, fmt.Errorf("stats: %w: window must not be negative", tasks.ErrInvalid)
	}
	st := &tasks.PoolStats{
		ByStatus:   make(map[tasks.Status]int64),
		ByCategory: []tasks.CategoryCount{},
		ByStage:    []tasks.StageCount{},
	}
	for _, status := range tasks.Statuses() {
		st.ByStatus[status] = 0
	}
	var claims struct {
		Holders  int64 `db:"holders"`
		Live     int64 `db:"live"`
		Expired  int64 `db:"expired"`
		Expiring int64 `db:"expiring"`
	}
	_, err := s.read(ctx, false, func(ctx context.Context, db *sqlx.DB) error {
		var held heldCounts
		var err error
		if st.ByCategory, held, err = countByCategory(ctx, db); err != nil {
			return err
		}
		st.ByStage = []tasks.StageCount{}
		if err := db.SelectContext(ctx, &st.ByStage, statsByStageSQL); err != nil {
			return err
		}
		st.ByStage = withoutHeld(st.ByStage, held)
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

// withoutHeld takes the tasks held out of the pool by gold tasks off the
// pending counts by stage, dropping a count left at 0.
func withoutHeld(counts []tasks.StageCount, held heldCounts) []tasks.StageCount {
	if len(held.byStage) == 0 {
		return counts
	}
	out := counts[:0]
	for _, c := range counts {
		if c.Status == tasks.StatusPending {
			c.Count = max(c.Count-held.byStage[[2]string{c.Category, c.Stage}], 0)
		}
		if c.Count > 0 {
			out = append(out, c)
		}
	}
	return out
}

// countByCategory reads statsByCategorySQL and returns the counts of each category
// and status that has tasks, ordered by category and status. The pending are
// the claimable ones: the tasks held out of the pool by gold tasks (see
// goldHeld), which nobody can claim, are not counted; it returns those too.
func countByCategory(ctx context.Context, db *sqlx.DB) ([]tasks.CategoryCount, heldCounts, error) {
	var rows []tasks.CategoryCount
	if err := db.SelectContext(ctx, &rows, statsByCategorySQL); err != nil {
		return nil, heldCounts{}, err
	}
	held, err := goldHeld(ctx, db)
	if err != nil {
		return nil, held, err
	}
	assigned := make(map[string]int64)
	for _, r := range rows {
		if r.Status == tasks.StatusAssigned {
			assigned[r.Category] = r.Count
		}
	}
	out := []tasks.CategoryCount{}
	for _, r := range rows {
		if r.Status == statusLive {
			// A claim ending between the two reads cannot make this negative:
			// one statement reads one snapshot.
			// The held ones are read after: a copy released in
			// between is taken off twice, hence the floor.
			r.Status, r.Count = tasks.StatusPending, max(r.Count-assigned[r.Category]-held.byCategory[r.Category], 0)
		}
		if r.Count > 0 {
			out = append(out, r)
		}
	}
	order := tasks.Statuses()
	slices.SortFunc(out, func(a, b tasks.CategoryCount) int {
		if c := strings.Compare(a.Category, b.Category); c != 0 {
			return c
		}
		return slices.Index(order, a.Status) - slices.Index(order, b.Status)
	})
	return out, held, nil
}
