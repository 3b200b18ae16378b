package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// The results feed: accepted results in the order they became visible, read with a
// cursor, such that a reader that follows the cursor reads every result exactly once.
//
// Why not a column set when the result is inserted. Submit transactions commit out of
// order: one that inserted its row at 10:00:00.001 (or got the lower AUTO_INCREMENT
// id) may commit after one that inserted at 10:00:00.002. A reader that read up to the
// second one's position in between, and moved its cursor past it, has skipped the
// first for good. Any value given before the commit has this race; a "settle window"
// (read only rows older than the longest a transaction stays open) or a horizon taken
// from information_schema.INNODB_TRX (which needs the PROCESS privilege, counts whole
// seconds, and starts a transaction's clock only at its first InnoDB access, after the
// statement's NOW()) bet on timings the database does not promise.
//
// So the position is given after the commit. task_results.seq is NULL when a submit
// inserts its row. Numbering (numberResults) gives the next numbers to results that
// are committed and unnumbered, in one transaction:
//
//  1. lock the counter row (task_results_feed, id = 1): numberings take turns, and each
//     one commits before the next reads the counter;
//  2. read, without locking, up to n unnumbered rows in submission order. At READ
//     COMMITTED a plain SELECT sees only committed rows, so a submit still in flight
//     is not numbered now: it will be by a later numbering, with a larger number;
//  3. set seq = last_seq+1, +2, ... on those rows by primary key, in one UPDATE
//     (guarded by seq IS NULL), and last_seq to the highest, then commit.
//
// A reader reads `seq > cursor ORDER BY seq` in one statement, whose snapshot at READ
// COMMITTED holds the numberings committed when it began. Numberings commit in the
// order of their numbers (step 1: the next one gets the lock only once the one before
// has committed, and InnoDB makes a commit visible before it releases the
// transaction's locks), so that snapshot holds every seq up to the highest it holds:
// the numbered results form a prefix 1..N, with no hole a later commit could fill.
// The reader reads the prefix past its cursor (up to its limit) and moves its cursor
// to the last seq it read. Hence:
//
//   - nothing is skipped: a result numbered later gets a number above N, so above any
//     cursor handed out before, and one numbered before is in every later prefix;
//   - nothing is repeated: a seq is set once (the guard) and cursors only grow;
//   - no timing is assumed: no clock, no bound on how long a transaction stays open.
//     A submit that stays open only delays its own result.
//
// The order is the order of numbering, which is submission order (submitted_at, then
// task_id and fence) except that a result whose transaction committed late comes after
// the results numbered while it was open. Readers number as they go: a read that
// reaches the end of the numbered prefix first numbers what its limit leaves room for,
// so no background service is needed, and with nobody reading nothing is numbered.
// Numbering writes, so the feed is read on the primary, never on a replica.
const (
	// lockResultsSeqSQL creates the counter row on first use and locks it. Its
	// duplicate-key path takes the row's exclusive lock, which the numbering holds
	// to its commit.
	lockResultsSeqSQL = `INSERT INTO task_results_feed (id, last_seq) VALUES (1, 0) ON DUPLICATE KEY UPDATE id = id`
	// readResultsSeqSQL reads the counter. Under the lock, numberResults reads it
	// with FOR UPDATE: a locking read gets the latest committed value, whatever
	// the statement's snapshot.
	readResultsSeqSQL = `SELECT last_seq FROM task_results_feed WHERE id = 1`
	// unnumberedResultsSQL reads the task_results_seq key's NULL range in its
	// order, submitted_at then the primary key: no sort.
	unnumberedResultsSQL = `SELECT task_id, fence FROM task_results FORCE INDEX (task_results_seq)
WHERE seq IS NULL ORDER BY submitted_at, task_id, fence LIMIT ?`
	// numberResultsSQL sets the numbers, given as a derived table of (task_id,
	// fence, seq) rows: "SELECT ?, ?, ?" joined by " UNION ALL SELECT ?, ?, ?". The
	// derived table is read first and task_results by primary key, so the UPDATE
	// locks only the rows it numbers, all committed: it never waits on a submit.
	numberResultsSQL = `UPDATE (SELECT ? AS task_id, ? AS fence, ? AS seq%s) x
STRAIGHT_JOIN task_results r ON r.task_id = x.task_id AND r.fence = x.fence
SET r.seq = x.seq WHERE r.seq IS NULL`
	numberResultsRow = ` UNION ALL SELECT ?, ?, ?`
	setResultsSeqSQL = `UPDATE task_results_feed SET last_seq = ? WHERE id = 1`

	// resultsSQL reads the feed past a cursor from the task_results_seq key, in its
	// order. The task's own columns come from its row by primary key.
	resultsSQL = `SELECT r.seq, ` + resultColumns + `
FROM task_results r FORCE INDEX (task_results_seq) JOIN tasks t ON t.id = r.task_id
WHERE r.seq > ? ORDER BY r.seq LIMIT ?`

	// resultColumns are a Result's columns but the cursor, from task_results r
	// and tasks t.
	resultColumns = `r.task_id, r.fence, t.category, t.title, COALESCE(t.task_key, '') AS task_key, r.holder,
	COALESCE(r.editor_id, 0) AS editor_id, r.result, r.submitted_at, r.stage, COALESCE(r.stage_name, '') AS stage_name,
	COALESCE(r.decision, '') AS decision, COALESCE(r.notes, '') AS notes, COALESCE(t.group_id, 0) AS group_id, t.overlap`

	// taskResultsSQL reads the results of a task, or of every task of its
	// group: the task's by primary key, or its group's by tasks_group, each
	// task's results by primary key.
	taskResultsSQL = `(SELECT COALESCE(r.seq, 0) AS seq, ` + resultColumns + `
FROM tasks t FORCE INDEX (PRIMARY) JOIN task_results r FORCE INDEX (PRIMARY) ON r.task_id = t.id
WHERE t.id = ? AND t.group_id IS NULL)
UNION ALL
(SELECT COALESCE(r.seq, 0) AS seq, ` + resultColumns + `
FROM tasks x FORCE INDEX (PRIMARY) JOIN tasks t FORCE INDEX (tasks_group) ON t.group_id = x.group_id
	JOIN task_results r FORCE INDEX (PRIMARY) ON r.task_id = t.id
WHERE x.id = ?)
ORDER BY submitted_at, task_id, fence`

	// countResultsSQL counts the results past a cursor and those not numbered yet,
	// which will all come after it: two ranges of the task_results_seq key.
	countResultsSQL = `SELECT COUNT(*) FROM task_results FORCE INDEX (task_results_seq) WHERE seq IS NULL OR seq > ?`
)

