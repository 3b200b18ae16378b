package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

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
	// Each row carries the highest purged seq as this statement's snapshot
	// has it (an uncorrelated subquery, read once), so that a purge that
	// committed after the bounds were read is seen before any row is handed out.
	// The claim's active time, when it was measured, comes from its
	// claim_time row by primary key.
	resultsSQL = `SELECT r.seq, ` + resultColumns + `, ct.active_ms,
	COALESCE((SELECT f.last_seq FROM task_results_feed f WHERE f.id = 2), 0) AS purged_seq
FROM task_results r FORCE INDEX (task_results_seq) JOIN tasks t ON t.id = r.task_id
LEFT JOIN claim_time ct FORCE INDEX (PRIMARY) ON ct.task_id = r.task_id AND ct.fence = r.fence
WHERE r.seq > ? ORDER BY r.seq LIMIT ?`

	// resultColumns are a Result's columns but the cursor, from task_results r
	// and tasks t.
	resultColumns = `r.task_id, r.fence, t.category, t.title, COALESCE(t.task_key, '') AS task_key, r.holder,
	COALESCE(r.editor_id, 0) AS editor_id, r.result, r.submitted_at, r.stage, COALESCE(r.stage_name, '') AS stage_name,
	COALESCE(r.decision, '') AS decision, COALESCE(r.notes, '') AS notes, COALESCE(t.group_id, 0) AS group_id, t.overlap`

	// A page of a task's results is read in two steps, neither of which makes a
	// temporary table (the results' JSON would put it on disk). First the keys
	// of the page, from the task's (or each of its group's tasks') range of the
	// primary key: three short columns per result, the page's sorted in memory
	// (a task has at most stages + 2 * max_send_backs results, see
	// tasks.Workflow.MaxSendBacks), LIMIT page + 1. Then the page's rows by
	// primary key.
	//
	// taskResultIDsSQL reads the ids of the tasks of a task's group, the task's
	// row by primary key and its group's by tasks_group; none for a task of no
	// group.
	taskResultIDsSQL = `SELECT g.id FROM tasks g FORCE INDEX (tasks_group)
WHERE g.group_id = (SELECT t.group_id FROM tasks t FORCE INDEX (PRIMARY) WHERE t.id = ?) ORDER BY g.id`
	// taskResultKeysSQL reads the keys of a page: %s is the tasks' ids, "?, ?"
	// (at most tasks.MaxOverlap), the next placeholders the cursor (submitted_at
	// twice, task id twice, fence), the last the page's size + 1.
	taskResultKeysSQL = `SELECT task_id, fence, submitted_at FROM task_results FORCE INDEX (PRIMARY)
WHERE task_id IN (%s)
	AND (submitted_at < ? OR submitted_at = ? AND (task_id < ? OR task_id = ? AND fence < ?))
ORDER BY submitted_at DESC, task_id DESC, fence DESC LIMIT ?`
	// taskResultRowsSQL reads a page's rows by primary key: %s is their keys,
	// "(?, ?), (?, ?)". The task's own columns come from its row by primary key.
	// Each row names its editor too (by primary key), for a reader who sees
	// names, not ids.
	taskResultRowsSQL = `SELECT COALESCE(r.seq, 0) AS seq, ` + resultColumns + `, COALESCE(e.name, '') AS editor_name
FROM task_results r FORCE INDEX (PRIMARY) STRAIGHT_JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = r.task_id
LEFT JOIN editors e FORCE INDEX (PRIMARY) ON e.id = r.editor_id
WHERE (r.task_id, r.fence) IN (%s)`

	// sendBacksSQL reads a task's category and how many times it was sent back:
	// the task's row, and its range of task_results' primary key.
	sendBacksSQL = `SELECT t.category, (SELECT COUNT(*) FROM task_results r FORCE INDEX (PRIMARY)
	WHERE r.task_id = t.id AND r.decision = 'send_back') AS sent_back
FROM tasks t FORCE INDEX (PRIMARY) WHERE t.id = ?`

	// groupDecisionsSQL reads the decision of each done task of a group: its
	// accepted result, the one of its last fence, by primary key.
	groupDecisionsSQL = `SELECT t.id, COALESCE(r.decision, '') AS decision
FROM tasks t FORCE INDEX (tasks_group) JOIN task_results r FORCE INDEX (PRIMARY) ON r.task_id = t.id AND r.fence = t.fence
WHERE t.group_id = ? AND t.status = 'done'`

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
	last, purged, err := s.feedBounds(ctx)
	if err != nil {
		return page, fmt.Errorf("read results: %w", err)
	}
	if p.After < purged {
		return page, fmt.Errorf("read results: %w", &tasks.CursorExpiredError{Cursor: p.After, Oldest: purged})
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
	var r struct {
		tasks.Result
		Purged int64 `db:"purged_seq"`
	}
	for rows.Next() {
		r = struct {
			tasks.Result
			Purged int64 `db:"purged_seq"`
		}{}
		if err := rows.StructScan(&r); err != nil {
			return page, fmt.Errorf("read results: %w", err)
		}
		if r.Purged > p.After {
			// A purge committed between the bounds' read and this statement's
			// snapshot: the rows past the cursor may have a hole.
			return page, fmt.Errorf("read results: %w", &tasks.CursorExpiredError{Cursor: p.After, Oldest: r.Purged})
		}
		if err := fn(&r.Result); err != nil {
			return page, err
		}
		page.Count++
		page.Next = r.Cursor
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("read results: %w", err)
	}
	if page.Count == 0 {
		// An empty page may be one a purge emptied after the bounds' read.
		if _, purged, err := s.feedBounds(ctx); err != nil {
			return page, fmt.Errorf("read results: %w", err)
		} else if p.After < purged {
			return page, fmt.Errorf("read results: %w", &tasks.CursorExpiredError{Cursor: p.After, Oldest: purged})
		}
	}
	page.More = page.Count == limit
	return page, nil
}

