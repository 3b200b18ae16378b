package store_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestConcurrentClaimsOfOneTaskHaveOneWinner(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	const n = 24
	var wins, stale atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: 0, Holder: fmt.Sprintf("w%d", i), Lease: time.Minute})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, tasks.ErrStale):
				stale.Add(1)
			default:
				t.Errorf("claim: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || stale.Load() != n-1 {
		t.Errorf("%d wins and %d stale, want 1 and %d", wins.Load(), stale.Load(), n-1)
	}
	if got := b.task(t, id); got.Fence != 1 || got.Attempts != 1 {
		t.Errorf("task = %+v, want fence 1 after one claim", got)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE task_id = ?`, id); n != 1 {
		t.Errorf("%d events, want 1", n)
	}
}

// TestConcurrentEditorsCompleteEveryTaskOnce runs editors that claim, submit and now
// and then walk away from a claim (its lease then passes, and others take it over),
// all at once and with no other coordination than the store. Afterwards the database
// must show every task done exactly once, by the holder of its last claim.
func TestConcurrentEditorsCompleteEveryTaskOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	const editors, total = 8, 60
	nts := make([]tasks.NewTask, total)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: []string{"news", "sport"}[i%2], Priority: i % 4, Title: "t"}
	}
	b.insert(t, nts...)
	eds := make([]*tasks.Editor, editors)
	for i := range eds {
		eds[i] = b.editor(t, fmt.Sprintf("ed%d", i), "news", "sport")
	}

	var submitted, abandoned atomic.Int32
	// progress counts the submits and the claims walked away from: an editor
	// that finds no candidate (every task left is someone's live claim) waits
	// for it to change.
	var mu sync.Mutex
	progressed := sync.NewCond(&mu)
	progress := 0
	step := func() {
		mu.Lock()
		progress++
		mu.Unlock()
		progressed.Broadcast()
	}
	var wg sync.WaitGroup
	for _, ed := range eds {
		wg.Go(func() {
			defer step() // an editor that leaves, on an error, wakes the others
			for submitted.Load() < total {
				mu.Lock()
				seen := progress
				mu.Unlock()
				held, err := b.store.HeldByEditor(b.ctx, ed.ID)
				if err == nil {
					_, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: held.Task.ID, Fence: held.Fence, Holder: ed.Holder(), Result: rawJSON(`{"by":"` + ed.Name + `"}`)})
					switch {
					case err == nil:
						submitted.Add(1)
						step()
					case errors.Is(err, tasks.ErrStale): // taken over meanwhile
					default:
						t.Errorf("submit: %v", err)
						return
					}
					continue
				}
				if !errors.Is(err, tasks.ErrNotFound) {
					t.Errorf("held: %v", err)
					return
				}
				cands, err := b.store.Candidates(b.ctx, tasks.CandidatesParams{Categories: ed.Categories, EditorID: ed.ID, Limit: 8})
				if err != nil {
					t.Errorf("candidates: %v", err)
					return
				}
				if len(cands) == 0 {
					mu.Lock()
					for progress == seen && submitted.Load() < total {
						progressed.Wait()
					}
					mu.Unlock()
					continue
				}
				walkAway := rand.IntN(5) == 0
				for _, i := range rand.Perm(len(cands)) {
					c := cands[i]
					claim, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: c.ID, Fence: c.Fence, Status: c.Status, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
					if errors.Is(err, tasks.ErrStale) {
						continue
					}
					if err != nil {
						t.Errorf("claim: %v", err)
						return
					}
					if walkAway {
						// Walk away: the lease passes, on the database clock.
						if _, err := b.db.ExecContext(b.ctx, `UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 SECOND
							WHERE id = ? AND fence = ?`, claim.Task.ID, claim.Fence); err != nil {
							t.Errorf("expire the lease: %v", err)
							return
						}
						abandoned.Add(1)
						step()
					}
					break
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d submitted, %d claims abandoned", submitted.Load(), abandoned.Load())

	if n := int(submitted.Load()); n != total {
		t.Errorf("%d successful submits, want %d", n, total)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'done'`); n != total {
		t.Errorf("%d tasks done, want %d", n, total)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_results`); n != total {
		t.Errorf("%d results, want %d (one per task)", n, total)
	}
	// Each result belongs to the task's last claim and its holder.
	if n := b.count(t, `SELECT COUNT(*) FROM task_results r JOIN tasks t ON t.id = r.task_id
		WHERE r.fence = t.fence AND r.holder = t.holder`); n != total {
		t.Errorf("%d results match their task's final fence and holder, want %d", n, total)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'submitted'`); n != total {
		t.Errorf("%d submitted events, want %d", n, total)
	}
	// Claimed events carry distinct, increasing fences per task: fence f was claimed once.
	if n := b.count(t, `SELECT COUNT(*) FROM (SELECT task_id, fence FROM task_events WHERE kind = 'claimed'
		GROUP BY task_id, fence HAVING COUNT(*) > 1) d`); n != 0 {
		t.Errorf("%d (task, fence) pairs claimed more than once", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks t WHERE t.fence <> (SELECT COUNT(*) FROM task_events e
		WHERE e.task_id = t.id AND e.kind = 'claimed')`); n != 0 {
		t.Errorf("%d tasks whose fence differs from their number of claims", n)
	}
	// Every abandoned claim ended in exactly one expiry record: taken over ('expired')
	// or freed for its editor's next claim ('recycled'); every other claim was submitted.
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind IN ('expired', 'recycled')`); n != int(abandoned.Load()) {
		t.Errorf("%d expiry events, want %d (one per abandoned claim)", n, abandoned.Load())
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'claimed'`); n != total+int(abandoned.Load()) {
		t.Errorf("%d claimed events, want %d", n, total+int(abandoned.Load()))
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE editor_id IS NOT NULL`); n != 0 {
		t.Errorf("%d tasks still hold an editor", n)
	}
}
