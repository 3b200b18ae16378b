package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// TestGaleraRecycleRacingTakeoversKeepsEveryEvent: a sweep on one node recycles
// expired claims while claims on another node take the same tasks over. Each
// side's transaction may be aborted by the other's replicated write, between
// the statements of its batch: what it wrote must still be all or nothing, so
// every claim that ended has its end in the audit trail (a 'recycled' or an
// 'expired' event of its fence), and every task that moved has the event of
// its move.
func TestGaleraRecycleRacingTakeoversKeepsEveryEvent(t *testing.T) {
	recycleRacingTakeovers(t, false)
}

// TestGaleraRecycleRacingTakeoversOfWorkerClaims is the same race over the
// claims of a worker's batch, which write no 'claimed' event: the sweep and
// the takeovers write it, so that every fence is still accounted for by
// exactly one 'claimed' event.
func TestGaleraRecycleRacingTakeoversOfWorkerClaims(t *testing.T) {
	recycleRacingTakeovers(t, true)
}

// recycleRacingTakeovers runs the race of the tests above, each round's
// claims made with ClaimBatch when batch is set, else with Claim.
func recycleRacingTakeovers(t *testing.T, batch bool) {
	g := storetest.NewGalera(t)
	ctx := context.Background()
	cfg := store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookExpired}}
	sweeper, err := store.New(g.Nodes[0], cfg)
	if err != nil {
		t.Fatal(err)
	}
	claimer, err := store.New(g.Nodes[1], cfg)
	if err != nil {
		t.Fatal(err)
	}
	askGalera(t, sweeper)
	askGalera(t, claimer)

	const n, rounds = 200, 6
	nts := make([]tasks.NewTask, n)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "news", Title: fmt.Sprint(i)}
	}
	ids, err := claimer.InsertTasks(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		// Every task claimed by worker w<round>, its lease passed.
		var ps []tasks.ClaimParams
		for _, id := range ids {
			task, err := claimer.GetTask(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			p := tasks.ClaimParams{TaskID: id, Fence: task.Fence, Status: task.Status, Holder: fmt.Sprintf("w%d", round), Lease: time.Minute}
			if batch {
				if task.Status == tasks.StatusPending {
					ps = append(ps, p)
				}
				continue
			}
			if _, err := claimer.Claim(ctx, p); err != nil && !errors.Is(err, tasks.ErrStale) {
				t.Fatalf("round %d: claim task %d: %v", round, id, err)
			}
		}
		for len(ps) > 0 {
			k := min(len(ps), 50)
			if _, err := claimer.ClaimBatch(ctx, ps[:k]); err != nil {
				t.Fatalf("round %d: claim batch: %v", round, err)
			}
			ps = ps[k:]
		}
		if _, err := g.Nodes[0].ExecContext(ctx, `UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 SECOND WHERE status = 'assigned'`); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				got, err := sweeper.RecycleExpired(ctx, tasks.RecycleParams{Limit: 20})
				if err != nil && !errors.Is(err, tasks.ErrBusy) {
					t.Errorf("recycle: %v", err)
					return
				}
				if err == nil && len(got) == 0 {
					return
				}
			}
		})
		wg.Go(func() {
			for i := len(ids) - 1; i >= 0; i-- {
				task, err := claimer.GetTask(ctx, ids[i])
				if err != nil {
					t.Error(err)
					return
				}
				if task.Status != tasks.StatusAssigned {
					continue
				}
				_, err = claimer.Claim(ctx, tasks.ClaimParams{TaskID: ids[i], Fence: task.Fence, Status: task.Status,
					Holder: fmt.Sprintf("t%d", round), Lease: time.Minute})
				if err != nil && !errors.Is(err, tasks.ErrStale) && !errors.Is(err, tasks.ErrBusy) {
					t.Errorf("takeover of task %d: %v", ids[i], err)
					return
				}
			}
		})
		wg.Wait()
	}

	// Every claim of a task but its last ended, in the audit trail.
	var missing []string
	if err := g.Nodes[2].SelectContext(ctx, &missing, `SELECT CONCAT(c.task_id, '@', c.fence) FROM task_events c
		JOIN tasks t ON t.id = c.task_id
		WHERE c.kind = 'claimed' AND (c.fence < t.fence OR t.status = 'pending')
		AND NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = c.task_id AND e.fence = c.fence
			AND e.kind IN ('recycled', 'expired'))`); err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("%d claims ended with no event (task@fence): %v", len(missing), missing)
	}
	// Every fence of every task has exactly one 'claimed' event, or, for a
	// live worker's claim, the mark that stands for it.
	var unaccounted []string
	if err := g.Nodes[2].SelectContext(ctx, &unaccounted, `SELECT CONCAT(t.id, '@', f.seq, ':', COUNT(c.id) + (t.claim_unlogged = 1 AND t.fence = f.seq))
		FROM tasks t JOIN seq_1_to_1000 f ON f.seq <= t.fence
		LEFT JOIN task_events c ON c.task_id = t.id AND c.fence = f.seq AND c.kind = 'claimed'
		GROUP BY t.id, f.seq, t.claim_unlogged, t.fence HAVING COUNT(c.id) + (t.claim_unlogged = 1 AND t.fence = f.seq) <> 1`); err != nil {
		t.Fatal(err)
	}
	if len(unaccounted) > 0 {
		t.Errorf("%d fences not accounted for by one claim record (task@fence:records): %v", len(unaccounted), unaccounted)
	}
	// Each expiry event has its outbox record, and none has two.
	var events, outbox, doubled int
	g.Nodes[2].GetContext(ctx, &events, `SELECT COUNT(*) FROM task_events WHERE kind IN ('recycled', 'expired')`)
	g.Nodes[2].GetContext(ctx, &outbox, `SELECT COUNT(*) FROM webhook_outbox WHERE kind = 'expired'`)
	g.Nodes[2].GetContext(ctx, &doubled, `SELECT COUNT(*) FROM (SELECT task_id, fence FROM webhook_outbox
		GROUP BY task_id, fence HAVING COUNT(*) > 1) d`)
	if events == 0 || outbox != events || doubled != 0 {
		t.Errorf("%d expiry events, %d outbox records, %d claims with two; want as many records as events, none twice", events, outbox, doubled)
	}
}
