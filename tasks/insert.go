package tasks

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskd/taskd/internal/textrule"
)

// Task limits, matching the column sizes in schema.sql.
const (
	MaxCategoryLen     = 64
	MaxTitleLen        = 512
	MaxAttemptsDefault = 5
	MaxAttemptsLimit   = 100
	// MaxKeyLen is the longest task key, in characters.
	MaxKeyLen = 255
	// MaxLimitKeyLen is the longest limit key, in bytes.
	MaxLimitKeyLen = 128
)

// The range of NewTask.RunAfter and NewTask.DueAt: what a DATETIME column holds,
// short of NoDue.
var (
	minTaskTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTaskTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
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
	// Key, when not empty, is a unique external id of 1..MaxKeyLen characters with no
	// leading or trailing spaces: inserting a task whose key is held returns the
	// task that holds it instead of making a second one (see Inserted).
	Key string
	// KeyHold says how long the task holds its Key (see KeyHold); it needs a Key.
	// Empty means KeyHoldForever.
	KeyHold KeyHold
	// RunAfter, when not zero, is the earliest time the task is handed out. Zero
	// means at once (the database clock at insert). Truncated to milliseconds.
	RunAfter time.Time
	// DueAt, when not zero, is the task's deadline: within a priority, tasks with a
	// deadline are handed out first, earliest first, before tasks without one.
	// Truncated to milliseconds.
	DueAt time.Time
	// Stages, when not nil, are the task's own stages in order (see
	// Workflow.Stages); nil means its category's, and an empty list one stage
	// whatever the category says.
	Stages []string
	// Overlap, when not 0, is how many independent results the task asks for,
	// 1..MaxOverlap, each from a different editor; 0 means its category's.
	Overlap int
	// LimitKey, when not empty, is the task's limit key: 1..MaxLimitKeyLen bytes
	// of valid UTF-8 with no leading or trailing spaces. In a category with a
	// KeyLimit (Workflow.KeyLimit), at most that many tasks of one key are
	// assigned at once across every process. Empty means none.
	LimitKey string
	// Gold, when set, is the task's known answer: the task is a gold task from
	// its insert on, in the same transaction (see GoldAnswer), held out of the
	// pool for good (its RunAfter is GoldRunAfter whatever is given) and
	// served to editors as copies. It asks for one result: Overlap 0 or 1, in
	// a category whose workflow has no overlap. Validate checks that it is an
	// answer at all (a decision or a result object); that it fits its
	// category's gold rule is checked by the engine and the API, which know
	// the rules. Default: nil, an ordinary task.
	Gold *GoldAnswer
}

// Validate checks t as the store's Insert does, without touching the database.
// Its errors wrap ErrInvalid and name the field.
func (t NewTask) Validate() error {
	if err := CheckCategory(t.Category); err != nil {
		return err
	}
	if t.Priority < math.MinInt32 || t.Priority > math.MaxInt32 {
		return fmt.Errorf("%w: priority must fit in 32 bits", ErrInvalid)
	}
	if err := checkText("title", t.Title, MaxTitleLen); err != nil {
		return err
	}
	if len(t.Payload) > 0 {
		if err := checkJSON("payload", t.Payload); err != nil {
			return err
		}
		if firstNonSpace(t.Payload) != '{' {
			return fmt.Errorf("%w: payload must be a JSON object", ErrInvalid)
		}
	}
	if t.MaxAttempts != 0 && (t.MaxAttempts < 1 || t.MaxAttempts > MaxAttemptsLimit) {
		return fmt.Errorf("%w: max_attempts must be 1..%d", ErrInvalid, MaxAttemptsLimit)
	}
	if t.Key != "" {
		if err := CheckKey(t.Key); err != nil {
			return err
		}
	}
	if t.KeyHold != "" {
		if t.Key == "" {
			return fmt.Errorf("%w: key_hold needs a key", ErrInvalid)
		}
		if _, _, err := t.KeyHold.Period(); err != nil {
			return err
		}
	}
	if err := CheckTime("run_after", t.RunAfter); err != nil {
		return err
	}
	if err := CheckTime("due_at", t.DueAt); err != nil {
		return err
	}
	if err := CheckStages(t.Stages); err != nil {
		return err
	}
	if t.Overlap < 0 || t.Overlap > MaxOverlap {
		return fmt.Errorf("%w: overlap must be 1..%d, got %d", ErrInvalid, MaxOverlap, t.Overlap)
	}
	if t.LimitKey != "" {
		if err := CheckLimitKey(t.LimitKey); err != nil {
			return err
		}
	}
	if t.Gold != nil {
		if err := t.Gold.check(); err != nil {
			return err
		}
		if t.Overlap > 1 {
			return fmt.Errorf("%w: a gold task asks for one result, not overlap %d", ErrInvalid, t.Overlap)
		}
	}
	return nil
}