// resultsCursor is what a cursor of a page of a task's results says: the sort
// key of the page's oldest result.
type resultsCursor struct {
	At     time.Time `json:"t"`
	TaskID int64     `json:"i"`
	Fence  int64     `json:"f"`
}

func (c resultsCursor) encode() string {
	data, _ := json.Marshal(c) // a struct of plain fields: cannot fail
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeResultsCursor(s string) (resultsCursor, error) {
	var c resultsCursor
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(data, &c) != nil || c.TaskID < 1 || c.Fence < 1 || c.At.IsZero() {
		return resultsCursor{}, fmt.Errorf("%w: before is not a cursor of this task's results", tasks.ErrInvalid)
	}
	return c, nil
}

// TaskResults returns a page of the results submitted for a task, each
// stage's: the latest p.Limit, or those older than p.Before, oldest first within
// the page; for a task of a group (Task.GroupID) and unless p.Own, those of
// every task of the group. A task without results, or no such task, has an
// empty page. Its cost is the page's rows and the task's (or group's) result
// keys, never the results themselves beyond the page's.
//
// It returns ErrInvalid for a limit out of range or a cursor it did not give.
//
// Round trips: with a group, one for its tasks; one for the page's keys; one
// for its rows, when it has any.
func (s *Store) TaskResults(ctx context.Context, p tasks.TaskResultsParams) (*tasks.TaskResultPage, error) {
	limit := p.Limit
	if limit == 0 {
		limit = tasks.TaskResultsLimitDefault
	}
	if limit < 1 || limit > tasks.TaskResultsLimitMax {
		return nil, fmt.Errorf("results of task %d: %w: limit must be 1..%d, got %d", p.TaskID, tasks.ErrInvalid, tasks.TaskResultsLimitMax, p.Limit)
	}
	// The cursor before the newest possible result.
	cur := resultsCursor{At: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), TaskID: math.MaxInt64, Fence: math.MaxInt64}
	if p.Before != "" {
		var err error
		if cur, err = decodeResultsCursor(p.Before); err != nil {
			return nil, fmt.Errorf("results of task %d: %w", p.TaskID, err)
		}
	}
	page := &tasks.TaskResultPage{Results: []tasks.Result{}}
	ids := []int64{p.TaskID}
	if !p.Own {
		var group []int64
		if err := s.db.SelectContext(ctx, &group, taskResultIDsSQL, p.TaskID); err != nil {
			return nil, fmt.Errorf("results of task %d: tasks of its group: %w", p.TaskID, err)
		}
		if len(group) > 0 {
			ids = group
		}
	}
	var keys []struct {
		TaskID      int64     `db:"task_id"`
		Fence       int64     `db:"fence"`
		SubmittedAt time.Time `db:"submitted_at"`
	}
	query, args := taskResultKeysQuery(ids, cur, limit+1)
	if err := s.db.SelectContext(ctx, &keys, query, args...); err != nil {
		return nil, fmt.Errorf("results of task %d: %w", p.TaskID, err)
	}
	if page.More = len(keys) > limit; page.More {
		keys = keys[:limit]
		last := keys[limit-1]
		page.Before = resultsCursor{At: last.SubmittedAt, TaskID: last.TaskID, Fence: last.Fence}.encode()
	}
	if len(keys) == 0 {
		return page, nil
	}
	var q strings.Builder
	args = listSQL(&q, "(?, ?)", keys, func(i int) []any { return []any{keys[i].TaskID, keys[i].Fence} })
	rows := make([]tasks.Result, 0, len(keys))
	if err := s.db.SelectContext(ctx, &rows, fmt.Sprintf(taskResultRowsSQL, q.String()), args...); err != nil {
		return nil, fmt.Errorf("results of task %d: %w", p.TaskID, err)
	}
	// Oldest first: the keys' order, reversed. A row gone meanwhile (purged
	// with its task) is left out.
	at := make(map[[2]int64]int, len(rows))
	for i := range rows {
		at[[2]int64{rows[i].TaskID, rows[i].Fence}] = i
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if j, ok := at[[2]int64{keys[i].TaskID, keys[i].Fence}]; ok {
			page.Results = append(page.Results, rows[j])
		}
	}
	return page, nil
}

