package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Retention: finished data is deleted once it is older than its kind's retention, in
// small batches, one transaction each (PurgeTasks, PurgeDeliveries). A batch reads the
// primary keys of the oldest rows first, without a lock, leaves out those it must keep
// (a task of a group with a member live or recent, a task with a result the feed has not
// numbered yet), then locks the others by primary key, deletes the rows that refer to
// them (a task's results, events and skips; a delivery's attempts) and then the rows
// themselves, and commits: a half-purged task is never visible, and no result, event
// or skip is left without its task.
//
// Only finished rows are read and locked: a task whose ended_status is set (done,
// cancelled or dead), a delivery delivered or failed. The claims, submits and
// heartbeats write pending and assigned tasks only, and an UPDATE of theirs that meets
// a row a batch locked reads its last committed version (READ COMMITTED's
// semi-consistent read), which is finished and does not match: no claim waits on a
// purge. Every statement re-checks the status and the age on the database clock, so a
// task requeued (dead to pending) before the batch locked it is left alone.
//
// A gold task (gold_tasks) is never purged while it is gold, whatever its status: it
// is the reference its copies are made from. The read and the lock pass it over by an
// anti-join on gold_tasks' primary key, a lookup per row read that costs nothing when
// no task is gold (the empty table is read once, as a constant); the delete re-checks.
// Its copies, and the copies' events, follow the retention of their status; their
// gold_copies rows (the scores) are kept.
//
// The results feed: a purged result leaves its seq behind. The highest seq purged is
// kept in task_results_feed's row id = 2 (id = 1 is the feed's counter), raised in
// the batch that purges it; a reader whose cursor is below it is told so (see
// ErrCursorExpired) rather than given a feed with a silent gap. A task with a result
// not numbered yet is left by the transaction, numbered, and purged by a second one
// (or the next call), so nothing leaves the feed unnumbered.
const (
	// purgeTasksSQL reads, without locking, the oldest tasks of one ended
	// status ended before the cutoff, in the tasks_done key's order: no sort,
	// no row of another status examined. A gold task is passed over (an
	// anti-join by primary key, see purgeNotGoldSQL), so that gold tasks
	// older than the cutoff never fill a batch.
	purgeTasksSQL = `SELECT t.id, COALESCE(t.group_id, 0) AS group_id FROM tasks t FORCE INDEX (tasks_done)
LEFT JOIN gold_tasks g FORCE INDEX (PRIMARY) ON g.task_id = t.id
WHERE t.ended_status = ? AND t.done_at < NOW(3) - INTERVAL ? MICROSECOND AND g.task_id IS NULL
ORDER BY t.done_at, t.id LIMIT ?`
	// purgeLockTasksSQL locks, by primary key, the tasks the batch deletes,
	// re-checking status and age: a task requeued since the read is left, and
	// so is a task made gold since (the locking read of gold_tasks reads its
	// last committed rows).
	purgeLockTasksSQL = `SELECT t.id FROM tasks t FORCE INDEX (PRIMARY)
LEFT JOIN gold_tasks g FORCE INDEX (PRIMARY) ON g.task_id = t.id
WHERE t.id IN (?) AND t.ended_status = ? AND t.done_at < NOW(3) - INTERVAL ? MICROSECOND AND g.task_id IS NULL
ORDER BY t.id FOR UPDATE`
	// purgeLiveGroupsSQL reads, of the groups given, those with a member that
	// is live or ended after the cutoff: their tasks are kept until the whole
	// group is finished and old. A plain read: a live member is never locked.
	purgeLiveGroupsSQL = `SELECT DISTINCT group_id FROM tasks FORCE INDEX (tasks_group)
WHERE group_id IN (?) AND (ended_status IS NULL OR done_at >= NOW(3) - INTERVAL ? MICROSECOND)`
	// purgeResultSeqsSQL reads the feed positions of the tasks' results.
	purgeResultSeqsSQL  = `SELECT task_id, seq FROM task_results FORCE INDEX (PRIMARY) WHERE task_id IN (?)`
	purgeTaskResultsSQL = `DELETE FROM task_results WHERE task_id IN (?)`
	purgeTaskEventsSQL  = `DELETE FROM task_events WHERE task_id IN (?)`
	purgeTaskSkipsSQL   = `DELETE FROM task_skips WHERE task_id IN (?)`
	purgeClaimTimeSQL   = `DELETE FROM claim_time WHERE task_id IN (?)`
	// purgeTaskRowsSQL deletes the tasks, re-checking status and age, and
	// that none is a gold task: a statement begun after the batch's locks
	// were taken, so it sees a gold task marked before (MarkGold locks the
	// task's row), whatever the plan of the lock's join; one found rolls the
	// batch back.
	purgeTaskRowsSQL = `DELETE FROM tasks WHERE id IN (?) AND ended_status = ? AND done_at < NOW(3) - INTERVAL ? MICROSECOND` + purgeNotGoldSQL
	// purgeNotGoldSQL keeps gold tasks from retention: a gold task is reference
	// data, served as copies for as long as it is gold, not finished work. Its
	// copies are ordinary tasks and are purged as any.
	purgeNotGoldSQL = ` AND NOT EXISTS (SELECT 1 FROM gold_tasks g WHERE g.task_id = tasks.id)`
	// purgedSeqSQL raises the highest purged seq.
	purgedSeqSQL = `INSERT INTO task_results_feed (id, last_seq) VALUES (2, ?)
ON DUPLICATE KEY UPDATE last_seq = GREATEST(last_seq, VALUES(last_seq))`
	// readFeedBoundsSQL reads the feed's counter and its highest purged seq.
	readFeedBoundsSQL = `SELECT COALESCE(MAX(IF(id = 1, last_seq, NULL)), 0) AS last_seq,
	COALESCE(MAX(IF(id = 2, last_seq, NULL)), 0) AS purged_seq FROM task_results_feed`

	// purgeDeliveriesSQL reads and locks the oldest finished deliveries of one
	// status, in event order from the webhook_deliveries_status key.
	purgeDeliveriesSQL = `SELECT event_id, webhook FROM webhook_deliveries FORCE INDEX (webhook_deliveries_status)
WHERE status = ? AND done_at < NOW(3) - INTERVAL ? MICROSECOND ORDER BY event_id, webhook LIMIT ? FOR UPDATE`
	// purgeAttemptsSQL and purgeDeliveryRowsSQL: %s is "(event_id = ? AND webhook = ?)"
	// joined by " OR ".
	purgeAttemptsSQL     = `DELETE FROM webhook_attempts WHERE %s`
	purgeDeliveryRowsSQL = `DELETE FROM webhook_deliveries WHERE (%s) AND status = ? AND done_at < NOW(3) - INTERVAL ? MICROSECOND`
	// purgeOutboxSQL deletes the events left with no delivery.
	purgeOutboxSQL = `DELETE FROM webhook_outbox WHERE id IN (?) AND fanned_out = 1
	AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_outbox.id)`
	deliveryKeySQL = `(event_id = ? AND webhook = ?)`

	// oldestFinishedSQL reads when the oldest task still kept of an ended status
	// ended: the first entry of its tasks_done range.
	oldestFinishedSQL = `SELECT TIMESTAMPDIFF(MICROSECOND, MIN(done_at), NOW(3)) FROM tasks FORCE INDEX (tasks_done) WHERE ended_status = ?`
)

