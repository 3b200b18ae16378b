package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// One batch ends a worker's claims and makes its next, in one round trip
// and one transaction; each member of either part is answered on its own.
func TestCompleteAndClaim(t *testing.T) {
	t.Parallel()
	b, cc := countedSetup(t, store.Config{})
	ids := b.insert(t,
		tasks.NewTask{Category: "jobs", Title: "done"}, tasks.NewTask{Category: "jobs", Title: "retry"},
		tasks.NewTask{Category: "jobs", Title: "stale"},
		tasks.NewTask{Category: "jobs", Title: "next 1"}, tasks.NewTask{Category: "jobs", Title: "next 2"},
		tasks.NewTask{Category: "jobs", Title: "taken"})
	var os []tasks.Outcome
	for i, id := range ids[:3] {
		c := b.claim(t, id, fmt.Sprintf("worker:w:%d", i), 0, time.Minute)
		os = append(os, tasks.Outcome{TaskID: id, Fence: c.Fence, Holder: c.Task.Holder})
	}
	os[0].Result = rawJSON(`{"ok":true}`)
	os[1].Err, os[1].Backoff = "try again", time.Hour
	if _, err := b.store.ForceRelease(b.ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	ps := b.claimParams(t, ids[3:]...)
	// The last was claimed by someone else since it was read.
	b.claim(t, ids[5], "other", 0, time.Minute)

	before := cc.Counts()
	done, claimed, err := b.store.CompleteAndClaim(b.ctx, os, ps)
	if err != nil {
		t.Fatalf("complete and claim: %v", err)
	}
	refusedRoundTrips(t, "complete and claim", cc, before)
	wantErr(t, "the stale outcome", done[2].Err, tasks.ErrStale)
	wantErr(t, "the claim of a task claimed meanwhile", claimed[2].Err, tasks.ErrStale)
	for i, want := range []tasks.Status{tasks.StatusDone, tasks.StatusPending} {
		if done[i].Err != nil || done[i].Ended == nil || done[i].Ended.Status != want {
			t.Fatalf("outcome %d: %+v (%v), want ended %s", i, done[i].Ended, done[i].Err, want)
		}
		if got := b.task(t, ids[i]); got.Status != want {
			t.Fatalf("task %d %s, want %s", ids[i], got.Status, want)
		}
	}
	for i, p := range ps[:2] {
		c := claimed[i].Claim
		if claimed[i].Err != nil || c == nil || c.Fence != p.Fence+1 || c.Task.Holder != p.Holder {
			t.Fatalf("claim %d: %+v (%v), want claimed with fence %d by %s", i, c, claimed[i].Err, p.Fence+1, p.Holder)
		}
		if got := b.task(t, p.TaskID); got.Status != tasks.StatusAssigned || got.Fence != c.Fence || got.Holder != p.Holder {
			t.Fatalf("task %d after the batch: %+v", p.TaskID, got)
		}
		// One transaction, one instant.
		if !c.AssignedAt.Equal(done[0].Ended.EndedAt) {
			t.Fatalf("claim %d assigned at %v, the outcomes ended at %v: not one transaction", i, c.AssignedAt, done[0].Ended.EndedAt)
		}
	}
	if got := b.task(t, ids[5]); got.Holder != "other" {
		t.Fatalf("the refused claim changed its task: %+v", got)
	}
}

// A batch whose claims are refused as a whole writes no outcome either.
func TestCompleteAndClaimWritesNothingOnError(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ids := b.insert(t, tasks.NewTask{Category: "jobs", Title: "done"}, tasks.NewTask{Category: "jobs", Title: "next"})
	c := b.claim(t, ids[0], "worker:w:0", 0, time.Minute)
	os := []tasks.Outcome{{TaskID: ids[0], Fence: c.Fence, Holder: c.Task.Holder, Result: rawJSON(`1`)}}
	ps := b.claimParams(t, ids[1])
	ps[0].Holder = "" // refused
	if _, _, err := b.store.CompleteAndClaim(b.ctx, os, ps); !errors.Is(err, tasks.ErrInvalid) {
		t.Fatalf("complete and claim with a bad claim: %v, want ErrInvalid", err)
	}
	if got := b.task(t, ids[0]); got.Status != tasks.StatusAssigned || got.Fence != c.Fence {
		t.Fatalf("the outcome was written though the batch failed: %+v", got)
	}
	// A claim the server refuses fails the batch there: the completion
	// before it is rolled back.
	if _, err := b.db.ExecContext(b.ctx, `CREATE TRIGGER refuse_claims BEFORE UPDATE ON tasks FOR EACH ROW
	IF NEW.holder = 'worker:refused' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'; END IF`); err != nil {
		t.Fatalf("create a trigger refusing claims: %v", err)
	}
	ps = b.claimParams(t, ids[1])
	ps[0].Holder = "worker:refused"
	if _, _, err := b.store.CompleteAndClaim(b.ctx, os, ps); err == nil {
		t.Fatal("complete and claim with a claim the server refuses: no error")
	}
	if got := b.task(t, ids[0]); got.Status != tasks.StatusAssigned || got.Fence != c.Fence {
		t.Fatalf("the outcome was written though the batch failed: %+v", got)
	}
	if got := b.task(t, ids[1]); got.Status != tasks.StatusPending {
		t.Fatalf("the claim was made though the batch failed: %+v", got)
	}
}
