package store_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// claimPaths are the two ways Claim takes a pending task: the one-round-trip batch
// (the status the caller saw is pending) and the locking read (status unknown).
var claimPaths = map[string]tasks.Status{"batch": tasks.StatusPending, "locking": ""}

func TestClaimBumpsFenceAndLeasesOnDatabaseClock(t *testing.T) {
	t.Parallel()
	for name, status := range claimPaths {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testClaimBumpsFence(t, status)
		})
	}
}

func testClaimBumpsFence(t *testing.T, status tasks.Status) {
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	id := b.insert(t, tasks.NewTask{Category: "news", Priority: 2, Title: "t", Payload: rawJSON(`{"k":"v"}`)})[0]

	before := b.now(t)
	c, err := b.store.Claim(b.ctx, tasks.ClaimParams{
		TaskID: id, Fence: 0, Status: status, Holder: ed.Holder(), EditorID: ed.ID, Lease: 30 * time.Second,
		TraceContext: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	})
	if err != nil {
		t.Fatal(err)
	}
	after := b.now(t)

	if c.Fence != 1 || c.Task.Fence != 1 {
		t.Errorf("fence = %d (task %d), want 1", c.Fence, c.Task.Fence)
	}
	if c.AssignedAt.Before(before) || c.AssignedAt.After(after) {
		t.Errorf("assigned_at %v not within the database clock's [%v, %v]", c.AssignedAt, before, after)
	}
	if d := c.LeaseExpiresAt.Sub(c.AssignedAt); d != 30*time.Second {
		t.Errorf("lease = %v, want 30s", d)
	}
	var payload map[string]string
	if err := json.Unmarshal(c.Task.Payload, &payload); err != nil || payload["k"] != "v" ||
		c.Task.Title != "t" || c.Task.Status != tasks.StatusAssigned {
		t.Errorf("claimed task = %+v", c.Task)
	}

	// The returned claim is what the database holds.
	got := b.task(t, id)
	if got.Status != tasks.StatusAssigned || got.Fence != 1 || got.Holder != ed.Holder() || got.EditorID != ed.ID ||
		got.Attempts != 1 || got.TraceContext == "" ||
		!got.AssignedAt.Equal(c.AssignedAt) || !got.LeaseExpiresAt.Equal(c.LeaseExpiresAt) {
		t.Errorf("stored task = %+v, claim = %+v", got, c)
	}
	evs := b.events(t, id)
	if len(evs) != 1 || evs[0].Kind != tasks.EventClaimed || evs[0].Fence != 1 || evs[0].Holder != ed.Holder() || evs[0].EditorID != ed.ID {
		t.Errorf("events = %+v, want one claimed event for fence 1", evs)
	} else if status == tasks.StatusPending && !evs[0].At.Equal(c.AssignedAt) {
		t.Errorf("claimed event at %v, want the claim's assigned_at %v", evs[0].At, c.AssignedAt)
	}

	held, err := b.store.HeldByEditor(b.ctx, ed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if held.Task.ID != id || held.Fence != 1 || !held.LeaseExpiresAt.Equal(c.LeaseExpiresAt) {
		t.Errorf("held = %+v, want task %d at fence 1", held, id)
	}
}

func TestClaimWithWrongFenceChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, "w1", 0, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: "w1"}); err != nil {
		t.Fatal(err)
	}
	before := b.snapshot(t, id)
	for _, status := range claimPaths {
		for _, fence := range []int64{0, c.Fence + 1} {
			_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: fence, Status: status, Holder: "w2", Lease: time.Minute})
			wantErr(t, "claim with an old or future fence", err, tasks.ErrStale)
		}
	}
	b.unchanged(t, id, before)

	// A live claim cannot be claimed, even with the right fence.
	c2 := b.claim(t, id, "w2", 0, time.Minute)
	before = b.snapshot(t, id)
	for _, status := range []tasks.Status{tasks.StatusPending, tasks.StatusAssigned, ""} {
		_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: c2.Fence, Status: status, Holder: "w3", Lease: time.Minute})
		wantErr(t, "claim of a live claim", err, tasks.ErrStale)
	}
	b.unchanged(t, id, before)

	for _, status := range claimPaths {
		_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id + 1000, Status: status, Holder: "w3", Lease: time.Minute})
		wantErr(t, "claim of an unknown task", err, tasks.ErrStale)
	}
	for name, p := range map[string]tasks.ClaimParams{
		"no holder":      {TaskID: id, Fence: c2.Fence, Lease: time.Minute},
		"no lease":       {TaskID: id, Fence: c2.Fence, Holder: "w3"},
		"lease too long": {TaskID: id, Fence: c2.Fence, Holder: "w3", Lease: store.MaxHoldDefault + time.Second},
	} {
		_, err := b.store.Claim(b.ctx, p)
		wantErr(t, name, err, tasks.ErrInvalid)
	}
	b.unchanged(t, id, before)
}