// PurgeLimitMax is the largest batch PurgeTasks and PurgeDeliveries take.
const PurgeLimitMax = 10_000

// Purged counts the rows one purge batch deleted, by table.
type Purged struct {
	// Rows is the count of rows deleted per table: tasks, task_results,
	// task_events, task_skips, claim_time, webhook_deliveries,
	// webhook_attempts, webhook_outbox. Tables with none are absent.
	Rows map[string]int64
	// Selected is how many rows the batch read to purge (tasks or
	// deliveries): the batch was full when it equals the limit.
	Selected int
}

func (p *Purged) add(table string, res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n > 0 {
		p.Rows[table] += n
	}
	return nil
}

func checkPurge(olderThan time.Duration, limit int) error {
	switch {
	case olderThan <= 0:
		return fmt.Errorf("%w: retention must be positive, got %v", tasks.ErrInvalid, olderThan)
	case limit < 1 || limit > PurgeLimitMax:
		return fmt.Errorf("%w: limit must be 1..%d", tasks.ErrInvalid, PurgeLimitMax)
	}
	return nil
}

// PurgeTasks deletes, in one transaction, up to limit tasks of the given ended
// status (done, cancelled or dead) that ended more than olderThan ago by the
// database clock, with their results, events and skips. A task of a group is
// purged only once every task of its group has ended that long ago; a task with
// a result the feed has not numbered yet is left until the call has numbered
// up to limit results, as a feed reader would, and run its transaction once
// more (what is still left waits for the next call). It raises the
// feed's highest purged seq to that of the results it deletes. It never reads or
// locks a pending or assigned task, nor any gold task. A transaction InnoDB (or Galera's
// certification) rolled back is run again; ErrBusy when it kept losing.
func (s *Store) PurgeTasks(ctx context.Context, status tasks.Status, olderThan time.Duration, limit int) (Purged, error) {
	if err := checkPurge(olderThan, limit); err != nil {
		return Purged{}, fmt.Errorf("purge %s tasks: %w", status, err)
	}
	switch status {
	case tasks.StatusDone, tasks.StatusCancelled, tasks.StatusDead:
	default:
		return Purged{}, fmt.Errorf("purge %s tasks: %w: only done, cancelled and dead tasks are purged", status, tasks.ErrInvalid)
	}
	var out Purged
	// A batch that left tasks for results not numbered yet numbers them, as a
	// feed reader would (without a reader nothing else does), and runs once
	// more at once: without that, every other batch of a deployment with no
	// feed reader would purge nothing.
	for pass := 0; pass < 2; pass++ {
		got, waiting, err := s.purgeTasksBatch(ctx, status, olderThan.Microseconds(), limit)
		for table, n := range got.Rows {
			if out.Rows == nil {
				out.Rows = map[string]int64{}
			}
			out.Rows[table] += n
		}
		out.Selected = max(out.Selected, got.Selected)
		if err != nil {
			return out, fmt.Errorf("purge %s tasks: %w", status, err)
		}
		if !waiting {
			break
		}
		if err := s.numberResults(ctx, limit); err != nil {
			return out, fmt.Errorf("purge %s tasks: number results: %w", status, err)
		}
	}
	return out, nil
}

