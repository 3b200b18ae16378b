package tasks

import (
	"time"
)

// RecycleParams are the arguments of RecycleExpired.
type RecycleParams struct {
	// Limit is the batch size: 1..RecycleLimitMax, 0 means RecycleLimitDefault.
	Limit int
}

// Recycled is a claim that a recycle returned to the pool.
type Recycled struct {
	// ID is the task's id.
	ID int64
	// Fence and Holder are those of the claim that expired.
	Fence  int64
	Holder string
	// Category is the task's category, where it is claimable again.
	Category string
	// ExpiredFor is how long the lease had passed when the batch was read, by the
	// database clock.
	ExpiredFor time.Duration
}

// LiveLeasesParams are the arguments of LiveLeases.
type LiveLeasesParams struct {
	// AfterID continues a listing after the task with this id; 0 starts at the
	// beginning.
	AfterID int64
	// Limit is the page size: 1..LiveLeasesLimitMax, 0 means LiveLeasesLimitDefault.
	Limit int
}