func TestEditorHoldsOneLiveTask(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	first := b.insertOne(t, "news", 1)
	second := b.insertOne(t, "news", 0)
	third := b.insertOne(t, "news", 0)
	b.claim(t, first, ed.Holder(), ed.ID, time.Minute)

	before := b.snapshot(t, second)
	for _, status := range claimPaths {
		_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: second, Fence: 0, Status: status, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
		wantErr(t, "second claim", err, tasks.ErrEditorBusy)
	}
	b.unchanged(t, second, before)

	// Once the first claim is submitted, the editor can claim again.
	held, err := b.store.HeldByEditor(b.ctx, ed.ID)
	if err != nil || held.Task.ID != first {
		t.Fatalf("held = %+v, %v; want task %d", held, err, first)
	}
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: first, Fence: held.Fence, Holder: ed.Holder(), Result: rawJSON(`1`)}); err != nil {
		t.Fatal(err)
	}
	_, err = b.store.HeldByEditor(b.ctx, ed.ID)
	wantErr(t, "held after submit", err, tasks.ErrNotFound)

	// Two claims of the same editor at once, one on each path: exactly one wins.
	results := make(chan error, 2)
	for id, status := range map[int64]tasks.Status{second: tasks.StatusPending, third: ""} {
		go func() {
			_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: 0, Status: status, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
			results <- err
		}()
	}
	won := 0
	for range 2 {
		switch err := <-results; {
		case err == nil:
			won++
		case !errors.Is(err, tasks.ErrEditorBusy):
			t.Errorf("racing claim: %v, want nil or ErrEditorBusy", err)
		}
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, ed.ID); won != 1 || n != 1 {
		t.Errorf("%d racing claims won, %d tasks name the editor; want 1 and 1", won, n)
	}
}

func TestClaimForUnknownEditorIsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	before := b.snapshot(t, id)
	for name, status := range claimPaths {
		_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Status: status, Holder: "editor:999", EditorID: 999, Lease: time.Minute})
		wantErr(t, name, err, tasks.ErrInvalid)
	}
	b.unchanged(t, id, before)
}

func TestEditorExpiredClaimDoesNotBlockNextClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	first := b.insertOne(t, "news", 1)
	second := b.insertOne(t, "news", 0)
	c1 := b.claim(t, first, ed.Holder(), ed.ID, time.Minute)
	b.expireLease(t, first)

	_, err := b.store.HeldByEditor(b.ctx, ed.ID)
	wantErr(t, "held with an expired lease", err, tasks.ErrNotFound)
	c2 := b.claim(t, second, ed.Holder(), ed.ID, time.Minute)
	if c2.Task.ID != second {
		t.Fatalf("claimed %d, want %d", c2.Task.ID, second)
	}
	got := b.task(t, first)
	if got.Status != tasks.StatusPending || got.EditorID != 0 || got.Holder != "" || got.Fence != c1.Fence {
		t.Errorf("expired first task = %+v, want pending, no holder, fence %d", got, c1.Fence)
	}
	evs := b.events(t, first)
	if len(evs) != 2 || evs[1].Kind != tasks.EventRecycled || evs[1].Fence != c1.Fence || evs[1].EditorID != ed.ID {
		t.Errorf("events = %+v, want claimed then recycled at fence %d", evs, c1.Fence)
	}
	// The old holder's writes are refused.
	_, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: first, Fence: c1.Fence, Holder: ed.Holder(), Result: rawJSON(`1`)})
	wantErr(t, "submit of the recycled claim", err, tasks.ErrStale)
}