// purgeTasksBatch is one transaction of PurgeTasks. It reports whether it
// left tasks for results not numbered yet.
func (s *Store) purgeTasksBatch(ctx context.Context, status tasks.Status, us int64, limit int) (Purged, bool, error) {
	var out Purged
	waiting := false // tasks left for a result not numbered yet
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		out, waiting = Purged{Rows: map[string]int64{}}, false
		var rows []struct {
			ID      int64 `db:"id"`
			GroupID int64 `db:"group_id"`
		}
		if err := tx.SelectContext(ctx, &rows, purgeTasksSQL, status, us, limit); err != nil {
			return err
		}
		out.Selected = len(rows)
		if len(rows) == 0 {
			return nil
		}
		skip := map[int64]bool{} // group ids kept
		var groups []int64
		for _, r := range rows {
			if r.GroupID != 0 && !skip[r.GroupID] {
				skip[r.GroupID] = false
				groups = append(groups, r.GroupID)
			}
		}
		if len(groups) > 0 {
			q, args, err := sqlx.In(purgeLiveGroupsSQL, groups, us)
			if err != nil {
				return err
			}
			var live []int64
			if err := tx.SelectContext(ctx, &live, q, args...); err != nil {
				return err
			}
			for _, g := range live {
				skip[g] = true
			}
		}
		ids := make([]int64, 0, len(rows))
		for _, r := range rows {
			if !skip[r.GroupID] {
				ids = append(ids, r.ID)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		q, args, err := sqlx.In(purgeResultSeqsSQL, ids)
		if err != nil {
			return err
		}
		var seqs []struct {
			TaskID int64         `db:"task_id"`
			Seq    sql.NullInt64 `db:"seq"`
		}
		if err := tx.SelectContext(ctx, &seqs, q, args...); err != nil {
			return err
		}
		unnumbered := map[int64]bool{}
		var maxSeq int64
		for _, r := range seqs {
			if !r.Seq.Valid {
				unnumbered[r.TaskID] = true
			}
			maxSeq = max(maxSeq, r.Seq.Int64)
		}
		if len(unnumbered) > 0 {
			waiting = true
			ids = deleteIf(ids, func(id int64) bool { return unnumbered[id] })
			maxSeq = 0
			for _, r := range seqs {
				if !unnumbered[r.TaskID] {
					maxSeq = max(maxSeq, r.Seq.Int64)
				}
			}
			if len(ids) == 0 {
				return nil
			}
		}
		q, args, err = sqlx.In(purgeLockTasksSQL, ids, status, us)
		if err != nil {
			return err
		}
		var locked []int64
		if err := tx.SelectContext(ctx, &locked, q, args...); err != nil {
			return err
		}
		if len(locked) == 0 {
			return nil
		}
		if len(locked) < len(ids) {
			keep := map[int64]bool{}
			for _, id := range locked {
				keep[id] = true
			}
			maxSeq = 0
			for _, r := range seqs {
				if keep[r.TaskID] {
					maxSeq = max(maxSeq, r.Seq.Int64)
				}
			}
		}
		ids = locked
		for _, st := range []struct{ table, sql string }{
			{"task_results", purgeTaskResultsSQL},
			{"task_events", purgeTaskEventsSQL},
			{"task_skips", purgeTaskSkipsSQL},
			{"claim_time", purgeClaimTimeSQL},
		} {
			q, args, err := sqlx.In(st.sql, ids)
			if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, q, args...)
			if err != nil {
				return fmt.Errorf("%s: %w", st.table, err)
			}
			if err := out.add(st.table, res); err != nil {
				return err
			}
		}
		q, args, err = sqlx.In(purgeTaskRowsSQL, ids, status, us)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("tasks: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(ids)) {
			// The rows are locked and were checked under the lock: anything
			// else means they changed without it, and the batch is rolled back.
			return fmt.Errorf("deleted %d of %d tasks (%v)", n, len(ids), err)
		}
		out.Rows["tasks"] += int64(len(ids))
		if maxSeq > 0 {
			if _, err := tx.ExecContext(ctx, purgedSeqSQL, maxSeq); err != nil {
				return fmt.Errorf("raise purged seq: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return Purged{}, false, err
	}
	return out, waiting, nil
}

func deleteIf(ids []int64, drop func(int64) bool) []int64 {
	out := ids[:0]
	for _, id := range ids {
		if !drop(id) {
			out = append(out, id)
		}
	}
	return out
}

// PurgeDeliveries deletes, in one transaction, up to limit webhook deliveries
// that were delivered or failed more than olderThan ago by the database clock,
// each with its attempts, and then the outbox events left with no delivery. A
// pending delivery is never read or locked. ErrBusy when the transaction kept
// losing lock conflicts.
func (s *Store) PurgeDeliveries(ctx context.Context, olderThan time.Duration, limit int) (Purged, error) {
	if err := checkPurge(olderThan, limit); err != nil {
		return Purged{}, fmt.Errorf("purge webhook deliveries: %w", err)
	}
	us := olderThan.Microseconds()
	var out Purged
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		out = Purged{Rows: map[string]int64{}}
		var events []int64
		for _, status := range []tasks.DeliveryStatus{tasks.DeliveryDelivered, tasks.DeliveryFailed} {
			left := limit - out.Selected
			if left == 0 {
				break
			}
			var keys []struct {
				EventID int64  `db:"event_id"`
				Webhook string `db:"webhook"`
			}
			if err := tx.SelectContext(ctx, &keys, purgeDeliveriesSQL, status, us, left); err != nil {
				return err
			}
			if len(keys) == 0 {
				continue
			}
			out.Selected += len(keys)
			args := make([]any, 0, 2*len(keys)+2)
			for _, k := range keys {
				args = append(args, k.EventID, k.Webhook)
				events = append(events, k.EventID)
			}
			where := strings.Repeat(deliveryKeySQL+" OR ", len(keys)-1) + deliveryKeySQL
			res, err := tx.ExecContext(ctx, fmt.Sprintf(purgeAttemptsSQL, where), args...)
			if err != nil {
				return fmt.Errorf("webhook_attempts: %w", err)
			}
			if err := out.add("webhook_attempts", res); err != nil {
				return err
			}
			res, err = tx.ExecContext(ctx, fmt.Sprintf(purgeDeliveryRowsSQL, where), append(args, status, us)...)
			if err != nil {
				return fmt.Errorf("webhook_deliveries: %w", err)
			}
			if err := out.add("webhook_deliveries", res); err != nil {
				return err
			}
		}
		if len(events) == 0 {
			return nil
		}
		q, args, err := sqlx.In(purgeOutboxSQL, events)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("webhook_outbox: %w", err)
		}
		return out.add("webhook_outbox", res)
	})
	if err != nil {
		return Purged{}, fmt.Errorf("purge webhook deliveries: %w", err)
	}
	return out, nil
}

