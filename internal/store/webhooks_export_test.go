package store

// The webhook queries, for the plan checks.
const (
	FanOutLockSQL    = fanOutLockSQL
	DueDeliveriesSQL = dueDeliveriesSQL
	BacklogNewSQL    = backlogNewSQL
	BacklogSQL       = backlogSQL
)