// TestStaleHolderIsRefused is the core safety property: once a claim's lease has passed
// and another holder took the task over, nothing the first holder sends is accepted
// and nothing it sends changes anything.
func TestStaleHolderIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)

	// A real short lease, expired on the database clock.
	c1 := b.claim(t, id, "w1", 0, 50*time.Millisecond)
	testenv.Eventually(t, time.Minute, "the lease passes on the database clock", func() bool {
		return b.now(t).After(c1.LeaseExpiresAt)
	})
	// Expired but not yet taken over: the holder cannot renew or submit either.
	before := b.snapshot(t, id)
	_, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c1.Fence, Holder: "w1", Lease: time.Minute})
	wantErr(t, "heartbeat after expiry", err, tasks.ErrStale)
	_, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c1.Fence, Holder: "w1", Result: rawJSON(`{}`)})
	wantErr(t, "submit after expiry", err, tasks.ErrStale)
	b.unchanged(t, id, before)

	c2, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: c1.Fence, Holder: "w2", Lease: time.Minute})
	if err != nil {
		t.Fatalf("take over: %v", err)
	}
	if c2.Fence != c1.Fence+1 || !c2.TookOver {
		t.Errorf("takeover fence = %d, took over %v; want %d, true", c2.Fence, c2.TookOver, c1.Fence+1)
	}
	if c1.TookOver {
		t.Errorf("a claim of a pending task says it took over")
	}
	evs := b.events(t, id)
	if got := kinds(evs); len(got) != 3 || got[0] != tasks.EventClaimed || got[1] != tasks.EventExpired || got[2] != tasks.EventClaimed {
		t.Fatalf("events = %v, want claimed, expired, claimed", got)
	}
	if evs[1].Fence != c1.Fence || evs[1].Holder != "w1" || evs[2].Fence != c2.Fence || evs[2].Holder != "w2" {
		t.Errorf("expired event %+v / claimed event %+v", evs[1], evs[2])
	}

	before = b.snapshot(t, id)
	_, err = b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c1.Fence, Holder: "w1", Lease: time.Minute})
	wantErr(t, "stale heartbeat", err, tasks.ErrStale)
	_, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c1.Fence, Holder: "w1", Result: rawJSON(`{}`)})
	wantErr(t, "stale submit", err, tasks.ErrStale)
	_, err = b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c1.Fence, Holder: "w1"})
	wantErr(t, "stale release", err, tasks.ErrStale)
	_, err = b.store.Fail(b.ctx, tasks.FailParams{TaskID: id, Fence: c1.Fence, Holder: "w1", Err: "boom"})
	wantErr(t, "stale fail", err, tasks.ErrStale)
	// The current fence with the wrong holder is refused too.
	_, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c2.Fence, Holder: "w1", Result: rawJSON(`{}`)})
	wantErr(t, "submit by the wrong holder", err, tasks.ErrStale)
	_, err = b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: c1.Fence, Holder: "w1", Lease: time.Minute})
	wantErr(t, "reclaim with the old fence", err, tasks.ErrStale)
	b.unchanged(t, id, before)

	// The new holder is unaffected.
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c2.Fence, Holder: "w2", Result: rawJSON(`{"ok":true}`)}); err != nil {
		t.Fatalf("submit by the current holder: %v", err)
	}
}

// TestClaimDoesNotWaitForRowLocks: a row another transaction is writing (a
// sweep's batch, say) is passed over at once, not waited for.
func TestClaimDoesNotWaitForRowLocks(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	tx, err := b.store.DB().BeginTx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(b.ctx, "SELECT id FROM tasks WHERE id = ? FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	// The row stays locked until the claim has answered: a claim that waited
	// for the lock would answer only when the server's lock wait timed out, with
	// that error, not ErrStale.
	_, err = b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: 0, Holder: "w1", Lease: time.Minute})
	wantErr(t, "claim of a locked row", err, tasks.ErrStale)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: 0, Holder: "w1", Lease: time.Minute}); err != nil {
		t.Fatalf("claim once the row is free: %v", err)
	}
}