// OldestFinished returns how long ago the oldest task kept of each ended status
// ended, by the database clock; a status with no task kept is absent.
func (s *Store) OldestFinished(ctx context.Context) (map[tasks.Status]time.Duration, error) {
	out := map[tasks.Status]time.Duration{}
	for _, st := range []tasks.Status{tasks.StatusDone, tasks.StatusCancelled, tasks.StatusDead} {
		var us sql.NullInt64
		if err := s.db.GetContext(ctx, &us, oldestFinishedSQL, st); err != nil {
			return nil, fmt.Errorf("oldest finished task: %w", err)
		}
		if us.Valid {
			out[st] = time.Duration(us.Int64) * time.Microsecond
		}
	}
	return out, nil
}

// feedBounds reads the feed's last seq given out and the highest purged, both
// 0 when none.
func (s *Store) feedBounds(ctx context.Context) (last, purged int64, err error) {
	var b struct {
		Last   int64 `db:"last_seq"`
		Purged int64 `db:"purged_seq"`
	}
	if err := s.db.GetContext(ctx, &b, readFeedBoundsSQL); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, 0, err
	}
	return b.Last, b.Purged, nil
}

// retainedTables are the tables retention purges, whose sizes TableSizes reads.
var retainedTables = []string{"tasks", "task_results", "task_events", "task_skips", "claim_time",
	"webhook_outbox", "webhook_deliveries", "webhook_attempts"}

