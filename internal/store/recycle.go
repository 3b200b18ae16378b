package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

const (
	// recycleLockSQL locks a batch of expired claims. The derived table reads the
	// claims' entries of the expiry index in its order (per category, oldest deadline
	// first), a read bounded by the claims, never the pool, and takes up to twice the
	// batch whose lease has passed; it locks nothing, so the live claims it passes
	// over never wait for the sweep (a locking read of the index would lock each entry
	// it reads, live or not, until COMMIT). The outer read locks those rows by primary
	// key, still expired, up to the batch. SKIP LOCKED passes over rows a claim or a
	// holder's write is working on right now; the next batch gets them if they are
	// still expired. Arguments: twice the batch, the batch.
	recycleLockSQL = `SELECT id, fence, COALESCE(holder, '') AS holder, COALESCE(editor_id, 0) AS editor_id, category, claim_unlogged,
	TIMESTAMPDIFF(MICROSECOND, lease_expires_at, NOW(3)) AS expired_us, ` + goldCopyColumnSQL + `
FROM tasks FORCE INDEX (PRIMARY)
WHERE id IN (SELECT id FROM (SELECT id FROM tasks FORCE INDEX (tasks_expiry)
	WHERE status = 'assigned' AND lease_expires_at < NOW(3) ORDER BY category, lease_expires_at LIMIT ?) expired)
	AND status = 'assigned' AND lease_expires_at < NOW(3)
LIMIT ? FOR UPDATE SKIP LOCKED`

	// recycleSQL returns the locked batch to the pool, fenced on (id, fence). The
	// (id, fence) IN list is a primary key range read.
	recycleSQL = `UPDATE tasks FORCE INDEX (PRIMARY) SET run_after = ` + pendingRunAfterSQL + `, status = 'pending', holder = NULL, editor_id = NULL,
	assigned_at = NULL, lease_expires_at = NULL, claim_unlogged = 0
WHERE (id, fence) IN (%s) AND status = 'assigned' AND lease_expires_at < NOW(3)`
)

// RecycleExpired returns up to p.Limit claims whose lease has passed to the pool and
// records a 'recycled' event for each, with the fence and holder of the claim that
// expired (and a webhook outbox record, when the store's Config.WebhookEvents ask for
// expired), after the claim's 'claimed' event for a claim made without one (see
// logClaimsSQL). It returns the claims it recycled; call it in a loop until it returns
// fewer than the limit to drain a backlog. Calls may run concurrently: each
// recycles claims the others have not locked.
//
// One transaction per batch (READ COMMITTED, as every transaction on a connection from
// Open, so the range read takes no gap locks), in three round trips besides BEGIN:
// a read of the batch from the expiry index that locks only the batch's rows, by
// primary key (SKIP LOCKED, so it never waits for a claim or a holder's write, nor
// they for it, beyond the batch: see recycleLockSQL); then, in one
// statement batch, the multi-row INSERT of the events and one fenced UPDATE of exactly
// those (id, fence) pairs; then COMMIT. The rows stay locked from the read to the
// commit, so the UPDATE must match every one of them; if its matched-row count
// differs, the batch is rolled back and an error returned, so the events always
// describe exactly the rows that changed. A claim's fence is not changed: the UPDATE
// moves it out of 'assigned', which every fenced write requires, so its holder is
// stale from the commit on, and the next claim of the task bumps the fence.
func (s *Store) RecycleExpired(ctx context.Context, p tasks.RecycleParams) ([]tasks.Recycled, error) {
	limit := p.Limit
	if limit == 0 {
		limit = tasks.RecycleLimitDefault
	}
	if limit < 1 || limit > tasks.RecycleLimitMax {
		return nil, fmt.Errorf("recycle expired: %w: limit must be 1..%d", tasks.ErrInvalid, tasks.RecycleLimitMax)
	}
	var recycled []tasks.Recycled
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		recycled = nil // a deadlock victim runs again
		var rows []struct {
			ID        int64  `db:"id"`
			Fence     int64  `db:"fence"`
			Holder    string `db:"holder"`
			EditorID  int64  `db:"editor_id"`
			Category  string `db:"category"`
			Unlogged  bool   `db:"claim_unlogged"`
			ExpiredUS int64  `db:"expired_us"`
			GoldCopy  bool   `db:"gold_copy"`
		}
		if err := tx.SelectContext(ctx, &rows, recycleLockSQL, 2*limit, limit); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		evs := make([]event, len(rows))
		for i, r := range rows {
			evs[i] = event{
				taskID: r.ID, kind: tasks.EventRecycled, fence: r.Fence, holder: r.Holder,
				editorID: r.EditorID, detail: "lease expired", category: r.Category, cause: tasks.WebhookSweep,
				goldCopy: r.GoldCopy,
			}
		}
		// The UPDATE goes last: a statement batch reports the rows its last
		// statement matched. (On Galera the statements go one at a time: see
		// execInTx.)
		var q strings.Builder
		var args []any
		// The 'claimed' events of the claims made without one, first.
		var unlogged []any
		for _, r := range rows {
			if r.Unlogged {
				unlogged = append(unlogged, r.ID, r.Fence)
			}
		}
		if len(unlogged) > 0 {
			q.WriteString(logClaimsSQL + "(id, fence) IN (" + strings.TrimSuffix(strings.Repeat("(?, ?), ", len(unlogged)/2), ", ") + ");\n")
			args = append(args, unlogged...)
		}
		args = append(args, s.writeEventsSQL(&q, traceOf(ctx), evs)...)
		q.WriteString(";\n")
		fmt.Fprintf(&q, recycleSQL, strings.TrimSuffix(strings.Repeat("(?, ?), ", len(rows)), ", "))
		for _, r := range rows {
			args = append(args, r.ID, r.Fence)
		}
		res, err := s.execInTx(ctx, tx, q.String(), args)
		if err != nil {
			return refusedValue(err)
		}
		matched, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if matched != int64(len(rows)) {
			return fmt.Errorf("recycle matched %d of %d locked rows", matched, len(rows))
		}
		recycled = make([]tasks.Recycled, len(rows))
		for i, r := range rows {
			recycled[i] = tasks.Recycled{
				ID: r.ID, Fence: r.Fence, Holder: r.Holder, Category: r.Category,
				ExpiredFor: max(time.Duration(r.ExpiredUS)*time.Microsecond, 0),
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recycle expired: %w", err)
	}
	return recycled, nil
}

const purgeSkipsSQL = "DELETE FROM task_skips WHERE `until` < NOW(3) LIMIT ?"

// PurgeSkips deletes up to limit skip records that have passed (they no longer hide
// anything) and returns how many it deleted. limit 0 means RecycleLimitDefault.
func (s *Store) PurgeSkips(ctx context.Context, limit int) (int, error) {
	if limit == 0 {
		limit = tasks.RecycleLimitDefault
	}
	if limit < 1 || limit > tasks.RecycleLimitMax {
		return 0, fmt.Errorf("purge skips: %w: limit must be 1..%d", tasks.ErrInvalid, tasks.RecycleLimitMax)
	}
	// A deadlock victim (on Galera, a delete that a node's concurrent write
	// refused at certification) is run again.
	var n int64
	err := s.retryDeadlocks(ctx, func() error {
		res, err := s.db.ExecContext(ctx, purgeSkipsSQL, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge skips: %w", err)
	}
	return int(n), nil
}
