package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// The tasks held out of the pool by gold tasks: pending tasks whose run_after
// is tasks.GoldRunAfter, at the end of their category's pending range of
// tasks_claimable. They are of two kinds:
//
//   - gold tasks that were pending when marked: each stays pending, the source
//     every copy is made from, for as long as it is a gold task;
//   - copies whose claim ended by anything but a submit (a release, a skip, a
//     forced release, an expiry the sweep recycled): nobody may claim one
//     again, so EndGoldCopies cancels it, and retention purges it as any
//     cancelled task. Its gold_copies row stays, unanswered: it counts in no
//     accuracy, and the editor is not served that gold task again.
//
// Neither is claimable, so neither is counted pending by PoolStats (by
// category, and by stage for a task with stages), nor listed by ListTasks.

const (
	// goldCategoriesSQL reads the categories that have gold tasks: a loose
	// scan of gold_tasks_category, an entry or two per category.
	goldCategoriesSQL = `SELECT DISTINCT category FROM gold_tasks FORCE INDEX (gold_tasks_category)`
	// goldHeldSQL counts, per category of the IN list and stage ('' for a
	// task without stages), the pending tasks held out: one range of
	// tasks_claimable per category, its held entries only, each row read by
	// primary key for its stage (a gold task or a copy not cancelled yet).
	goldHeldSQL = `SELECT category, COALESCE(stage_name, '') AS stage_name, COUNT(*) AS n FROM tasks FORCE INDEX (tasks_claimable)
WHERE pool_status = 'pending' AND category IN (?) AND run_after >= ? GROUP BY category, stage_name`
	// goldLeftCopiesSQL reads and locks the copies left pending, from the same
	// ranges, each joined to its gold_copies row by primary key (a gold task
	// has none, and is left).
	goldLeftCopiesSQL = `SELECT t.id, t.fence FROM tasks t FORCE INDEX (tasks_claimable)
JOIN gold_copies c ON c.copy_id = t.id
WHERE t.pool_status = 'pending' AND t.category IN (?) AND t.run_after >= ?
LIMIT ? FOR UPDATE`
	// goldEndCopySQL cancels a copy, fenced on the locked row's fence and status.
	goldEndCopySQL = `UPDATE tasks FORCE INDEX (PRIMARY) SET status = 'cancelled', done_at = NOW(3)
WHERE id = ? AND fence = ? AND status = 'pending' AND run_after >= ?`
	// goldEndDetail is the detail of a copy's 'cancelled' event.
	goldEndDetail = "copy of a gold task left unanswered"
)

// EndGoldCopies cancels up to limit copies of gold tasks whose claim ended
// other than by a submit (see above): each becomes cancelled, done_at now, with
// a 'cancelled' event (no webhook), so that retention purges it; its
// gold_copies row is kept. It returns how many it cancelled; a short count says
// none is left. Round trips: the gold categories' read, then, when there are
// any, BEGIN, the locking read, a write per copy and one for the events,
// COMMIT. It reads the held entries of tasks_claimable only, never the pool.
func (s *Store) EndGoldCopies(ctx context.Context, limit int) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("end gold copies: %w: limit must be positive", tasks.ErrInvalid)
	}
	var cats []string
	if err := s.db.SelectContext(ctx, &cats, goldCategoriesSQL); err != nil {
		return 0, fmt.Errorf("end gold copies: %w", err)
	}
	if len(cats) == 0 {
		return 0, nil
	}
	q, args, err := sqlx.In(goldLeftCopiesSQL, cats, tasks.GoldRunAfter, limit)
	if err != nil {
		return 0, fmt.Errorf("end gold copies: %w", err)
	}
	var ended int
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		ended = 0
		var rows []struct {
			ID    int64 `db:"id"`
			Fence int64 `db:"fence"`
		}
		if err := tx.SelectContext(ctx, &rows, q, args...); err != nil {
			return err
		}
		evs := make([]event, 0, len(rows))
		for _, r := range rows {
			if err := fencedExec(ctx, tx, goldEndCopySQL, r.ID, r.Fence, tasks.GoldRunAfter); err != nil {
				return err
			}
			evs = append(evs, event{taskID: r.ID, kind: tasks.EventCancelled, fence: r.Fence, detail: goldEndDetail})
		}
		ended = len(rows)
		return s.insertEvents(ctx, tx, evs...)
	})
	if err != nil {
		return 0, fmt.Errorf("end gold copies: %w", err)
	}
	return ended, nil
}

// heldCounts are the pending tasks held out by gold tasks, per category and
// per category and stage (a stage named for the tasks with stages only).
type heldCounts struct {
	byCategory map[string]int64
	byStage    map[[2]string]int64
}

// goldHeld counts the pending tasks held out by gold tasks (goldHeldSQL),
// read from db: none, and one read only, when no category has gold tasks.
func goldHeld(ctx context.Context, db *sqlx.DB) (heldCounts, error) {
	var held heldCounts
	var cats []string
	if err := db.SelectContext(ctx, &cats, goldCategoriesSQL); err != nil {
		return held, err
	}
	if len(cats) == 0 {
		return held, nil
	}
	q, args, err := sqlx.In(goldHeldSQL, cats, tasks.GoldRunAfter)
	if err != nil {
		return held, err
	}
	var rows []struct {
		Category string `db:"category"`
		Stage    string `db:"stage_name"`
		N        int64  `db:"n"`
	}
	if err := db.SelectContext(ctx, &rows, q, args...); err != nil {
		return held, err
	}
	held.byCategory, held.byStage = map[string]int64{}, map[[2]string]int64{}
	for _, r := range rows {
		held.byCategory[r.Category] += r.N
		if r.Stage != "" {
			held.byStage[[2]string{r.Category, r.Stage}] += r.N
		}
	}
	return held, nil
}
