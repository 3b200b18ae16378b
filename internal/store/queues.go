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
	// queueOldestSQL reads the first run_after of each category's pending range
	// of tasks_claimable: a loose index scan (Using index for group-by), a few
	// entries per category whatever the pool. Every write that makes a task
	// pending sets run_after to when it became claimable (see claimableSinceSQL).
	// A first run_after in the future says no task of the category is claimable.
	// The pool status is a range of one value, grouped on: MariaDB reads an
	// equality on the key's first column as a ref over the whole pending range
	// instead.
	queueOldestSQL = `SELECT category, MIN(run_after) AS since, NOW(3) AS db_now
FROM tasks FORCE INDEX (tasks_claimable) WHERE pool_status >= 'pending' AND pool_status <= 'pending' GROUP BY pool_status, category`
	// queueOverdueSQL counts the claimable tasks past their due_at: the range of
	// tasks_overdue before now (pending_due_at is NULL for a task that is not
	// pending or has no due_at), read from the index alone and at most
	// tasks.OverdueCountMax entries.
	queueOverdueSQL = `SELECT category, COUNT(*) AS n FROM (
	SELECT category FROM tasks FORCE INDEX (tasks_overdue)
	WHERE pending_due_at < NOW(3) AND run_after <= NOW(3) LIMIT ?
) o GROUP BY category`
)

// QueueStats returns, per category with pending tasks and not paused, ordered by
// category, how long its oldest claimable task has waited and how many of its
// claimable tasks are past their due_at (see tasks.QueueStat), in two reads of
// indexes that cost a few entries per category and one per overdue task (at most
// tasks.OverdueCountMax), never a scan of the pool. With a replica
// (Config.Replica) they are read there, and lag behind the primary by its delay.
// A task made pending before migration 0015 counts from the run_after it had.
func (s *Store) QueueStats(ctx context.Context) ([]tasks.QueueStat, error) {
	var oldest []struct {
		Category string    `db:"category"`
		Since    time.Time `db:"since"`
		Now      time.Time `db:"db_now"`
	}
	var overdue []struct {
		Category string `db:"category"`
		N        int64  `db:"n"`
	}
	var paused []string
	_, err := s.read(ctx, false, func(ctx context.Context, db *sqlx.DB) error {
		oldest, overdue = oldest[:0], overdue[:0]
		if err := db.SelectContext(ctx, &oldest, queueOldestSQL); err != nil {
			return err
		}
		return db.SelectContext(ctx, &overdue, queueOverdueSQL, tasks.OverdueCountMax)
	})
	if err == nil {
		err = s.db.SelectContext(ctx, &paused, statsPausedSQL)
	}
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	byCat := make(map[string]int, len(oldest))
	out := make([]tasks.QueueStat, 0, len(oldest))
	for _, o := range oldest {
		if slices.Contains(paused, o.Category) {
			continue
		}
		byCat[o.Category] = len(out)
		out = append(out, tasks.QueueStat{Category: o.Category, OldestClaimable: max(o.Now.Sub(o.Since), 0)})
	}
	for _, o := range overdue {
		if i, ok := byCat[o.Category]; ok {
			out[i].Overdue = o.N
		}
	}
	slices.SortFunc(out, func(a, b tasks.QueueStat) int { return strings.Compare(a.Category, b.Category) })
	return out, nil
}