// CheckLimitKey checks a limit key: 1..MaxLimitKeyLen bytes of valid UTF-8
// with no leading or trailing spaces (the database compares with PAD SPACE).
// Its errors wrap ErrInvalid.
func CheckLimitKey(k string) error {
	if k == "" || len(k) > MaxLimitKeyLen || !utf8.ValidString(k) {
		return fmt.Errorf("%w: limit_key must be 1..%d bytes of UTF-8", ErrInvalid, MaxLimitKeyLen)
	}
	if strings.TrimSpace(k) != k {
		return fmt.Errorf("%w: limit_key must not start or end with spaces", ErrInvalid)
	}
	return nil
}

// CheckKey checks a task key: 1..MaxKeyLen characters of valid UTF-8 with no leading
// or trailing spaces, which are refused because the database compares with PAD
// SPACE ("k" = "k "), which Go does not. Its errors wrap ErrInvalid.
func CheckKey(k string) error {
	if err := checkText("key", k, MaxKeyLen); err != nil {
		return err
	}
	if strings.TrimSpace(k) != k {
		return fmt.Errorf("%w: key must not start or end with spaces", ErrInvalid)
	}
	return nil
}

// CheckTime checks an optional time a task's columns hold (NewTask.RunAfter and
// DueAt, the bounds of ListParams): zero, or, in UTC truncated to milliseconds,
// within what a DATETIME holds, short of NoDue. field names the time in the
// error, which wraps ErrInvalid.
func CheckTime(field string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Truncate(time.Millisecond)
	if t.Before(minTaskTime) || !t.Before(maxTaskTime) {
		return fmt.Errorf("%w: %s must be from %s to %s", ErrInvalid, field,
			minTaskTime.Format(time.DateOnly), maxTaskTime.Format(time.DateOnly))
	}
	return nil
}

// CheckCategory checks a category: 1..MaxCategoryLen characters of valid UTF-8 with
// no leading or trailing spaces, which are refused because the database compares
// with PAD SPACE ("a" = "a "), which Go does not, and one line: no control
// characters, line or paragraph separators or bidi controls. Its errors wrap
// ErrInvalid.
func CheckCategory(c string) error {
	if err := checkText("category", c, MaxCategoryLen); err != nil {
		return err
	}
	if strings.TrimSpace(c) != c {
		return fmt.Errorf("%w: category must not start or end with spaces", ErrInvalid)
	}
	if err := textrule.OneLine(c); err != nil {
		return fmt.Errorf("%w: category %s", ErrInvalid, err)
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

// Inserted is what Insert did with one task.
type Inserted struct {
	// ID is the task's id: the new task's, or the existing task's when Created is
	// false.
	ID int64
	// Created is false when a task held the same key (see KeyHold) or came
	// earlier in the same call with it: no task was made, and ID is that task's.
	Created bool
	// Slots are the ids of the tasks of the task's group, one per result, ID
	// first, when it has an overlap above 1 (see NewTask.Overlap); nil
	// otherwise.
	Slots []int64
}

// Task history pages.
const (
	// EventsLimitDefault is the events a page of a task's history holds when
	// TaskEventsParams.Limit is 0.
	EventsLimitDefault = 50
	// EventsLimitMax is the most events one page holds.
	EventsLimitMax = 500
)

// TaskEventsParams select a page of a task's history.
type TaskEventsParams struct {
	TaskID int64
	// Before, when not 0, is the cursor: the page holds the events older than the
	// event with this id (EventPage.Before of the newer page). 0 is the latest.
	Before int64
	// Limit is the most events of the page: 1..EventsLimitMax, 0 means
	// EventsLimitDefault.
	Limit int
}

// EventPage is a page of a task's history.
type EventPage struct {
	// Events are the page's events, oldest first.
	Events []Event
	// More is set when older events exist: read them with Before.
	More bool
	// Before is the cursor of the next older page: the id of the page's oldest
	// event, or 0 when there is no older page.
	Before int64
}

// CheckEditorName checks an editor's name (see NormalizeEditorName). Its errors
// wrap ErrInvalid.
func CheckEditorName(name string) error {
	_, err := NormalizeEditorName(name)
	return err
}

// NormalizeEditorName returns name as the store keeps it, in Unicode's NFC
// (a letter and its combining accent as one character), or an error wrapping
// ErrInvalid: a name is 1..MaxEditorNameLen characters of valid UTF-8, not
// blank, with no space at either end, and with nothing invisible or that
// changes how the rest is shown (control characters, line breaks, tabs,
// format characters such as bidi controls and zero-width spaces, variation
// selectors, spaces other than U+0020).
func NormalizeEditorName(name string) (string, error) {
	if err := checkText("name", name, 4*MaxEditorNameLen); err != nil {
		return "", err
	}
	n, err := textrule.Name(name)
	if err != nil {
		return "", fmt.Errorf("%w: name %s", ErrInvalid, err)
	}
	if err := checkText("name", n, MaxEditorNameLen); err != nil {
		return "", err
	}
	return n, nil
}