// taskResultKeysQuery is taskResultKeysSQL for the tasks ids, the results before
// cur, at most n.
func taskResultKeysQuery(ids []int64, cur resultsCursor, n int) (string, []any) {
	var q strings.Builder
	args := listSQL(&q, "?", ids, func(i int) []any { return []any{ids[i]} })
	return fmt.Sprintf(taskResultKeysSQL, q.String()), append(args, cur.At, cur.At, cur.TaskID, cur.TaskID, cur.Fence, n)
}

// SendBacks returns the category of a task and how many times it was sent back
// (its results with the decision tasks.DecisionSendBack). It returns
// ErrNotFound for no such task. One round trip; its cost is the task's results'
// range of the primary key.
func (s *Store) SendBacks(ctx context.Context, taskID int64) (category string, n int, err error) {
	var row struct {
		Category string `db:"category"`
		SentBack int    `db:"sent_back"`
	}
	err = s.db.GetContext(ctx, &row, sendBacksSQL, taskID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, fmt.Errorf("send backs of task %d: %w", taskID, tasks.ErrNotFound)
	}
	if err != nil {
		return "", 0, fmt.Errorf("send backs of task %d: %w", taskID, err)
	}
	return row.Category, row.SentBack, nil
}

// GroupDecisions returns the decision of each done task of the group groupID
// (its accepted result's, "" for none), by task id. A group that does not exist,
// or has no done task, has none. One round trip: tasks_group, then each done
// task's result by primary key.
func (s *Store) GroupDecisions(ctx context.Context, groupID int64) (map[int64]string, error) {
	var rows []struct {
		ID       int64  `db:"id"`
		Decision string `db:"decision"`
	}
	if err := s.db.SelectContext(ctx, &rows, groupDecisionsSQL, groupID); err != nil {
		return nil, fmt.Errorf("decisions of group %d: %w", groupID, err)
	}
	out := make(map[int64]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Decision
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
