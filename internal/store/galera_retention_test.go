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

// TestGaleraPurgeBesideClaimsAndSubmits: the purge on one node, claims and
// submits on another. Certification may abort either side's transaction; the
// store runs it again, and what each batch did is all or nothing: every
// assigned task is there, and no result or event is left without its task.
func TestGaleraPurgeBesideClaimsAndSubmits(t *testing.T) {
	g := storetest.NewGalera(t)
	ctx := context.Background()
	purger, err := store.New(g.Nodes[0], store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := store.New(g.Nodes[1], store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	askGalera(t, purger)
	askGalera(t, worker)
	const n = 150
	nts := make([]tasks.NewTask, n)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "news", Title: fmt.Sprint(i)}
	}
	ids, err := worker.InsertTasks(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var purgeErr error
	purged := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			p, err := purger.PurgeTasks(ctx, tasks.StatusDone, time.Millisecond, 20)
			if err != nil && !errors.Is(err, tasks.ErrBusy) {
				purgeErr = err
				return
			}
			purged += int(p.Rows["tasks"])
		}
	})
	held := 0
	for i, id := range ids {
		c, err := worker.Claim(ctx, tasks.ClaimParams{TaskID: id, Status: tasks.StatusPending, Holder: "w", Lease: time.Hour})
		if errors.Is(err, tasks.ErrBusy) {
			continue
		}
		if err != nil {
			t.Fatalf("claim %d beside the purge: %v", id, err)
		}
		if i%3 == 0 {
			held++
			continue
		}
		if _, err := worker.Submit(ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: "w", Result: rawJSON(`1`)}); err != nil && !errors.Is(err, tasks.ErrBusy) {
			t.Fatalf("submit %d beside the purge: %v", id, err)
		}
	}
	close(stop)
	wg.Wait()
	if purgeErr != nil {
		t.Fatalf("purge: %v", purgeErr)
	}
	if purged == 0 {
		t.Error("the purge purged nothing while tasks were done")
	}
	b := &bundle{ctx: ctx, db: g.Nodes[0], store: purger}
	deadline := time.Now().Add(5 * time.Second)
	for {
		assigned := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'assigned'`)
		orphans := b.orphans(t)
		if assigned == held && orphans == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("assigned tasks %d, want %d; %d rows without their task", assigned, held, orphans)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