// tableSizesSQL reads the tables' sizes from information_schema: InnoDB's
// estimates (table_rows is approximate, the lengths count allocated pages).
const tableSizesSQL = `SELECT table_name AS name, COALESCE(data_length, 0) + COALESCE(index_length, 0) AS bytes,
	COALESCE(table_rows, 0) AS table_rows
FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name IN (?) ORDER BY table_name`

// TableSizes reads the size on disk (data and indexes) and the estimated row
// count of each table retention purges, from information_schema.TABLES.
func (s *Store) TableSizes(ctx context.Context) ([]tasks.TableSize, error) {
	q, args, err := sqlx.In(tableSizesSQL, retainedTables)
	if err != nil {
		return nil, fmt.Errorf("table sizes: %w", err)
	}
	var out []tasks.TableSize
	if err := s.db.SelectContext(ctx, &out, q, args...); err != nil {
		return nil, fmt.Errorf("table sizes: %w", err)
	}
	return out, nil
}

// Storage reads the tables' sizes and the oldest finished tasks' ages.
func (s *Store) Storage(ctx context.Context) (*tasks.Storage, error) {
	tables, err := s.TableSizes(ctx)
	if err != nil {
		return nil, err
	}
	oldest, err := s.OldestFinished(ctx)
	if err != nil {
		return nil, err
	}
	return &tasks.Storage{Tables: tables, Oldest: oldest}, nil
}
