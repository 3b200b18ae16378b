package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

const (
	insertTasksSQL   = `INSERT INTO tasks (category, priority, title, payload, max_attempts, task_key, key_hold_secs, run_after, due_at, stages, stage_count, overlap, limit_key) VALUES `
	insertTaskRowSQL = `(?, ?, ?, ?, ?, ?, ?, COALESCE(?, NOW(3)), ?, ?, ?, ?, ?)`
	// groupLeadsSQL and groupCopiesSQL make the groups of the tasks inserted
	// with an overlap above 1: the first row of a group is the inserted task,
	// its own group_id, and the others are copies of it without its key.
	groupLeadsSQL  = `UPDATE tasks FORCE INDEX (PRIMARY) SET group_id = id WHERE id IN (?)`
	groupCopiesSQL = `INSERT INTO tasks (category, priority, title, payload, max_attempts, run_after, due_at, stages, stage_count, overlap, group_id)
SELECT t.category, t.priority, t.title, t.payload, t.max_attempts, t.run_after, t.due_at, t.stages, t.stage_count, t.overlap, t.id
FROM tasks t FORCE INDEX (PRIMARY) JOIN (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
	UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8) k ON k.n < t.overlap
WHERE t.id IN (?) ORDER BY t.id, k.n`
	// groupSlotsSQL reads the tasks of the groups led by some tasks, each group
	// in id order: its lead first.
	groupSlotsSQL = `SELECT group_id, id FROM tasks FORCE INDEX (tasks_group) WHERE group_id IN (?) ORDER BY group_id, id`
	// existingKeysSQL reads the tasks that hold some keys: key_held is the key
	// while its task holds it (see tasks.KeyHold).
	existingKeysSQL   = `SELECT id, key_held AS task_key FROM tasks FORCE INDEX (tasks_key_held) WHERE key_held IN (?)`
	existingKeysBatch = 1000
)

// newTaskRow is a validated NewTask, as its columns take it.
type newTaskRow struct {
	category    string
	priority    int
	title       string
	payload     string
	maxAttempts int
	key         any // string or nil
	keyHold     any // key_hold_secs: nil (forever) or the seconds held after the end, 0 for live
	runAfter    any // time.Time or nil
	dueAt       any // time.Time or nil
	stages      any // the stages comma-separated, or nil for one stage
	stageCount  int
	overlap     int
	limitKey    any    // string or nil
	gold        []byte // the gold answer as JSON, nil for an ordinary task
}

// rowOf validates t (NewTask.Validate) and returns its columns, defaults applied:
// the stages and overlap of its category's workflow unless it names its own.
func (s *Store) rowOf(t tasks.NewTask) (newTaskRow, error) {
	if err := t.Validate(); err != nil {
		return newTaskRow{}, err
	}
	wf := s.cfg.Workflows[t.Category]
	stages := wf.Stages
	if t.Stages != nil {
		stages = t.Stages
	}
	row := newTaskRow{category: t.Category, priority: t.Priority, title: t.Title,
		payload: "{}", maxAttempts: cmp.Or(t.MaxAttempts, tasks.MaxAttemptsDefault),
		runAfter: taskTime(t.RunAfter), dueAt: taskTime(t.DueAt),
		stageCount: max(1, len(stages)), overlap: cmp.Or(t.Overlap, wf.Overlap, 1)}
	if len(stages) > 0 {
		row.stages = tasks.Stages(stages).String()
	}
	if len(t.Payload) > 0 {
		row.payload = string(t.Payload)
	}
	if t.LimitKey != "" {
		row.limitKey = t.LimitKey
	}
	if t.Gold != nil {
		if row.overlap > 1 {
			return newTaskRow{}, fmt.Errorf("%w: a gold task asks for one result, and category %q asks for %d", tasks.ErrInvalid, t.Category, row.overlap)
		}
		var err error
		if row.gold, err = json.Marshal(t.Gold); err != nil {
			return newTaskRow{}, fmt.Errorf("%w: gold: %w", tasks.ErrInvalid, err)
		}
		// Held out of the pool for good (see gold.go).
		row.runAfter = tasks.GoldRunAfter
	}
	if t.Key != "" {
		row.key = t.Key
		period, forever, _ := t.KeyHold.Period() // checked by Validate
		if !forever {
			row.keyHold = int64(period / time.Second)
		}
	}
	return row, nil
}

