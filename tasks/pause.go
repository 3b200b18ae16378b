package tasks

import (
	"errors"
	"time"
)

// A paused category has a row in paused_categories. Every claim statement (the
// pending claim's batch and the locking claim's UPDATE) checks, by that table's
// primary key, that the task's category is not paused, so a pause holds on every
// replica from the moment it commits, whatever candidates a dispatcher still has in
// memory. Candidate reads leave paused categories out too, which only saves refused
// claims. Claims that were live when the pause committed are not touched: their
// heartbeats, submits and releases work as before.

// ErrPaused means the task's category is paused: the claim was refused and nothing
// was changed.
var ErrPaused = errors.New("category paused")

// ErrLimited means a limit in flight of the task's category (Workflow.MaxInFlight)
// or of its limit key (Workflow.KeyLimit) had no room for the claim: it was
// refused and nothing was changed. The task is claimable once a claim of its
// category (or key) ends.
var ErrLimited = errors.New("limit in flight reached")

// PausedCategory is a paused category.
type PausedCategory struct {
	Category string    `db:"category"`
	PausedAt time.Time `db:"paused_at"`
}
