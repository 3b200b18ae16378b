package tasks

import (
	"time"
)

// ExpiringWithinDefault is the window PoolStats uses when given none.
const ExpiringWithinDefault = time.Minute

// PoolStats is a snapshot of the pool: its tasks counted by status and category, its
// live claims and its paused categories, as the store reads them (compare
// dispatcher.Stats, the counters of one process).
type PoolStats struct {
	// ByStatus counts tasks per status; every status is present.
	ByStatus map[Status]int64
	// ByCategory counts tasks per category and status, ordered by category then status;
	// pairs with no tasks are left out.
	ByCategory []CategoryCount
	// ByStage counts the tasks that have stages (Task.Stages) per category,
	// stage and status, ordered by category, stage name then status; tasks
	// without stages are not in it, and triples with no tasks are left out.
	// Never nil.
	ByStage []StageCount
	// Holders is the number of distinct holders with a live claim.
	Holders int64
	// Live is the number of live claims (assigned, lease not passed).
	Live int64
	// Expired is the number of assigned tasks whose lease has passed and that no claim
	// or sweep has taken back yet.
	Expired int64
	// ExpiringSoon is the number of live claims whose lease passes within the window
	// given to PoolStats.
	ExpiringSoon int64
	// Paused lists the paused categories by name (paused with PauseCategory); never nil.
	Paused []string
}

// CategoryCount is the number of tasks of one category in one status.
type CategoryCount struct {
	Category string `db:"category"`
	Status   Status `db:"status"`
	Count    int64  `db:"n"`
}

// StageCount is the number of tasks of one category at one stage in one status.
type StageCount struct {
	Category string `db:"category"`
	Stage    string `db:"stage_name"`
	Status   Status `db:"status"`
	Count    int64  `db:"n"`
}