// taskTime is the column value of an optional time of a new task, checked by
// NewTask.Validate: nil for zero, else the time in UTC truncated to milliseconds.
func taskTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Truncate(time.Millisecond)
}

// InsertTasks is Insert returning only the ids, in input order: for a task whose key
// existed, the existing task's id.
func (s *Store) InsertTasks(ctx context.Context, ts []tasks.NewTask) ([]int64, error) {
	ins, err := s.Insert(ctx, ts)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
	}
	return ids, nil
}

// insertAttempts bounds how often Insert starts over when a concurrent insert
// committed one of its keys first, or InnoDB picked it as a deadlock victim.
const insertAttempts = 8

// Insert validates all tasks, then inserts them in multi-row batches (at most
// Config.InsertBatchSize rows, and 4 MiB of values unless one task has more) inside
// one transaction, and returns what it did with each, in input order. If any task
// is invalid, it returns an error wrapping ErrInvalid that names the task's index and
// field, and inserts nothing.
//
// Idempotence: a task whose Key is held (see tasks.KeyHold) is not inserted; its
// entry names the task that holds it with Created false. So does a task whose key an
// earlier task of the same call has. The holder is returned as it is, whatever the
// new one says; a key that is free again makes a new task. The held keys are looked
// up first (tasks_key_held, one read per 1,000 keys); should a
// concurrent insert commit one of them between that read and this insert, the
// unique key refuses the insert and Insert starts over. The unique key's duplicate
// checks lock the entries they meet, so concurrent inserts of the same keys in
// different orders can deadlock; the victim starts over too. After 8 attempts in
// all, or a lock wait timeout, Insert returns an error wrapping ErrBusy. Concurrent
// inserts of overlapping keys thus make one task per key, each call seeing which of
// its tasks it made.
//
// On MariaDB the ids come from INSERT ... RETURNING id. On MySQL, which has no
// RETURNING, they are LAST_INSERT_ID() plus multiples of auto_increment_increment: a
// multi-row INSERT with a known row count is a "simple insert", which InnoDB gives
// consecutive values in every innodb_autoinc_lock_mode.
func (s *Store) Insert(ctx context.Context, ts []tasks.NewTask) ([]tasks.Inserted, error) {
	if len(ts) == 0 {
		return []tasks.Inserted{}, nil
	}
	in, err := s.prepareInsert(ctx, ts)
	if err != nil {
		return nil, err
	}
	out := make([]tasks.Inserted, len(ts))
	for attempt := 1; ; attempt++ {
		err = s.runTx(ctx, func(tx *sqlx.Tx) error {
			return s.insertTx(ctx, tx, in, out)
		})
		if err == nil || !insertConflict(err) {
			break
		}
		s.lockConflicts.Add(1)
		if attempt == insertAttempts || mysqlErrorIs(err, erLockWaitTimeout) {
			err = fmt.Errorf("%w: %w", tasks.ErrBusy, err)
			break
		}
		pause := time.NewTimer(time.Duration(1+rand.IntN(5*attempt)) * time.Millisecond)
		select {
		case <-ctx.Done():
			pause.Stop()
			return nil, fmt.Errorf("insert tasks: %w: %w", tasks.ErrBusy, err)
		case <-pause.C:
		}
	}
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", refusedValue(err))
	}
	s.insertedKeys(ts)
	return out, nil
}

// insertConflict reports whether an attempt of an insert lost to a concurrent
// one: a key committed first, a deadlock, a lock wait timeout.
func insertConflict(err error) bool {
	return mysqlErrorIs(err, erDupEntry, erLockDeadlock, erLockWaitTimeout)
}

// newTasks are the tasks of an insert, validated, as its attempts take them.
type newTasks struct {
	rows []newTaskRow
	// first[i] is the index of the first task with task i's key, or i.
	first []int
	// keys are the tasks' keys, each once.
	keys      []string
	returning bool
}

