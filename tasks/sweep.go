package tasks

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// What a sweeper needs besides RecycleExpired and LiveClaims: which claims a recycle
// returned (to wake callers of their categories and free their locks), the lease each
// live claim has left by the database clock (to re-create a lost lock with the right
// time to live), and which of a set of tasks are live claims and whose (to find locks
// that belong to no live claim).

// Recycled is a claim that a recycle returned to the pool.
type Recycled struct {
	// ID is the task's id.
	ID int64 `db:"id"`
	// Fence and Holder are those of the claim that expired.
	Fence  int64  `db:"fence"`
	Holder string `db:"holder"`
	// Category is the task's category, where it is claimable again.
	Category string `db:"category"`
}

const (
	lastEventIDSQL = `SELECT COALESCE(MAX(id), 0) FROM task_events`

	// recycledEventsSQL reads the 'recycled' events in an id range of the audit trail,
	// a primary key range read, with each task's category (a primary key lookup).
	recycledEventsSQL = `SELECT e.task_id AS id, e.fence, COALESCE(e.holder, '') AS holder, t.category
FROM task_events e FORCE INDEX (PRIMARY) JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = e.task_id
WHERE e.id > ? AND e.id <= ? AND e.kind = 'recycled'
ORDER BY e.id`
)

// RecycleExpiredClaims is RecycleExpired returning the claims it recycled instead of
// their number: every claim it recycled, each once. It returns RecycleExpired's
// errors (ErrInvalid for a bad limit), and an error if reading them back fails after
// the batch committed.
//
// The claims are read back from the audit trail: the 'recycled' events committed
// between two reads of its last id taken before and after RecycleExpired. That range
// holds every event this call wrote, and anything else written meanwhile, which is
// filtered out, except 'recycled' events of a concurrent recycle: those claims went
// back to the pool too, and are returned as well.
func (s *Store) RecycleExpiredClaims(ctx context.Context, p RecycleParams) ([]Recycled, error) {
	var before, after int64
	if err := s.db.GetContext(ctx, &before, lastEventIDSQL); err != nil {
		return nil, fmt.Errorf("recycle expired claims: %w", err)
	}
	n, err := s.RecycleExpired(ctx, p)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	// The batch committed, so its events are visible and no later than the last id.
	if err := s.db.GetContext(ctx, &after, lastEventIDSQL); err != nil {
		return nil, fmt.Errorf("recycle expired claims: read back %d: %w", n, err)
	}
	var rs []Recycled
	if err := s.db.SelectContext(ctx, &rs, recycledEventsSQL, before, after); err != nil {
		return nil, fmt.Errorf("recycle expired claims: read back %d: %w", n, err)
	}
	return rs, nil
}

// LiveLease is a live claim with the time its lease has left.
type LiveLease struct {
	// ID is the task's id.
	ID     int64
	Fence  int64
	Holder string
	// Remaining is the time until the lease passes, by the database clock when the
	// page was read; 0 when it passes this millisecond.
	Remaining time.Duration
}

const liveLeasesSQL = `SELECT id, fence, holder, TIMESTAMPDIFF(MICROSECOND, NOW(3), lease_expires_at) AS remaining_us
FROM tasks FORCE INDEX (tasks_expiry)
WHERE status = 'assigned' AND lease_expires_at >= NOW(3) AND id > ?
ORDER BY id LIMIT ?`

// LiveLeases is LiveClaims with the time each lease has left instead of its deadline,
// computed by the database, so that a lock kept elsewhere can be given the lease's
// time to live without trusting any other clock. It pages like LiveClaims: pass the
// last id of a page as AfterID; a short page is the last.
func (s *Store) LiveLeases(ctx context.Context, p LiveClaimsParams) ([]LiveLease, error) {
	limit := p.Limit
	if limit == 0 {
		limit = LiveClaimsLimitDefault
	}
	if limit < 1 || limit > LiveClaimsLimitMax {
		return nil, fmt.Errorf("live leases: %w: limit must be 1..%d", ErrInvalid, LiveClaimsLimitMax)
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
	leases := make([]LiveLease, len(rows))
	for i, r := range rows {
		leases[i] = LiveLease{
			ID: r.ID, Fence: r.Fence, Holder: r.Holder,
			Remaining: max(time.Duration(r.RemainingUS)*time.Microsecond, 0),
		}
	}
	return leases, nil
}

const liveHoldersSQL = `SELECT id, holder FROM tasks FORCE INDEX (PRIMARY)
WHERE id IN (%s) AND status = 'assigned' AND lease_expires_at >= NOW(3)`

// LiveHolders returns the holder of each of the tasks that is a live claim (assigned,
// lease not passed), by task id; tasks that are not, or do not exist, are absent. It
// takes at most LiveClaimsLimitMax ids (ErrInvalid otherwise) and reads them by
// primary key.
func (s *Store) LiveHolders(ctx context.Context, taskIDs []int64) (map[int64]string, error) {
	if len(taskIDs) > LiveClaimsLimitMax {
		return nil, fmt.Errorf("live holders: %w: at most %d ids, got %d", ErrInvalid, LiveClaimsLimitMax, len(taskIDs))
	}
	holders := make(map[int64]string)
	if len(taskIDs) == 0 {
		return holders, nil
	}
	args := make([]any, len(taskIDs))
	for i, id := range taskIDs {
		args[i] = id
	}
	query := fmt.Sprintf(liveHoldersSQL, strings.TrimSuffix(strings.Repeat("?, ", len(taskIDs)), ", "))
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
