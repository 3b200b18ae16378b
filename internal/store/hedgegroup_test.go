package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

// groupOfTwo makes the hedged task the first slot of a group of two, whose
// second slot it returns, pending, and gives the hedger a capacity of 2.
func (h *hedgeBundle) groupOfTwo(t *testing.T) int64 {
	t.Helper()
	s2 := h.insert(t, tasks.NewTask{Category: "news", Title: "slot 2", DueAt: h.now(t).Add(time.Hour)})[0]
	h.exec(t, `UPDATE tasks SET group_id = ?, overlap = 2 WHERE id IN (?, ?)`, h.task, h.task, s2)
	h.exec(t, `UPDATE editors SET capacity = 2 WHERE id = ?`, h.hedger.ID)
	return s2
}

// An editor that hedges a slot of a group may not claim another slot of it:
// the hedge may become its claim, and the group would get two results of one
// editor.
func TestHedgeBarsGroupSiblingClaim(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	s2 := h.groupOfTwo(t)
	h.inactive(t)
	h.mustTake(t)
	task := h.bundle.task(t, s2)
	_, err := h.store.Claim(h.ctx, tasks.ClaimParams{TaskID: s2, Fence: task.Fence, Status: task.Status,
		Holder: h.hedger.Holder(), EditorID: h.hedger.ID, Lease: time.Minute, Workflow: true})
	if !errors.Is(err, tasks.ErrBarred) {
		t.Fatalf("claim of a sibling of a hedged slot: %v, want ErrBarred", err)
	}
	// Another editor may.
	h.bundle.claim(t, s2, h.third.Holder(), h.third.ID, time.Minute)
}

// A takeover re-reads the group's bars under the task's lock: an editor that
// came to hold another slot of the group since it took the hedge is refused.
func TestHedgeTakeOverBarredByGroup(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	s2 := h.groupOfTwo(t)
	h.inactive(t)
	hc := h.mustTake(t)
	// The hedger's claim of the sibling, committed alongside the hedge's take.
	h.exec(t, `UPDATE tasks SET status = 'assigned', fence = fence + 1, holder = ?, editor_id = ?, assigned_at = NOW(3),
		lease_expires_at = NOW(3) + INTERVAL 1 MINUTE WHERE id = ?`, h.hedger.Holder(), h.hedger.ID, s2)
	_, err := h.store.TakeOverHedge(h.ctx, tasks.HedgeRef{TaskID: h.task, Fence: hc.Fence, EditorID: h.hedger.ID})
	if !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("takeover by an editor holding a sibling: %v, want ErrStale", err)
	}
	if got := h.task2(t); got.Status != tasks.StatusAssigned || got.EditorID != h.holder.ID {
		t.Fatalf("task after the refused takeover: %s, editor %v; want still the holder's", got.Status, got.EditorID)
	}
}

// A hedge whose task went back to the pool and was then held out of it (made
// a gold task, or deferred) is no longer live: its takeover is refused, and
// the task stays out of the pool with no result.
func TestHedgeTakeOverRespectsRunAfter(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	h.inactive(t)
	hc := h.mustTake(t)
	if _, err := h.store.Release(h.ctx, tasks.ReleaseParams{TaskID: h.task, Fence: h.claim.Fence, Holder: h.holder.Holder()}); err != nil {
		t.Fatalf("holder's release: %v", err)
	}
	if _, err := h.store.MarkGold(h.ctx, h.task, tasks.GoldAnswer{Decision: "approve"}, goldRules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	_, err := h.store.TakeOverHedge(h.ctx, tasks.HedgeRef{TaskID: h.task, Fence: hc.Fence, EditorID: h.hedger.ID})
	if !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("takeover of a task made gold: %v, want ErrStale", err)
	}
	if got := h.task2(t); got.Status != tasks.StatusPending || !got.RunAfter.Equal(tasks.GoldRunAfter) {
		t.Fatalf("task after the refused takeover: %s, run_after %v; want pending, held out", got.Status, got.RunAfter)
	}
	if n := h.results(t); n != 0 {
		t.Fatalf("%d results, want none", n)
	}
}

// A winning hedger's working time is bounded by the hedge's own start, not
// by the instant of its takeover, which comes a moment before its submit.
func TestHedgeWinnerWorkingTime(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	h.inactive(t)
	hc := h.mustTake(t)
	// The hedger has worked on it for two minutes.
	h.exec(t, `UPDATE task_hedges SET assigned_at = assigned_at - INTERVAL 2 MINUTE WHERE task_id = ?`, h.task)
	if _, err := h.store.TakeOverHedge(h.ctx, tasks.HedgeRef{TaskID: h.task, Fence: hc.Fence, EditorID: h.hedger.ID}); err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if _, err := h.store.Submit(h.ctx, tasks.SubmitParams{TaskID: h.task, Fence: hc.Fence, Holder: h.hedger.Holder(), Result: rawJSON(`{}`)}); err != nil {
		t.Fatalf("hedger's submit: %v", err)
	}
	got, err := h.store.RecordClaimTime(h.ctx, tasks.ClaimTimeParams{TaskID: h.task, Fence: hc.Fence, EditorID: h.hedger.ID,
		Outcome: tasks.OutcomeSubmitted, Reported: 90 * time.Second})
	if err != nil {
		t.Fatalf("record claim time: %v", err)
	}
	if got.Active != 90*time.Second {
		t.Errorf("hedger's active time = %v, want the 1m30s it reported (within the hedge's 2m)", got.Active)
	}
	// Its events stay in order: the holder's release, then the hedge's claim.
	evs := h.events(t, h.task)
	if n := len(evs); n < 3 || evs[n-3].Kind != tasks.EventReleased || evs[n-2].Kind != tasks.EventClaimed || evs[n-2].Fence != hc.Fence {
		t.Errorf("events %v, want ..., released, claimed (fence %d), submitted", kinds(evs), hc.Fence)
	}
}
