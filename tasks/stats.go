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

// OverdueCountMax is the most QueueStats counts of one category's overdue
// tasks: past it, the count says "at least this many".
const OverdueCountMax = 100_000

// QueueStat is what a category's queue looks like to an operator scaling
// workers: how long its oldest claimable task has waited, and how many of its
// claimable tasks are past their due_at, on the database clock.
type QueueStat struct {
	Category string
	// OldestClaimable is how long the category's oldest claimable task has
	// been claimable: since its insert or run_after, its release, recycle,
	// requeue or send back, or the end of its retry's backoff. 0 when none is
	// claimable now.
	OldestClaimable time.Duration
	// Overdue is the number of claimable tasks past their due_at, at most
	// OverdueCountMax.
	Overdue int64
}

// TableSize is one table's size as information_schema estimates it.
type TableSize struct {
	// Name is the table's name.
	Name string `db:"name"`
	// Bytes is its size on disk, data and indexes (allocated pages).
	Bytes int64 `db:"bytes"`
	// Rows is InnoDB's estimate of its rows.
	Rows int64 `db:"table_rows"`
}

// Storage is what the finished data takes: the size of each table retention
// purges, and how long ago the oldest task kept of each ended status ended
// (absent for a status with none).
type Storage struct {
	Tables []TableSize
	Oldest map[Status]time.Duration
}
