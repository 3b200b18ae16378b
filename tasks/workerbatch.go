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

// Outcome is how a worker's claim ended, for Complete: done with a result, or failed.
type Outcome struct {
	TaskID int64
	Fence  int64
	Holder string
	// Result, when not nil, completes the task with it, as Submit does (the same
	// rules apply to it).
	Result json.RawMessage
	// Without a Result the claim failed, as Fail with these: Err describes the
	// failure, Backoff delays the next attempt, Dead makes the task dead now.
	Err     string
	Backoff time.Duration
	Dead    bool
}

// Completed is one member's answer in Complete: the claim it ended, or why the store
// refused it.
type Completed struct {
	Ended *Ended
	// Err is ErrStale when the claim is not live (nothing changed), or wraps
	// ErrInvalid when the store refused the member's own values.
	Err error
}
