package tasks

import (
	"fmt"
	"time"
)

// Agreement reads (AgreementParams): how many values one read takes at most.
const (
	// AgreementLimitDefault is AgreementParams.Limit when 0.
	AgreementLimitDefault = 10_000
	// AgreementLimitMax is the largest AgreementParams.Limit.
	AgreementLimitMax = 100_000
	// MaxAgreementFieldLen is the longest Workflow.AgreementField.
	MaxAgreementFieldLen = 64
)

// AgreementParams select the values agreement is measured over: the accepted
// results of the done tasks of overlap groups of one category, created in
// [Since, Until).
type AgreementParams struct {
	// Category is the category; required.
	Category string
	// Since and Until bound the tasks' creation time; Until after Since,
	// both required.
	Since, Until time.Time
	// Limit is the most values read: 1..AgreementLimitMax, 0 means
	// AgreementLimitDefault. The oldest tasks come first; a read that
	// reached it says so (AgreementValues.Truncated).
	Limit int
}

// AgreementValue is one editor's value for one overlap group: a unit's value of
// one coder, in the reliability data's terms.
type AgreementValue struct {
	GroupID    int64  `db:"group_id"`
	TaskID     int64  `db:"task_id"`
	EditorID   int64  `db:"editor_id"`
	EditorName string `db:"editor_name"`
	// Value is the decision, or the compared field as text (a JSON string
	// unquoted, a number or a boolean as written).
	Value string `db:"value"`
}

// AgreementValues are the values of an agreement read, oldest task first.
type AgreementValues struct {
	// Field is what was compared: "" the decision (Workflow.AgreementField).
	Field string
	// Interval is the category's Workflow.AgreementInterval.
	Interval bool
	Values   []AgreementValue
	// Truncated is true when the read stopped at its limit: later tasks of
	// the window were left out.
	Truncated bool
}

// CheckAgreementField validates a Workflow.AgreementField: 1..64 ASCII
// letters, digits or '_', starting with a letter.
func CheckAgreementField(f string) error {
	if f == "" || len(f) > MaxAgreementFieldLen {
		return fmt.Errorf("%w: agreement_field must be 1..%d characters, got %q", ErrInvalid, MaxAgreementFieldLen, f)
	}
	for i, c := range []byte(f) {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '_')) {
			return fmt.Errorf("%w: agreement_field %q must be ASCII letters, digits or '_', starting with a letter", ErrInvalid, f)
		}
	}
	return nil
}
