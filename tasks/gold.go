package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Gold tasks are tasks whose answer is known. An editor is served one as a
// copy of its own (a new task, already assigned to the editor), mixed into its
// stream at its category's rate and indistinguishable from the other tasks to
// the editor; the copy's result is scored against the answer and kept with the
// score, never as a real result (see GoldRule).

// Gold comparison rules (GoldRule.Rule).
const (
	// GoldRuleDecision compares the submit's decision (approve when it gives
	// none) with the answer's.
	GoldRuleDecision = "decision"
	// GoldRuleFields compares the listed top-level fields of the submitted
	// result with the answer's, each as text with surrounding spaces trimmed.
	GoldRuleFields = "fields"
)

// ErrGoldHeld means a task cannot be marked gold now: a claim holds it. Mark
// it once the claim ended. Nothing was changed.
var ErrGoldHeld = errors.New("task is held by a claim")

// GoldRunAfter is the run_after of a gold task's copies, and of a gold task's
// own row when it was pending: no claim ever finds such a row claimable, so a
// copy released or expired never goes to anyone else, and a gold task is
// never handed out as itself.
var GoldRunAfter = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// MaxGoldFields bounds GoldRule.Fields.
const MaxGoldFields = 32

// GoldRule is how a category's gold tasks are mixed in and scored.
type GoldRule struct {
	// Rule is GoldRuleDecision or GoldRuleFields.
	Rule string
	// Fields are the result fields compared under GoldRuleFields: 1..32
	// top-level names.
	Fields []string
	// Rate is the share of an editor's new claims of the category that are
	// gold tasks, 0..1 (0.05: one in twenty on average). 0: gold tasks of the
	// category are never served.
	Rate float64
	// MinAccuracy, when not 0, is the floor: an editor whose accuracy over
	// its last MinAnswers gold answers of the category falls under it is
	// paused from the category until an admin lifts the pause. 0..1.
	MinAccuracy float64
	// MinAnswers is how many gold answers the floor judges, the last ones;
	// an editor with fewer is not judged. 1..1000, needed with MinAccuracy.
	MinAnswers int
}

// Check returns an error wrapping ErrInvalid when r is not a valid rule; the
// message names the field.
func (r GoldRule) Check() error {
	switch r.Rule {
	case GoldRuleDecision:
		if len(r.Fields) > 0 {
			return fmt.Errorf("%w: gold fields are for rule %s", ErrInvalid, GoldRuleFields)
		}
	case GoldRuleFields:
		if len(r.Fields) == 0 || len(r.Fields) > MaxGoldFields {
			return fmt.Errorf("%w: gold fields must list 1..%d fields", ErrInvalid, MaxGoldFields)
		}
		for _, f := range r.Fields {
			if err := CheckAgreementField(f); err != nil {
				return fmt.Errorf("%w: gold field %q must be 1..%d characters", ErrInvalid, f, MaxAgreementFieldLen)
			}
		}
	default:
		return fmt.Errorf("%w: gold rule must be %s or %s, not %q", ErrInvalid, GoldRuleDecision, GoldRuleFields, r.Rule)
	}
	if !(r.Rate >= 0 && r.Rate <= 1) {
		return fmt.Errorf("%w: gold rate must be 0..1", ErrInvalid)
	}
	if !(r.MinAccuracy >= 0 && r.MinAccuracy <= 1) {
		return fmt.Errorf("%w: gold min_accuracy must be 0..1", ErrInvalid)
	}
	if r.MinAccuracy > 0 && (r.MinAnswers < 1 || r.MinAnswers > 1000) {
		return fmt.Errorf("%w: gold min_answers must be 1..1000 with min_accuracy", ErrInvalid)
	}
	return nil
}

