package dispatcher

import (
	"context"
	"time"

	"github.com/taskd/taskd/tasks"
)

// ClaimMany makes up to one claim per holder from categories, as a worker's
// claim loop does for its free slots.
func (d *Dispatcher) ClaimMany(ctx context.Context, holders, categories []string) ([]*tasks.Claim, error) {
	return d.claimMany(ctx, holders, categories)
}

// SetClaimGather sets how long w's claim loop waits for slots to free
// together (workerClaimGather); call it before Start.
func (w *Worker) SetClaimGather(d time.Duration) { w.gatherFor = d }

// WorkerWriters is how many batches of outcomes a worker writes at once.
const WorkerWriters = workerWriters
