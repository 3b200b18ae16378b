package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/roundtrip"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// workerHolders returns n holders of a worker's slots, from slot from.
func workerHolders(from, n int) []string {
	hs := make([]string, n)
	for i := range hs {
		hs[i] = fmt.Sprintf("worker:w:%d", from+i)
	}
	return hs
}

// carry returns the outcomes callback of CompleteAndClaimMany giving os and
// done.
func carry(os []dispatcher.Outcome, done func(int, *tasks.Ended, error) bool) func() ([]dispatcher.Outcome, func(int, *tasks.Ended, error) bool) {
	return func() ([]dispatcher.Outcome, func(int, *tasks.Ended, error) bool) { return os, done }
}

// outcomesOf are the results (JSON 1) of claims cs.
func outcomesOf(cs []*tasks.Claim) []dispatcher.Outcome {
	os := make([]dispatcher.Outcome, len(cs))
	for i, c := range cs {
		os[i] = dispatcher.Outcome{Outcome: tasks.Outcome{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder, Result: json.RawMessage(`1`)}}
	}
	return os
}

// A worker's outcomes and its next claims share one transaction: one round
// trip to MySQL, one commit; the ended claims' locks are given back after
// it, and the new claims hold theirs.
func TestCompleteAndClaimManyOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, sqlCount, err := roundtrip.OpenMySQL(ctx, storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b := setup(t, setupOpts{DB: db})
	b.Add(t, "news", 0, 10)
	held, err := b.D.NextMany(ctx, workerHolders(0, 3), []string{"news"}, 0)
	if err != nil || len(held) != 3 {
		t.Fatalf("next many = %d claims, %v; want 3", len(held), err)
	}
	os := outcomesOf(held)

	sql0, reads0 := sqlCount.Counts(), b.D.Stats().CandidateReads
	var ended []*tasks.Ended
	hs := workerHolders(3, 5)
	claims, joint := b.D.CompleteAndClaimMany(ctx, carry(os, func(i int, e *tasks.Ended, err error) bool {
		if err != nil {
			t.Errorf("outcome %d: %v", i, err)
		}
		ended = append(ended, e)
		return true
	}), 0, hs, []string{"news"})
	sql := sqlCount.Counts().Sub(sql0)
	reads := b.D.Stats().CandidateReads - reads0
	if sql.RoundTrips-reads != 1 || sql.Commits != 1 {
		t.Errorf("MySQL: %d round trips (%d candidate reads apart) and %d commits for %d outcomes and %d claims, want 1 and 1",
			sql.RoundTrips-reads, reads, sql.Commits, len(os), len(claims))
	}
	if !joint || len(ended) != 3 || len(claims) != 5 {
		t.Fatalf("joint %v: %d outcomes answered and %d claims made, want 3 and 5", joint, len(ended), len(claims))
	}
	for i, c := range held {
		if ended[i] == nil || ended[i].Status != tasks.StatusDone {
			t.Fatalf("outcome %d: %+v, want done", i, ended[i])
		}
		if got := b.Task(t, c.Task.ID); got.Status != tasks.StatusDone {
			t.Fatalf("task %d %s, want done", c.Task.ID, got.Status)
		}
		if n := b.RDB.Exists(ctx, b.LockKey(c.Task.ID)).Val(); n != 0 {
			t.Errorf("the lock of ended task %d is still there", c.Task.ID)
		}
	}
	for i, c := range claims {
		if c.Task.Holder != hs[i] {
			t.Errorf("claim %d for %s, want %s", i, c.Task.Holder, hs[i])
		}
		if got := b.Task(t, c.Task.ID); got.Status != tasks.StatusAssigned || got.Holder != c.Task.Holder || got.Fence != c.Fence {
			t.Fatalf("task %d = %+v, want assigned to %s at fence %d", c.Task.ID, got, c.Task.Holder, c.Fence)
		}
		if tok := b.RDB.Get(ctx, b.LockKey(c.Task.ID)).Val(); tok == "" {
			t.Errorf("claimed task %d has no lock", c.Task.ID)
		}
	}
}

// failingJoint is a store whose joint completion and claim always fails.
type failingJoint struct{ *store.Store }

func (failingJoint) CompleteAndClaim(context.Context, []tasks.Outcome, []tasks.ClaimParams) ([]tasks.Completed, []tasks.ClaimResult, error) {
	return nil, nil, errors.New("joint batch refused")
}