// Results reads the accepted results after p.After, in feed order, and hands each to
// fn as it comes from the database, so a caller can stream them. It first numbers the
// committed results not numbered yet, as many as the page has room for beyond the
// numbered ones (see the comment at the top of this file for why a reader that
// follows the cursor sees each result exactly once, whatever order submits commit in).
//
// fn must not keep r, which is reused. An error from fn stops the read and is
// returned as it is; the page then says what was handed over before. It returns
// ErrInvalid for a bad limit or a cursor beyond the end of the feed, and ErrBusy
// when the numbering kept losing lock conflicts.
//
// Round trips: one read of the counter; when the reader is near the end of the feed,
// a numbering transaction (lock, read, one batch of UPDATEs, COMMIT); then the read,
// streamed.
func (s *Store) Results(ctx context.Context, p tasks.ResultsParams, fn func(r *tasks.Result) error) (tasks.ResultsPage, error) {
	page := tasks.ResultsPage{Next: p.After}
	limit, err := resultsLimit(p)
	if err != nil {
		return page, fmt.Errorf("read results: %w", err)
	}
	last, err := s.lastResultSeq(ctx)
	if err != nil {
		return page, fmt.Errorf("read results: %w", err)
	}
	if p.After > last {
		return page, fmt.Errorf("read results: %w: cursor %d is beyond the end of the results (%d)", tasks.ErrInvalid, p.After, last)
	}
	if room := int64(limit) - (last - p.After); room > 0 {
		if err := s.numberResults(ctx, int(room)); err != nil {
			return page, fmt.Errorf("read results: number new results: %w", err)
		}
	}
	rows, err := s.db.QueryxContext(ctx, resultsSQL, p.After, limit)
	if err != nil {
		return page, fmt.Errorf("read results: %w", err)
	}
	defer rows.Close()
	var r tasks.Result
	for rows.Next() {
		r = tasks.Result{}
		if err := rows.StructScan(&r); err != nil {
			return page, fmt.Errorf("read results: %w", err)
		}
		if err := fn(&r); err != nil {
			return page, err
		}
		page.Count++
		page.Next = r.Cursor
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("read results: %w", err)
	}
	page.More = page.Count == limit
	return page, nil
}