// prepareInsert validates ts (see Insert) and returns them as an attempt
// takes them.
func (s *Store) prepareInsert(ctx context.Context, ts []tasks.NewTask) (newTasks, error) {
	in := newTasks{rows: make([]newTaskRow, len(ts)), first: make([]int, len(ts))}
	byKey := map[string]int{}
	for i, t := range ts {
		r, err := s.rowOf(t)
		if err != nil {
			return newTasks{}, fmt.Errorf("insert tasks: task %d: %w", i, err)
		}
		in.rows[i], in.first[i] = r, i
		if t.Key != "" {
			if j, ok := byKey[t.Key]; ok {
				in.first[i] = j
			} else {
				byKey[t.Key] = i
				in.keys = append(in.keys, t.Key)
			}
		}
	}
	var err error
	if in.returning, err = s.supportsReturning(ctx); err != nil {
		return newTasks{}, fmt.Errorf("insert tasks: %w", err)
	}
	return in, nil
}

// queryPairs runs query, which reads two BIGINT or string columns, and
// calls fn with each row's values scanned into a and b.
func queryPairs(ctx context.Context, tx Querier, query string, args []any, a, b any, fn func()) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(a, b); err != nil {
			return err
		}
		fn()
	}
	return rows.Err()
}

// insertTx is one attempt of Insert, or InsertIn in the caller's transaction: it
// looks the keys up, inserts the tasks that are new and fills out.
func (s *Store) insertTx(ctx context.Context, tx Querier, in newTasks, out []tasks.Inserted) error {
	rows, first, keys := in.rows, in.first, in.keys
	existing := map[string]int64{}
	for start := 0; start < len(keys); start += existingKeysBatch {
		batch := keys[start:min(start+existingKeysBatch, len(keys))]
		q, args, err := sqlx.In(existingKeysSQL, batch)
		if err != nil {
			return err
		}
		var id int64
		var key string
		if err := queryPairs(ctx, tx, q, args, &id, &key, func() { existing[key] = id }); err != nil {
			return err
		}
	}
	// The tasks to insert, by index into rows.
	var fresh []int
	var freshRows []newTaskRow
	for i, r := range rows {
		out[i] = tasks.Inserted{}
		if first[i] != i {
			continue
		}
		if k, ok := r.key.(string); ok {
			if id, ok := existing[k]; ok {
				out[i] = tasks.Inserted{ID: id}
				continue
			}
		}
		fresh = append(fresh, i)
		freshRows = append(freshRows, r)
	}
	ids, err := s.insertRows(ctx, tx, freshRows, in.returning)
	if err != nil {
		return err
	}
	var leads []int64
	for j, i := range fresh {
		out[i] = tasks.Inserted{ID: ids[j], Created: true}
		if rows[i].overlap > 1 {
			leads = append(leads, ids[j])
		}
	}
	if err := insertGroups(ctx, tx, leads); err != nil {
		return err
	}
	if err := insertGold(ctx, tx, freshRows, ids); err != nil {
		return err
	}
	// The slots of the groups made, and of those the existing keys lead.
	for _, id := range existing {
		leads = append(leads, id)
	}
	slots, err := groupSlots(ctx, tx, leads)
	if err != nil {
		return err
	}
	for i := range rows {
		if first[i] != i {
			out[i] = tasks.Inserted{ID: out[first[i]].ID}
		}
		out[i].Slots = slots[out[i].ID]
	}
	return nil
}

// groupSlots returns the ids of the tasks of the groups that leads lead, by
// lead, each in id order; leads that lead no group are left out.
func groupSlots(ctx context.Context, tx Querier, leads []int64) (map[int64][]int64, error) {
	slots := map[int64][]int64{}
	for start := 0; start < len(leads); start += existingKeysBatch {
		batch := leads[start:min(start+existingKeysBatch, len(leads))]
		q, args, err := sqlx.In(groupSlotsSQL, batch)
		if err != nil {
			return nil, err
		}
		var group, id int64
		if err := queryPairs(ctx, tx, q, args, &group, &id, func() { slots[group] = append(slots[group], id) }); err != nil {
			return nil, err
		}
	}
	return slots, nil
}

