package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Task limits, matching the column sizes in schema.sql.
const (
	MaxCategoryLen     = 64
	MaxTitleLen        = 512
	MaxAttemptsDefault = 5
	MaxAttemptsLimit   = 100
)

// NewTask is a task to insert. Text must be valid UTF-8; lengths are in characters.
type NewTask struct {
	// Category is 1..64 characters with no leading or trailing spaces.
	Category string
	// Priority orders the pool: higher first. Any 32-bit integer.
	Priority int
	// Title is 1..512 characters.
	Title string
	// Payload is a JSON object of at most MaxJSONBytes, nesting at most MaxJSONDepth
	// levels of arrays and objects, whose strings are valid UTF-8 and escape no lone
	// surrogate; empty means {}.
	Payload json.RawMessage
	// MaxAttempts is 1..100; 0 means MaxAttemptsDefault.
	MaxAttempts int
}

// newTaskRow is a validated NewTask.
type newTaskRow struct {
	category    string
	priority    int
	title       string
	payload     string
	maxAttempts int
}

// Validate checks t as InsertTasks does, without touching the database. Its errors
// wrap ErrInvalid and name the field.
func (t NewTask) Validate() error {
	_, err := t.validate()
	return err
}

func (t NewTask) validate() (newTaskRow, error) {
	if err := checkCategory(t.Category); err != nil {
		return newTaskRow{}, err
	}
	if t.Priority < math.MinInt32 || t.Priority > math.MaxInt32 {
		return newTaskRow{}, fmt.Errorf("%w: priority must fit in 32 bits", ErrInvalid)
	}
	if err := checkText("title", t.Title, MaxTitleLen); err != nil {
		return newTaskRow{}, err
	}
	payload := "{}"
	if len(t.Payload) > 0 {
		if err := checkJSON("payload", t.Payload); err != nil {
			return newTaskRow{}, err
		}
		if firstNonSpace(t.Payload) != '{' {
			return newTaskRow{}, fmt.Errorf("%w: payload must be a JSON object", ErrInvalid)
		}
		payload = string(t.Payload)
	}
	maxAttempts := t.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = MaxAttemptsDefault
	}
	if maxAttempts < 1 || maxAttempts > MaxAttemptsLimit {
		return newTaskRow{}, fmt.Errorf("%w: max_attempts must be 1..%d", ErrInvalid, MaxAttemptsLimit)
	}
	return newTaskRow{t.Category, t.Priority, t.Title, payload, maxAttempts}, nil
}

// checkCategory validates a category. Leading and trailing spaces are refused because
// the database compares with PAD SPACE ("a" = "a "), which Go does not.
func checkCategory(c string) error {
	if err := checkText("category", c, MaxCategoryLen); err != nil {
		return err
	}
	if strings.TrimSpace(c) != c {
		return fmt.Errorf("%w: category must not start or end with spaces", ErrInvalid)
	}
	return nil
}

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

const insertTasksSQL = `INSERT INTO tasks (category, priority, title, payload, max_attempts) VALUES `

// InsertTasks validates all tasks, then inserts them in multi-row batches (at most
// Config.InsertBatchSize rows, and 4 MiB of values unless one task has more) inside
// one transaction, and returns their ids in input order. If any task is invalid, it
// returns an error wrapping ErrInvalid that names the task's index and field, and
// inserts nothing.
//
// On MariaDB the ids come from INSERT ... RETURNING id. On MySQL, which has no
// RETURNING, they are LAST_INSERT_ID() plus multiples of auto_increment_increment: a
// multi-row INSERT with a known row count is a "simple insert", which InnoDB gives
// consecutive values in every innodb_autoinc_lock_mode.
func (s *Store) InsertTasks(ctx context.Context, tasks []NewTask) ([]int64, error) {
	if len(tasks) == 0 {
		return []int64{}, nil
	}
	rows := make([]newTaskRow, len(tasks))
	for i, t := range tasks {
		r, err := t.validate()
		if err != nil {
			return nil, fmt.Errorf("insert tasks: task %d: %w", i, err)
		}
		rows[i] = r
	}
	returning, err := s.supportsReturning(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}

	ids := make([]int64, 0, len(rows))
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		ids = ids[:0] // a retried transaction starts over
		var step int64
		if !returning {
			if err := tx.GetContext(ctx, &step, `SELECT @@auto_increment_increment`); err != nil {
				return err
			}
		}
		for start := 0; start < len(rows); {
			batch := rows[start:s.insertBatchEnd(rows, start)]
			start += len(batch)
			var q strings.Builder
			q.WriteString(insertTasksSQL)
			args := make([]any, 0, 5*len(batch))
			for i, r := range batch {
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString("(?, ?, ?, ?, ?)")
				args = append(args, r.category, r.priority, r.title, r.payload, r.maxAttempts)
			}
			if returning {
				q.WriteString(" RETURNING id")
				var got []int64
				if err := tx.SelectContext(ctx, &got, q.String(), args...); err != nil {
					return err
				}
				if len(got) != len(batch) {
					return fmt.Errorf("insert returned %d ids for %d rows", len(got), len(batch))
				}
				ids = append(ids, got...)
				continue
			}
			res, err := tx.ExecContext(ctx, q.String(), args...)
			if err != nil {
				return err
			}
			first, err := res.LastInsertId()
			if err != nil {
				return err
			}
			for i := range batch {
				ids = append(ids, first+int64(i)*step)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", refusedValue(err))
	}
	return ids, nil
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
func (s *Store) GetTask(ctx context.Context, id int64) (*Task, error) {
	var t Task
	if err := s.db.GetContext(ctx, &t, getTaskSQL, id); err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, notFound(err))
	}
	return &t, nil
}

const taskHistorySQL = `SELECT id, task_id, kind, fence, COALESCE(holder, '') AS holder,
	COALESCE(editor_id, 0) AS editor_id, COALESCE(detail, '') AS detail, ` + "`at`" + `
FROM task_events WHERE task_id = ? ORDER BY id`

// TaskHistory returns the audit trail of a task, oldest first. A task without events
// (or an unknown id) has an empty history.
func (s *Store) TaskHistory(ctx context.Context, id int64) ([]Event, error) {
	evs := []Event{}
	if err := s.db.SelectContext(ctx, &evs, taskHistorySQL, id); err != nil {
		return nil, fmt.Errorf("task history %d: %w", id, err)
	}
	return evs, nil
}