// GoldAnswer is a gold task's known answer: the decision (GoldRuleDecision)
// or the result whose fields are compared (GoldRuleFields).
type GoldAnswer struct {
	Decision string          `json:"decision,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
}

// CheckAnswer returns an error wrapping ErrInvalid when a is not an answer
// r can compare with: no decision under GoldRuleDecision, a result that is
// not an object or lacks a compared field under GoldRuleFields.
func (r GoldRule) CheckAnswer(a GoldAnswer) error {
	switch r.Rule {
	case GoldRuleDecision:
		if a.Decision == "" {
			return fmt.Errorf("%w: gold answer needs a decision (rule %s)", ErrInvalid, r.Rule)
		}
		return checkDecision(a.Decision)
	default:
		fields, err := resultFields(a.Result)
		if err != nil {
			return fmt.Errorf("%w: gold answer needs a result object (rule %s)", ErrInvalid, r.Rule)
		}
		for _, f := range r.Fields {
			if _, ok := fields[f]; !ok {
				return fmt.Errorf("%w: gold answer's result lacks field %q", ErrInvalid, f)
			}
		}
		return checkJSON("gold result", a.Result)
	}
}

// check checks that a is an answer some rule can compare with: a decision,
// a result object, or both.
func (a GoldAnswer) check() error {
	if a.Decision == "" && len(a.Result) == 0 {
		return fmt.Errorf("%w: gold answer needs a decision or a result", ErrInvalid)
	}
	if a.Decision != "" {
		if err := checkDecision(a.Decision); err != nil {
			return err
		}
	}
	if len(a.Result) > 0 {
		if _, err := resultFields(a.Result); err != nil {
			return fmt.Errorf("%w: gold answer's result must be a JSON object", ErrInvalid)
		}
		return checkJSON("gold result", a.Result)
	}
	return nil
}

// checkDecision checks a decision as a submit's.
func checkDecision(d string) error {
	return CheckSubmission(json.RawMessage("{}"), d, "")
}

// Score compares a submission (its result and decision) with the answer a
// under r: correct, or the names of what differed (the decision, or the
// fields in r's order). A result that is not an object differs in every
// field.
func (r GoldRule) Score(a GoldAnswer, result json.RawMessage, decision string) (correct bool, differed []string) {
	if r.Rule == GoldRuleDecision {
		if decision == "" {
			decision = DecisionApprove
		}
		if strings.TrimSpace(decision) != strings.TrimSpace(a.Decision) {
			return false, []string{"decision"}
		}
		return true, nil
	}
	want, _ := resultFields(a.Result)
	got, err := resultFields(result)
	for _, f := range r.Fields {
		if err != nil || fieldText(got[f]) != fieldText(want[f]) {
			differed = append(differed, f)
		}
	}
	return len(differed) == 0, differed
}

func resultFields(raw json.RawMessage) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalid)
	}
	return m, nil
}

// fieldText is a field's value as compared: a string's text, trimmed, or any
// other value's compact JSON; "" when absent.
func fieldText(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return strings.TrimSpace(s)
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return strings.TrimSpace(string(v))
	}
	return b.String()
}

// GoldTask is a task whose answer is known.
type GoldTask struct {
	TaskID    int64
	Category  string
	Answer    GoldAnswer
	CreatedAt time.Time
}

// GoldClaimParams asks for a copy of a gold task for an editor.
type GoldClaimParams struct {
	EditorID int64
	Holder   string
	// Categories are those the copy may be of (each with a gold rule).
	Categories []string
	// Lease is the claim's lease (> 0).
	Lease time.Duration
}

// GoldCopy is a copy of a gold task served to an editor, and its score once
// answered.
type GoldCopy struct {
	CopyID   int64
	GoldID   int64
	EditorID int64
	Category string
	Answered bool
	Correct  bool
	Differed []string
}

// GoldScored is what a gold submit recorded.
type GoldScored struct {
	Copy GoldCopy
	// Paused is set when the answer put the editor under its category's
	// floor and paused it.
	Paused *GoldPause
}

// GoldPause is an editor paused from a category by its gold accuracy.
type GoldPause struct {
	EditorID   int64
	EditorName string
	Category   string
	Reason     string
	PausedAt   time.Time
}

// GoldPauseReason is the reason of a pause: "gold accuracy 62% < 80% over
// last 50".
func GoldPauseReason(correct, answers int, floor float64) string {
	return fmt.Sprintf("gold accuracy %d%% < %d%% over last %d",
		int(math.Floor(100*float64(correct)/float64(answers))), int(math.Round(100*floor)), answers)
}

// GoldAccuracyParams selects the gold scores GoldAccuracy reads: of one
// category, or every one when empty, answered since Since.
type GoldAccuracyParams struct {
	Category string
	Since    time.Time
}

// GoldAccuracy is an editor's gold answers in a category over a window.
type GoldAccuracy struct {
	EditorID   int64  `db:"editor_id"`
	EditorName string `db:"editor_name"`
	Category   string `db:"category"`
	Answers    int    `db:"answers"`
	Correct    int    `db:"correct"`
}

// Accuracy is Correct / Answers, 0 without answers.
func (a GoldAccuracy) Accuracy() float64 {
	if a.Answers == 0 {
		return 0
	}
	return float64(a.Correct) / float64(a.Answers)
}

// SortGoldAccuracy orders rows by category, then editor name.
func SortGoldAccuracy(rows []GoldAccuracy) {
	slices.SortFunc(rows, func(a, b GoldAccuracy) int {
		return cmpOr(strings.Compare(a.Category, b.Category), strings.Compare(a.EditorName, b.EditorName))
	})
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}