// insertRows inserts rows in batches and returns their ids in order.
func (s *Store) insertRows(ctx context.Context, tx Querier, rows []newTaskRow, returning bool) ([]int64, error) {
	ids := make([]int64, 0, len(rows))
	if len(rows) == 0 {
		return ids, nil
	}
	var step int64
	if !returning {
		if err := tx.QueryRowContext(ctx, `SELECT @@auto_increment_increment`).Scan(&step); err != nil {
			return nil, err
		}
	}
	for start := 0; start < len(rows); {
		batch := rows[start:s.insertBatchEnd(rows, start)]
		start += len(batch)
		var q strings.Builder
		q.WriteString(insertTasksSQL)
		args := make([]any, 0, 13*len(batch))
		for i, r := range batch {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(insertTaskRowSQL)
			args = append(args, r.category, r.priority, r.title, r.payload, r.maxAttempts, r.key, r.keyHold, r.runAfter, r.dueAt,
				r.stages, r.stageCount, r.overlap, r.limitKey)
		}
		if returning {
			q.WriteString(" RETURNING id")
			got, err := queryIDs(ctx, tx, q.String(), args)
			if err != nil {
				return nil, err
			}
			if len(got) != len(batch) {
				return nil, fmt.Errorf("insert returned %d ids for %d rows", len(got), len(batch))
			}
			ids = append(ids, got...)
			continue
		}
		res, err := tx.ExecContext(ctx, q.String(), args...)
		if err != nil {
			return nil, err
		}
		first, err := res.LastInsertId()
		if err != nil {
			return nil, err
		}
		for i := range batch {
			ids = append(ids, first+int64(i)*step)
		}
	}
	return ids, nil
}

// queryIDs runs query, which reads one BIGINT column, and returns its values.
func queryIDs(ctx context.Context, tx Querier, query string, args []any) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// insertGroups makes the groups of the tasks leads, inserted with an overlap
// above 1 (see groupCopiesSQL).
func insertGroups(ctx context.Context, tx Querier, leads []int64) error {
	for start := 0; start < len(leads); start += existingKeysBatch {
		batch := leads[start:min(start+existingKeysBatch, len(leads))]
		for _, stmt := range []string{groupLeadsSQL, groupCopiesSQL} {
			q, args, err := sqlx.In(stmt, batch)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// insertBatchBytes bounds the values of one multi-row INSERT, in bytes. The driver
// escapes them into the statement, at most doubling them, and the statement must
// fit the server's max_allowed_packet (16 MiB by default on MariaDB): a bigger one
// makes the server drop the connection.
const insertBatchBytes = 4 << 20

// insertBatchEnd returns the end of the batch of rows that starts at start: at most
// Config.InsertBatchSize rows whose values take at most insertBatchBytes, or one row
// that takes more by itself.
func (s *Store) insertBatchEnd(rows []newTaskRow, start int) int {
	end, size := start, 0
	for end < len(rows) && end-start < s.cfg.InsertBatchSize {
		r := rows[end]
		size += len(r.category) + len(r.title) + len(r.payload)
		if k, ok := r.key.(string); ok {
			size += len(k)
		}
		if size > insertBatchBytes && end > start {
			break
		}
		end++
	}
	return end
}

// supportsReturning reports whether the server is MariaDB, which supports INSERT ...
// RETURNING. The answer is cached.
func (s *Store) supportsReturning(ctx context.Context) (bool, error) {
	switch s.returning.Load() {
	case 1:
		return true, nil
	case 2:
		return false, nil
	}
	var version string
	if err := s.db.GetContext(ctx, &version, `SELECT VERSION()`); err != nil {
		return false, fmt.Errorf("detect server version: %w", err)
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		s.returning.Store(1)
		return true, nil
	}
	s.returning.Store(2)
	return false, nil
}

const getTaskSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE id = ?`

// GetTask returns the task with the given id, or ErrNotFound.
func (s *Store) GetTask(ctx context.Context, id int64) (*tasks.Task, error) {
	var t tasks.Task
	if err := s.db.GetContext(ctx, &t, getTaskSQL, id); err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, notFound(err))
	}
	return &t, nil
}
