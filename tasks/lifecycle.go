package tasks

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskd/taskd/internal/textrule"
)

// HeartbeatParams are the arguments of Heartbeat.
type HeartbeatParams struct {
	TaskID int64
	Fence  int64
	Holder string
	// Lease is the new lease from now: LeaseMin..the store's MaxHold, truncated to
	// milliseconds.
	Lease time.Duration
}

// SubmitParams are the arguments of Submit.
type SubmitParams struct {
	TaskID int64
	Fence  int64
	Holder string
	// Result is any JSON value the database stores as it is: at most MaxJSONBytes,
	// nested at most MaxJSONDepth levels, with strings of valid UTF-8 that escape no
	// lone surrogate.
	Result json.RawMessage
	// Decision, for a task with stages, is what the submitter decided:
	// DecisionSendBack at a stage after the first sends the task back to the
	// stage before; anything else (DecisionApprove, or a verdict such as "yes",
	// which results of one group agree on when they are equal) moves it on.
	// A word of at most MaxDecisionLen lowercase ASCII letters, digits, '_' or
	// '-' (see CheckSubmission); may be empty.
	Decision string
	// Notes go with the result, e.g. why a reviewer sent the task back: at most
	// MaxNotesLen characters, line breaks and tabs allowed, no other control
	// characters.
	Notes string
}

// CheckResult returns nil if Submit would take result, else an error wrapping
// ErrInvalid that names the rule it breaks (see SubmitParams.Result).
func CheckResult(result json.RawMessage) error {
	return checkJSON("result", result)
}

// CheckSubmission is CheckResult, and checks a submit's decision and notes:
// the decision a word of 1..MaxDecisionLen lowercase ASCII letters, digits, '_'
// or '-', starting with a letter or a digit ("approve", "send_back", "yes");
// the notes at most MaxNotesLen characters of valid UTF-8, in lines (line
// breaks and tabs allowed) with no other control character and no bidi
// control (U+202A..U+202E, U+2066..U+2069).
func CheckSubmission(result json.RawMessage, decision, notes string) error {
	if err := CheckResult(result); err != nil {
		return err
	}
	if decision != "" {
		if err := textrule.Word(decision); err != nil {
			return fmt.Errorf("%w: decision %s", ErrInvalid, err)
		}
	}
	if notes != "" {
		if err := checkText("notes", notes, MaxNotesLen); err != nil {
			return err
		}
		if err := textrule.MultiLine(notes); err != nil {
			return fmt.Errorf("%w: notes %s", ErrInvalid, err)
		}
	}
	return nil
}

// ReleaseParams are the arguments of Release.
type ReleaseParams struct {
	TaskID int64
	Fence  int64
	Holder string
	// Reason is recorded in the audit event (truncated to 1024 characters).
	Reason string
	// Skip records a 'skipped' event instead of 'released', and keeps the task from
	// being offered to the same editor for the store's SkipFor instead of
	// the store's ReleaseCooldown. Only editors' claims can be skipped.
	Skip bool
	// Undelivered says that the holder never learnt of the claim (the request it
	// was made for ended first): the task is withheld from nobody, and the event
	// is 'released' with Reason, ReasonUndelivered when empty. Not with Skip.
	Undelivered bool
}

// ReasonUndelivered is the detail of the 'released' event of a claim given back
// because its holder never learnt of it (ReleaseParams.Undelivered).
const ReasonUndelivered = "undelivered"

// FailParams are the arguments of Fail.
type FailParams struct {
	TaskID int64
	Fence  int64
	Holder string
	// Err describes the failure; stored in last_error (truncated to 8192 characters)
	// and in the event (1024).
	Err string
	// Backoff delays the next claim: run_after = now + Backoff on the database clock.
	// Must not be negative; truncated to milliseconds.
	Backoff time.Duration
	// Dead makes the task dead now, whatever attempts it has left (a failure that
	// retrying cannot fix).
	Dead bool
}