// When the joint transaction fails, the outcomes are completed alone, no
// claim is made, and the candidates' locks are given back, so that the
// caller claims after.
func TestCompleteAndClaimManyCompletesAloneOnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ids := b.Add(t, "news", 0, 6)
	d, err := dispatcher.New(failingJoint{b.Store}, b.Locks, b.D.Config())
	if err != nil {
		t.Fatal(err)
	}
	held, err := d.NextMany(ctx, workerHolders(0, 2), []string{"news"}, 0)
	if err != nil || len(held) != 2 {
		t.Fatalf("next many = %d claims, %v; want 2", len(held), err)
	}
	answered := 0
	claims, joint := d.CompleteAndClaimMany(ctx, carry(outcomesOf(held), func(i int, e *tasks.Ended, err error) bool {
		if err != nil || e == nil || e.Status != tasks.StatusDone {
			t.Errorf("outcome %d: %+v, %v; want done", i, e, err)
		}
		answered++
		return true
	}), 0, workerHolders(2, 4), []string{"news"})
	if !joint || len(claims) != 0 || answered != 2 {
		t.Fatalf("joint %v: %d claims made and %d outcomes answered, want none and 2", joint, len(claims), answered)
	}
	for _, id := range ids {
		if n := b.RDB.Exists(ctx, b.LockKey(id)).Val(); n != 0 {
			t.Errorf("task %d's lock is still there", id)
		}
	}
	// The candidates went back: the caller's claim after takes them.
	after, err := d.NextMany(ctx, workerHolders(2, 4), []string{"news"}, 0)
	if err != nil || len(after) != 4 {
		t.Fatalf("next many after = %d claims, %v; want 4", len(after), err)
	}
}

// With nothing to claim, nothing is written: the caller writes its outcomes
// its usual way.
func TestCompleteAndClaimManyWritesNothingWithNothingToClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.Add(t, "news", 0, 2)
	held, err := b.D.NextMany(ctx, workerHolders(0, 2), []string{"news"}, 0)
	if err != nil || len(held) != 2 {
		t.Fatalf("next many = %d claims, %v; want 2", len(held), err)
	}
	taken := false
	claims, joint := b.D.CompleteAndClaimMany(ctx, func() ([]dispatcher.Outcome, func(int, *tasks.Ended, error) bool) {
		taken = true
		return outcomesOf(held), func(i int, e *tasks.Ended, err error) bool {
			t.Errorf("outcome %d answered (%+v, %v) though nothing was claimable", i, e, err)
			return true
		}
	}, 0, workerHolders(2, 2), []string{"news"})
	if joint || taken || len(claims) != 0 {
		t.Fatalf("joint %v, outcomes taken %v, %d claims; want nothing done", joint, taken, len(claims))
	}
	for _, c := range held {
		if got := b.Task(t, c.Task.ID); got.Status != tasks.StatusAssigned || got.Fence != c.Fence {
			t.Fatalf("task %d = %+v, want still assigned at fence %d", c.Task.ID, got, c.Fence)
		}
	}
}

// A category at its limit in flight has no candidates, but for a claim
// that carries outcomes it has as many as the outcomes free: the claim
// reads them (ending) and takes their room, in the outcomes' transaction.
func TestCompleteAndClaimManyAtTheLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const limit = 2
	b := setup(t, setupOpts{Store: store.Config{Workflows: map[string]tasks.Workflow{"news": {MaxInFlight: limit}}}})
	b.Add(t, "news", 0, 6)
	held, err := b.D.NextMany(ctx, workerHolders(0, limit), []string{"news"}, 0)
	if err != nil || len(held) != limit {
		t.Fatalf("next many = %d claims, %v; want %d", len(held), err, limit)
	}
	// Another process's dispatcher, whose candidates are read now, at the
	// limit.
	d, err := dispatcher.New(b.Store, b.Locks, dispatcher.Config{KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	taken := false
	claims, joint := d.CompleteAndClaimMany(ctx, func() ([]dispatcher.Outcome, func(int, *tasks.Ended, error) bool) {
		taken = true
		return nil, nil
	}, 0, workerHolders(0, limit), []string{"news"})
	if joint || taken || len(claims) != 0 {
		t.Fatalf("without ending: joint %v, outcomes taken %v, %d claims; want nothing: no room", joint, taken, len(claims))
	}
	answered := 0
	claims, joint = d.CompleteAndClaimMany(ctx, carry(outcomesOf(held), func(i int, e *tasks.Ended, err error) bool {
		if err != nil || e == nil || e.Status != tasks.StatusDone {
			t.Errorf("outcome %d: %+v, %v; want done", i, e, err)
		}
		answered++
		return true
	}), limit, workerHolders(0, limit), []string{"news"})
	if !joint || len(claims) != limit || answered != limit {
		t.Fatalf("joint %v: %d claims made and %d outcomes answered, want %d and %d", joint, len(claims), answered, limit, limit)
	}
}