// TaskResults returns the results submitted for a task, each stage's, oldest
// first; for a task of a group (Task.GroupID), those of every task of the group.
// A task without results, or no such task, has none.
func (s *Store) TaskResults(ctx context.Context, taskID int64) ([]tasks.Result, error) {
	out := []tasks.Result{}
	if err := s.db.SelectContext(ctx, &out, taskResultsSQL, taskID, taskID); err != nil {
		return nil, fmt.Errorf("results of task %d: %w", taskID, err)
	}
	return out, nil
}

// CountResults counts the results a reader at cursor after has yet to read: those
// numbered beyond it and those not numbered yet. It is for progress reports: results
// accepted meanwhile make it grow.
func (s *Store) CountResults(ctx context.Context, after int64) (int64, error) {
	var n int64
	if err := s.db.GetContext(ctx, &n, countResultsSQL, after); err != nil {
		return 0, fmt.Errorf("count results: %w", err)
	}
	return n, nil
}

func resultsLimit(p tasks.ResultsParams) (int, error) {
	switch {
	case p.After < 0:
		return 0, fmt.Errorf("%w: cursor must not be negative", tasks.ErrInvalid)
	case p.Limit == 0:
		return tasks.ResultsLimitDefault, nil
	case p.Limit < 0 || p.Limit > tasks.ResultsLimitMax:
		return 0, fmt.Errorf("%w: limit must be 1..%d", tasks.ErrInvalid, tasks.ResultsLimitMax)
	}
	return p.Limit, nil
}

// lastResultSeq reads the highest seq given out, 0 before the first numbering.
func (s *Store) lastResultSeq(ctx context.Context) (int64, error) {
	var last int64
	err := s.db.GetContext(ctx, &last, readResultsSeqSQL)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return last, err
}

// numberResults gives the next seq numbers to up to n committed, unnumbered results,
// in submission order, in one transaction that holds the counter row's lock to its
// commit.
func (s *Store) numberResults(ctx context.Context, n int) error {
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, lockResultsSeqSQL); err != nil {
			return err
		}
		var last int64
		if err := tx.GetContext(ctx, &last, readResultsSeqSQL+` FOR UPDATE`); err != nil {
			return err
		}
		var keys []struct {
			TaskID int64 `db:"task_id"`
			Fence  int64 `db:"fence"`
		}
		if err := tx.SelectContext(ctx, &keys, unnumberedResultsSQL, n); err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		args := make([]any, 0, 3*len(keys))
		for i, k := range keys {
			args = append(args, k.TaskID, k.Fence, last+int64(i)+1)
		}
		res, err := tx.ExecContext(ctx, fmt.Sprintf(numberResultsSQL, strings.Repeat(numberResultsRow, len(keys)-1)), args...)
		if err != nil {
			return err
		}
		// Every row read is committed and unnumbered, and numberings take turns,
		// so all must match; anything else means results were numbered without
		// the counter's lock, and this numbering is rolled back.
		if n, err := res.RowsAffected(); err != nil || n != int64(len(keys)) {
			return fmt.Errorf("numbered %d of %d results (%v)", n, len(keys), err)
		}
		_, err = tx.ExecContext(ctx, setResultsSeqSQL, last+int64(len(keys)))
		return err
	})
}
