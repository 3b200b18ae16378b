package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/roundtrip"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// A submit and the claim of the next task are one cycle: one round trip to
// Redis (the submitted task's lock given back in the call that takes the
// next one's) and one to MySQL (the submit and the claim in one batch), with
// one commit. Candidate reads, which one read spreads over many claims, are
// counted apart.
func TestSubmitCycleIsOneRoundTripPerStore(t *testing.T) {
	t.Parallel()
	for _, worker := range []bool{false, true} {
		t.Run(map[bool]string{false: "editor", true: "worker"}[worker], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, sqlCount, err := roundtrip.OpenMySQL(ctx, storetest.NewDatabase(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			rdb := testenv.Redis(t)
			redisCount := &roundtrip.RedisHook{}
			rdb.AddHook(redisCount)
			b := setup(t, setupOpts{Redis: rdb, DB: db})
			c := dispatcher.Claimant{Holder: "worker-1", Categories: []string{"news"}}
			if !worker {
				c = b.Editor(t, "ada", "news")
			}
			b.Add(t, "news", 0, 4)

			claim, err := b.D.Next(ctx, c, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Warm up: the scripts are loaded, the connections open.
			claim, err = b.D.Submit(ctx, c, dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}, json.RawMessage(`{"ok":true}`))
			if err != nil || claim == nil {
				t.Fatalf("submit: next %v, %v", claim, err)
			}

			sql0, redis0, reads0 := sqlCount.Counts(), redisCount.RoundTrips(), b.D.Stats().CandidateReads
			next, err := b.D.Submit(ctx, c, dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}, json.RawMessage(`{"ok":true}`))
			if err != nil || next == nil {
				t.Fatalf("submit: next %v, %v", next, err)
			}
			sql := sqlCount.Counts().Sub(sql0)
			reads := b.D.Stats().CandidateReads - reads0
			if sql.RoundTrips-reads != 1 || sql.Commits != 1 {
				t.Errorf("MySQL: %d round trips (%d candidate reads apart) and %d commits for a submit and its next claim, want 1 and 1",
					sql.RoundTrips-reads, reads, sql.Commits)
			}
			if n := redisCount.RoundTrips() - redis0; n != 1 {
				t.Errorf("%d Redis round trips for a submit and its next claim, want 1", n)
			}
			if n := rdb.Exists(ctx, b.LockKey(claim.Task.ID)).Val(); n != 0 {
				t.Errorf("the submitted task's lock is still in Redis")
			}
			if v := rdb.Get(ctx, b.LockKey(next.Task.ID)).Val(); v != c.Holder {
				t.Errorf("the next task's lock = %q, want %q", v, c.Holder)
			}
			if got := b.Task(t, claim.Task.ID); got.Status != "done" {
				t.Errorf("submitted task is %s, want done", got.Status)
			}
			if got := b.Task(t, next.Task.ID); got.Status != "assigned" || got.Holder != c.Holder || got.Fence != next.Fence {
				t.Errorf("next task = %+v, want assigned to %s at fence %d", got, c.Holder, next.Fence)
			}

			// Then the last task, and with nothing left the lock is given back
			// on its own.
			last, err := b.D.Submit(ctx, c, dispatcher.ClaimRef{TaskID: next.Task.ID, Fence: next.Fence}, json.RawMessage(`{"ok":true}`))
			if err != nil || last == nil {
				t.Fatalf("submit: next %v, %v", last, err)
			}
			none, err := b.D.Submit(ctx, c, dispatcher.ClaimRef{TaskID: last.Task.ID, Fence: last.Fence}, json.RawMessage(`{"ok":true}`))
			if err != nil || none != nil {
				t.Fatalf("last submit: next %v, %v; want none", none, err)
			}
			if n := rdb.Exists(ctx, b.LockKey(last.Task.ID)).Val(); n != 0 {
				t.Errorf("the last task's lock is still in Redis")
			}
			if got := b.Task(t, last.Task.ID); got.Status != "done" {
				t.Errorf("last task is %s, want done", got.Status)
			}
		})
	}
}

// A submit the store refuses claims nothing: the next candidate's lock, taken
// before the batch, is given back.
func TestRefusedSubmitClaimsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ed := b.Editor(t, "ada", "news")
	ids := b.Add(t, "news", 0, 3)
	claim, err := b.D.Next(ctx, ed, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.D.ForceRelease(ctx, claim.Task.ID); err != nil {
		t.Fatal(err)
	}

	_, err = b.D.Submit(ctx, ed, dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}, json.RawMessage(`{"ok":true}`))
	if !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("submit of a revoked claim: %v, want ErrStale", err)
	}
	for _, id := range ids {
		if got := b.Task(t, id); got.Status != tasks.StatusPending {
			t.Errorf("task %d is %s after a refused submit, want pending", id, got.Status)
		}
		if n := b.RDB.Exists(ctx, b.LockKey(id)).Val(); n != 0 {
			t.Errorf("task %d's lock is in Redis after a refused submit", id)
		}
	}
}

// A next claim the store refuses (its candidate was claimed behind the
// dispatcher's back) leaves the submit committed, and the ordinary claim
// finds another task.
func TestSubmitFallsBackWhenTheNextClaimIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ed := b.Editor(t, "ada", "news")
	ids := b.Add(t, "news", 0, 3)
	claim, err := b.D.Next(ctx, ed, 0) // reads the candidates: ids[1] is next
	if err != nil {
		t.Fatal(err)
	}
	if claim.Task.ID != ids[0] {
		t.Fatalf("claimed task %d, want %d", claim.Task.ID, ids[0])
	}
	// Another process claims ids[1] without its Redis lock (as after a lost
	// lock): the dispatcher's candidate is stale.
	other := b.Task(t, ids[1])
	if _, err := b.Store.Claim(ctx, tasks.ClaimParams{
		TaskID: other.ID, Fence: other.Fence, Status: other.Status, Holder: "elsewhere", Lease: time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	refused0 := b.D.Stats().RefusedClaims

	next, err := b.D.Submit(ctx, ed, dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}, json.RawMessage(`{"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Task(t, ids[0]); got.Status != tasks.StatusDone {
		t.Errorf("submitted task is %s, want done", got.Status)
	}
	if next == nil || next.Task.ID != ids[2] {
		t.Fatalf("next = %+v, want task %d", next, ids[2])
	}
	if n := b.D.Stats().RefusedClaims - refused0; n != 1 {
		t.Errorf("%d refused claims, want 1", n)
	}
	if got := b.Task(t, ids[1]); got.Holder != "elsewhere" {
		t.Errorf("task %d is held by %q, want the other process", ids[1], got.Holder)
	}
	if n := b.RDB.Exists(ctx, b.LockKey(ids[1])).Val(); n != 0 {
		t.Errorf("the refused candidate's lock is still in Redis")
	}
}
