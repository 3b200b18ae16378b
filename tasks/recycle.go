package tasks

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// RecycleParams are the arguments of RecycleExpired.
type RecycleParams struct {
	// Limit is the batch size: 1..RecycleLimitMax, 0 means RecycleLimitDefault.
	Limit int
}

const (
	// recycleLockSQL locks a batch of expired claims, oldest deadline first, reading
	// the expiry index. SKIP LOCKED passes over rows a claim or a holder's write is
	// working on right now; the next batch gets them if they are still expired.
	recycleLockSQL = `SELECT id, fence, COALESCE(holder, '') AS holder, COALESCE(editor_id, 0) AS editor_id
FROM tasks FORCE INDEX (tasks_expiry)
WHERE status = 'assigned' AND lease_expires_at < NOW(3)
ORDER BY lease_expires_at LIMIT ? FOR UPDATE SKIP LOCKED`

	// recycleSQL returns the locked batch to the pool, fenced on (id, fence). The
	// (id, fence) IN list is a primary key range read.
	recycleSQL = `UPDATE tasks FORCE INDEX (PRIMARY) SET status = 'pending', holder = NULL, editor_id = NULL,
	assigned_at = NULL, lease_expires_at = NULL
WHERE (id, fence) IN (%s) AND status = 'assigned' AND lease_expires_at < NOW(3)`
)

// RecycleExpired returns up to p.Limit claims whose lease has passed to the pool and
// records a 'recycled' event for each, with the fence and holder of the claim that
// expired. It returns how many it recycled; call it in a loop until it returns fewer
// than the limit to drain a backlog.
//
// One transaction per batch (READ COMMITTED, so the range read takes no gap locks):
// a locking read of the batch from the expiry index (SKIP LOCKED), one fenced UPDATE
// of exactly those (id, fence) pairs, and one multi-row INSERT of their events. The rows
// stay locked from the read to the commit, so the UPDATE must match every one of them;
// if its matched-row count differs, the batch is rolled back and an error returned,
// so the events always describe exactly the rows that changed.
func (s *Store) RecycleExpired(ctx context.Context, p RecycleParams) (int, error) {
	limit := p.Limit
	if limit == 0 {
		limit = RecycleLimitDefault
	}
	if limit < 1 || limit > RecycleLimitMax {
		return 0, fmt.Errorf("recycle expired: %w: limit must be 1..%d", ErrInvalid, RecycleLimitMax)
	}
	var n int
	err := s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sqlx.Tx) error {
		var rows []struct {
			ID       int64  `db:"id"`
			Fence    int64  `db:"fence"`
			Holder   string `db:"holder"`
			EditorID int64  `db:"editor_id"`
		}
		if err := tx.SelectContext(ctx, &rows, recycleLockSQL, limit); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		args := make([]any, 0, 2*len(rows))
		evs := make([]event, len(rows))
		for i, r := range rows {
			args = append(args, r.ID, r.Fence)
			evs[i] = event{
				taskID: r.ID, kind: EventRecycled, fence: r.Fence, holder: r.Holder,
				editorID: r.EditorID, detail: "lease expired",
			}
		}
		pairs := strings.TrimSuffix(strings.Repeat("(?, ?), ", len(rows)), ", ")
		res, err := tx.ExecContext(ctx, fmt.Sprintf(recycleSQL, pairs), args...)
		if err != nil {
			return err
		}
		matched, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if matched != int64(len(rows)) {
			return fmt.Errorf("recycle matched %d of %d locked rows", matched, len(rows))
		}
		if err := insertEvents(ctx, tx, evs...); err != nil {
			return err
		}
		n = len(rows)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("recycle expired: %w", err)
	}
	return n, nil
}

// LiveClaimsParams are the arguments of LiveClaims.
type LiveClaimsParams struct {
	// AfterID continues a listing after the task with this id; 0 starts at the
	// beginning.
	AfterID int64
	// Limit is the page size: 1..LiveClaimsLimitMax, 0 means LiveClaimsLimitDefault.
	Limit int
}

const liveClaimsSQL = `SELECT id, fence, holder, lease_expires_at FROM tasks FORCE INDEX (tasks_expiry)
WHERE status = 'assigned' AND lease_expires_at >= NOW(3) AND id > ?
ORDER BY id LIMIT ?`

// LiveClaims lists live claims (assigned, lease not passed) in id order, a page at a
// time, for reconciling lock state kept elsewhere with the database. Pass the last id
// of a page as AfterID to get the next; a short page is the last. The cost is bounded
// by the number of live claims, not by the size of the pool.
func (s *Store) LiveClaims(ctx context.Context, p LiveClaimsParams) ([]LiveClaim, error) {
	limit := p.Limit
	if limit == 0 {
		limit = LiveClaimsLimitDefault
	}
	if limit < 1 || limit > LiveClaimsLimitMax {
		return nil, fmt.Errorf("live claims: %w: limit must be 1..%d", ErrInvalid, LiveClaimsLimitMax)
	}
	claims := []LiveClaim{}
	if err := s.db.SelectContext(ctx, &claims, liveClaimsSQL, p.AfterID, limit); err != nil {
		return nil, fmt.Errorf("live claims: %w", err)
	}
	return claims, nil
}

const purgeSkipsSQL = "DELETE FROM task_skips WHERE `until` < NOW(3) LIMIT ?"

// PurgeSkips deletes up to limit skip records that have passed (they no longer hide
// anything) and returns how many it deleted. limit 0 means RecycleLimitDefault.
func (s *Store) PurgeSkips(ctx context.Context, limit int) (int, error) {
	if limit == 0 {
		limit = RecycleLimitDefault
	}
	if limit < 1 || limit > RecycleLimitMax {
		return 0, fmt.Errorf("purge skips: %w: limit must be 1..%d", ErrInvalid, RecycleLimitMax)
	}
	res, err := s.db.ExecContext(ctx, purgeSkipsSQL, limit)
	if err != nil {
		return 0, fmt.Errorf("purge skips: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("purge skips: %w", err)
	}
	return int(n), nil
}
