package tasks

import (
	"time"
)

// What a sweeper needs besides RecycleExpired: the lease each live claim
// has left by the database clock (to re-create a lost lock with the right time to
// live), and which of a set of tasks are live claims and whose (to find locks that
// belong to no live claim).

// LiveLease is a live claim with the time its lease has left.
type LiveLease struct {
	// ID is the task's id.
	ID     int64
	Fence  int64
	Holder string
	// Remaining is the time until the lease passes, by the database clock when the
	// page was read; 0 when it passes this millisecond.
	Remaining time.Duration
}
