package tasks

import (
	"encoding/json"
	"time"
)

// Workers claim, renew and complete many claims at once: ClaimBatch, HeartbeatBatch
// and Complete each send one statement batch (see batch), so a whole batch costs one
// round trip and one commit, whatever its size. Every member keeps its own promise: each
// row's write is fenced by its own (id, fence, holder), a member the store refuses
// changes nothing and refuses nothing else, and the batch's report says what happened
// to each. Rows are written by statements that name them in id order, as every other
// multi-row write does, so that two batches wait for each other rather than deadlock.

// BatchMax bounds the members of one ClaimBatch, HeartbeatBatch or Complete.
const BatchMax = 1000

// ClaimResult is one member's answer in ClaimBatch: its claim, or why the store
// refused it.
type ClaimResult struct {
	Claim *Claim
	// Err is ErrStale when the task was claimed or changed since it was read
	// (or is not pending), ErrPaused when its category is paused.
	Err error
}

// Renewed is one member's answer in HeartbeatBatch: the claim's new deadline, or
// why the store refused to extend it.
type Renewed struct {
	// LeaseExpiresAt is the new deadline, by the database clock.
	LeaseExpiresAt time.Time
	// Err is ErrStale when the claim is not live (wrapped with ErrCancelled
	// when a cancel ended it), ErrHoldLimit when its lease already reaches
	// the maximum hold.
	Err error
}

// Outcome is how a worker's claim ended, for Complete: done with a result, snoozed, or
// failed.
type Outcome struct {
	TaskID int64
	Fence  int64
	Holder string
	// Result, when not nil, completes the task with it, as Submit does (the same
	// rules apply to it).
	Result json.RawMessage
	// Snooze, when not nil (and Result nil), puts the task back untried: see
	// Snooze.
	Snooze *Snooze
	// Without a Result or a Snooze the claim failed, as Fail with these: Err
	// describes the failure, Backoff delays the next attempt, Dead makes the task
	// dead now.
	Err     string
	Backoff time.Duration
	Dead    bool
}

// SnoozeMax is the longest a snooze puts a task off (Snooze.For): a task to run
// later than that is a new task with a run_after.
const SnoozeMax = 30 * 24 * time.Hour

// Snooze is a worker's claim ended by its handler's asking to run the task again
// later (Outcome.Snooze). The task goes back to the pool claimable after For (from
// the end of the claim, by the database clock, to the millisecond), the claim's
// attempt not counted (attempts back by one), its snoozes (Task.Snoozes) one more, with
// a 'snoozed' event whose detail is For. A task that has snoozed Max times already is
// dead instead: last_error and the 'dead' event's detail "snoozed <n> times, the
// limit", its attempt not counted either, and the 'dead' webhook event (cause
// "snooze"). So a task snoozes at most Max times, whatever its handler asks; an
// operator's requeue of it resets its snoozes.
type Snooze struct {
	// For is 0..SnoozeMax: 0 makes the task claimable at once.
	For time.Duration
	// Max is the task's limit of snoozes, at least 1.
	Max int
}

// Completed is one member's answer in Complete: the claim it ended, or why the store
// refused it.
type Completed struct {
	Ended *Ended
	// Err is ErrStale when the claim is not live (nothing changed), or wraps
	// ErrInvalid when the store refused the member's own values.
	Err error
}
