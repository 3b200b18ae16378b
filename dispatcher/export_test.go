package dispatcher

import (
	"context"
	"time"

	"github.com/taskd/taskd/tasks"
)

// CountClaim counts a claim that took latency, as the dispatcher does for
// each claim it commits while h runs: for tests that need latencies of
// their choosing.
func (h *History) CountClaim(latency time.Duration) { h.act.claimed(latency) }

// ClaimMany makes up to one claim per holder from categories, as a worker's
// claim loop does for its free slots.
func (d *Dispatcher) ClaimMany(ctx context.Context, holders, categories []string) ([]*tasks.Claim, error) {
	return d.claimMany(ctx, holders, categories)
}

// Delivering reports whether w holds the delivery lock now.
func (w *Deliverer) Delivering() bool { return w.delivering() }

// EditorBatches returns the batches of more than one editor's claim sent to
// the store, and the claims they carried.
func (d *Dispatcher) EditorBatches() (batches, claims int64) { return d.editorClaims.counts() }
