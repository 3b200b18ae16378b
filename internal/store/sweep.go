package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/taskd/taskd/tasks"
)

const liveLeasesSQL = `SELECT id, fence, holder, TIMESTAMPDIFF(MICROSECOND, NOW(3), lease_expires_at) AS remaining_us
FROM tasks FORCE INDEX (tasks_expiry)
WHERE status = 'assigned' AND lease_expires_at >= NOW(3) AND id > ?
ORDER BY id LIMIT ?`

// LiveLeases lists live claims (assigned, lease not passed) in id order, a page at a
// time, with the time each lease has left, computed by the database, so that a lock
// kept elsewhere can be given the lease's time to live without trusting any other
// clock. Pass the last id of a page as AfterID to get the next; a short page is the
// last. The cost is bounded by the number of live claims, not by the size of the pool.
func (s *Store) LiveLeases(ctx context.Context, p tasks.LiveLeasesParams) ([]tasks.LiveLease, error) {
	limit := p.Limit
	if limit == 0 {
		limit = tasks.LiveLeasesLimitDefault
	}
	if limit < 1 || limit > tasks.LiveLeasesLimitMax {
		return nil, fmt.Errorf("live leases: %w: limit must be 1..%d", tasks.ErrInvalid, tasks.LiveLeasesLimitMax)
	}
	var rows []struct {
		ID          int64  `db:"id"`
		Fence       int64  `db:"fence"`
		Holder      string `db:"holder"`
		RemainingUS int64  `db:"remaining_us"`
	}
	if err := s.db.SelectContext(ctx, &rows, liveLeasesSQL, p.AfterID, limit); err != nil {
		return nil, fmt.Errorf("live leases: %w", err)
	}
	leases := make([]tasks.LiveLease, len(rows))
	for i, r := range rows {
		leases[i] = tasks.LiveLease{
			ID: r.ID, Fence: r.Fence, Holder: r.Holder,
			Remaining: max(time.Duration(r.RemainingUS)*time.Microsecond, 0),
		}
	}
	return leases, nil
}

const liveHoldersSQL = `SELECT id, holder FROM tasks FORCE INDEX (PRIMARY)
WHERE id IN (?) AND status = 'assigned' AND lease_expires_at >= NOW(3)`

// LiveHolders returns the holder of each of the tasks that is a live claim (assigned,
// lease not passed), by task id; tasks that are not, or do not exist, are absent. It
// takes at most LiveLeasesLimitMax ids (ErrInvalid otherwise) and reads them by
// primary key.
func (s *Store) LiveHolders(ctx context.Context, taskIDs []int64) (map[int64]string, error) {
	if len(taskIDs) > tasks.LiveLeasesLimitMax {
		return nil, fmt.Errorf("live holders: %w: at most %d ids, got %d", tasks.ErrInvalid, tasks.LiveLeasesLimitMax, len(taskIDs))
	}
	holders := make(map[int64]string)
	if len(taskIDs) == 0 {
		return holders, nil
	}
	query, args, err := sqlx.In(liveHoldersSQL, taskIDs)
	if err != nil {
		return nil, fmt.Errorf("live holders: %w", err)
	}
	var rows []struct {
		ID     int64  `db:"id"`
		Holder string `db:"holder"`
	}
	if err := s.db.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("live holders: %w", err)
	}
	for _, r := range rows {
		holders[r.ID] = r.Holder
	}
	return holders, nil
}
