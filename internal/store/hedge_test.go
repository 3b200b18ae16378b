package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// hedgeBundle is a store whose category news hedges (due within 10m, holder
// silent for 2m), with a task due in 5m held by holder.
type hedgeBundle struct {
	*bundle
	holder, hedger, third *tasks.Editor
	task                  int64
	claim                 *tasks.Claim
}

func hedgeSetup(t *testing.T) *hedgeBundle {
	t.Helper()
	b := setup(t, store.Config{Workflows: map[string]tasks.Workflow{
		"news": {Hedge: tasks.Hedge{BeforeDue: 10 * time.Minute, InactiveFor: 2 * time.Minute}},
	}})
	h := &hedgeBundle{bundle: b, holder: b.editor(t, "holder", "news"), hedger: b.editor(t, "hedger", "news"), third: b.editor(t, "third", "news")}
	due := b.now(t).Add(5 * time.Minute)
	h.task = b.insert(t, tasks.NewTask{Category: "news", Title: "near", DueAt: due})[0]
	h.claim = b.claim(t, h.task, h.holder.Holder(), h.holder.ID, time.Hour)
	return h
}

// inactive makes the holder's claim start, and its last heartbeat, 3m ago.
func (h *hedgeBundle) inactive(t *testing.T) {
	t.Helper()
	h.exec(t, `UPDATE tasks SET assigned_at = NOW(3) - INTERVAL 3 MINUTE WHERE id = ?`, h.task)
	h.exec(t, `INSERT INTO editor_seen (editor_id, last_seen_at) VALUES (?, NOW(3) - INTERVAL 3 MINUTE)
		ON DUPLICATE KEY UPDATE last_seen_at = NOW(3) - INTERVAL 3 MINUTE`, h.holder.ID)
}

func (h *hedgeBundle) take(t *testing.T, e *tasks.Editor) (*tasks.Claim, error) {
	t.Helper()
	return h.store.TakeHedge(h.ctx, tasks.HedgeParams{EditorID: e.ID, Categories: []string{"news"}, Lease: time.Minute})
}

func (h *hedgeBundle) mustTake(t *testing.T) *tasks.Claim {
	t.Helper()
	c, err := h.take(t, h.hedger)
	if err != nil {
		t.Fatalf("take hedge: %v", err)
	}
	if !c.Hedge || c.Task.ID != h.task || c.Fence != h.claim.Fence+1 {
		t.Fatalf("hedge = task %d fence %d hedge %v, want task %d fence %d hedge true", c.Task.ID, c.Fence, c.Hedge, h.task, h.claim.Fence+1)
	}
	return c
}

func (h *hedgeBundle) results(t *testing.T) int {
	t.Helper()
	return h.count(t, `SELECT COUNT(*) FROM task_results WHERE task_id = ?`, h.task)
}

// A hedge is offered only when the task is near its due_at and its holder
// inactive, to one editor at a time, never to the holder.
func TestTakeHedgeConditions(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	// Holder active: its claim began just now.
	if _, err := h.take(t, h.hedger); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("take hedge of an active holder's task: %v, want ErrNotFound", err)
	}
	// Holder inactive, but the task is not due soon.
	h.inactive(t)
	h.exec(t, `UPDATE tasks SET due_at = NOW(3) + INTERVAL 1 HOUR WHERE id = ?`, h.task)
	if _, err := h.take(t, h.hedger); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("take hedge of a task due in 1h: %v, want ErrNotFound", err)
	}
	// Due soon, but the holder heartbeated a moment ago.
	h.exec(t, `UPDATE tasks SET due_at = NOW(3) + INTERVAL 5 MINUTE WHERE id = ?`, h.task)
	h.exec(t, `UPDATE editor_seen SET last_seen_at = NOW(3) WHERE editor_id = ?`, h.holder.ID)
	if _, err := h.take(t, h.hedger); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("take hedge of a task whose holder heartbeated: %v, want ErrNotFound", err)
	}
	h.inactive(t)
	// The holder itself is never offered its own task, even with room.
	h.exec(t, `UPDATE editors SET capacity = 2 WHERE id = ?`, h.holder.ID)
	if _, err := h.take(t, h.holder); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("the holder's hedge of its own task: %v, want ErrNotFound", err)
	}
	h.mustTake(t)
	// One hedge at a time.
	if _, err := h.take(t, h.third); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("second hedge: %v, want ErrNotFound", err)
	}
	held, err := h.store.HeldHedges(h.ctx, h.hedger.ID)
	if err != nil || len(held) != 1 || held[0].Task.ID != h.task {
		t.Fatalf("held hedges = %v, %v; want the task", held, err)
	}
	// The hedge takes the hedger's one slot.
	due := h.now(t).Add(5 * time.Minute)
	other := h.insert(t, tasks.NewTask{Category: "news", Title: "other", DueAt: due})[0]
	h.claim2(t, other)
	if _, err := h.take(t, h.hedger); !errors.Is(err, tasks.ErrEditorBusy) {
		t.Fatalf("hedge past capacity: %v, want ErrEditorBusy", err)
	}
	// A hedge released ends and frees the slot; the task is not offered to
	// the editor again for a while, the other one is.
	ref := tasks.HedgeRef{TaskID: h.task, Fence: h.claim.Fence + 1, EditorID: h.hedger.ID}
	if err := h.store.ReleaseHedge(h.ctx, ref, false); err != nil {
		t.Fatalf("release hedge: %v", err)
	}
	if c, err := h.take(t, h.hedger); err != nil || c.Task.ID != other {
		t.Fatalf("hedge after release: %v, %v; want task %d", c, err, other)
	}
	if err := h.store.ReleaseHedge(h.ctx, ref, false); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("release of a hedge released: %v, want ErrStale", err)
	}
}

// claim2 has the third editor claim another task held inactive, so that it is
// a hedge candidate for the hedger too.
func (h *hedgeBundle) claim2(t *testing.T, id int64) {
	t.Helper()
	h.bundle.claim(t, id, h.third.Holder(), h.third.ID, time.Hour)
	h.exec(t, `UPDATE tasks SET assigned_at = NOW(3) - INTERVAL 3 MINUTE WHERE id = ?`, id)
}

// The holder submits first: the hedger's takeover is refused as done by
// another, and the holder's result is the only one.
func TestHedgeHolderSubmitsFirst(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	h.inactive(t)
	hc := h.mustTake(t)
	if _, err := h.store.Submit(h.ctx, tasks.SubmitParams{TaskID: h.task, Fence: h.claim.Fence, Holder: h.holder.Holder(), Result: rawJSON(`{"by":"holder"}`)}); err != nil {
		t.Fatalf("holder's submit: %v", err)
	}
	ref := tasks.HedgeRef{TaskID: h.task, Fence: hc.Fence, EditorID: h.hedger.ID}
	_, err := h.store.TakeOverHedge(h.ctx, ref)
	if !errors.Is(err, tasks.ErrDoneByOther) || !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("hedger's takeover after the holder's submit: %v, want ErrDoneByOther wrapping ErrStale", err)
	}
	if _, err := h.store.HeartbeatHedge(h.ctx, ref, time.Minute); !errors.Is(err, tasks.ErrDoneByOther) {
		t.Fatalf("hedger's heartbeat after the holder's submit: %v, want ErrDoneByOther", err)
	}
	if n := h.results(t); n != 1 {
		t.Fatalf("%d results, want 1", n)
	}
	if st := h.task2(t).Status; st != tasks.StatusDone {
		t.Fatalf("status %s, want done", st)
	}
}

func (h *hedgeBundle) task2(t *testing.T) *tasks.Task { return h.bundle.task(t, h.task) }

// The hedger submits first: it takes the task over and submits under its own
// fence; the holder's writes are refused as done by another.
func TestHedgeHedgerSubmitsFirst(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	h.inactive(t)
	hc := h.mustTake(t)
	ref := tasks.HedgeRef{TaskID: h.task, Fence: hc.Fence, EditorID: h.hedger.ID}
	if until, err := h.store.HeartbeatHedge(h.ctx, ref, 2*time.Minute); err != nil || !until.After(hc.LeaseExpiresAt) {
		t.Fatalf("hedger's heartbeat: %v, %v; want a later deadline than %v", until, err, hc.LeaseExpiresAt)
	}
	if _, err := h.store.TakeOverHedge(h.ctx, ref); err != nil {
		t.Fatalf("hedger's takeover: %v", err)
	}
	if _, err := h.store.Submit(h.ctx, tasks.SubmitParams{TaskID: h.task, Fence: hc.Fence, Holder: h.hedger.Holder(), Result: rawJSON(`{"by":"hedger"}`)}); err != nil {
		t.Fatalf("hedger's submit: %v", err)
	}
	_, err := h.store.Submit(h.ctx, tasks.SubmitParams{TaskID: h.task, Fence: h.claim.Fence, Holder: h.holder.Holder(), Result: rawJSON(`{"by":"holder"}`)})
	if !errors.Is(err, tasks.ErrDoneByOther) || !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("holder's submit after the hedger's: %v, want ErrDoneByOther wrapping ErrStale", err)
	}
	if _, err := h.store.Heartbeat(h.ctx, tasks.HeartbeatParams{TaskID: h.task, Fence: h.claim.Fence, Holder: h.holder.Holder(), Lease: time.Minute}); !errors.Is(err, tasks.ErrDoneByOther) {
		t.Fatalf("holder's heartbeat after the hedger's submit: %v, want ErrDoneByOther", err)
	}
	if n := h.results(t); n != 1 {
		t.Fatalf("%d results, want 1", n)
	}
	// Every fence is accounted for: the holder's claim and release, the
	// hedger's claim and submit.
	got := kinds(h.events(t, h.task))
	want := []tasks.EventKind{tasks.EventClaimed, tasks.EventReleased, tasks.EventClaimed, tasks.EventSubmitted}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	if holder, err := h.store.ClaimHolder(h.ctx, h.task, hc.Fence); err != nil || holder != h.hedger.Holder() {
		t.Fatalf("holder of the hedge's fence: %q, %v", holder, err)
	}
}

// A hedge that expired just ends: its writes are stale, not done by another,
// and the holder keeps its claim.
func TestHedgeExpired(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	h.inactive(t)
	hc := h.mustTake(t)
	h.exec(t, `UPDATE task_hedges SET expires_at = NOW(3) - INTERVAL 1 SECOND WHERE task_id = ?`, h.task)
	ref := tasks.HedgeRef{TaskID: h.task, Fence: hc.Fence, EditorID: h.hedger.ID}
	_, err := h.store.TakeOverHedge(h.ctx, ref)
	if !errors.Is(err, tasks.ErrStale) || errors.Is(err, tasks.ErrDoneByOther) {
		t.Fatalf("takeover of an expired hedge: %v, want ErrStale alone", err)
	}
	if _, err := h.store.Submit(h.ctx, tasks.SubmitParams{TaskID: h.task, Fence: h.claim.Fence, Holder: h.holder.Holder(), Result: rawJSON(`{}`)}); err != nil {
		t.Fatalf("holder's submit: %v", err)
	}
}

// Both submit at once, many times over: exactly one result per task, and the
// loser is refused as done by another.
func TestHedgeConcurrentSubmits(t *testing.T) {
	t.Parallel()
	for i := range 20 {
		h := hedgeSetup(t)
		h.inactive(t)
		hc := h.mustTake(t)
		var wg sync.WaitGroup
		var holderErr, hedgerErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, holderErr = h.store.Submit(h.ctx, tasks.SubmitParams{TaskID: h.task, Fence: h.claim.Fence, Holder: h.holder.Holder(), Result: rawJSON(`{}`)})
		}()
		go func() {
			defer wg.Done()
			_, hedgerErr = h.store.TakeOverHedge(h.ctx, tasks.HedgeRef{TaskID: h.task, Fence: hc.Fence, EditorID: h.hedger.ID})
			if hedgerErr == nil {
				_, hedgerErr = h.store.Submit(h.ctx, tasks.SubmitParams{TaskID: h.task, Fence: hc.Fence, Holder: h.hedger.Holder(), Result: rawJSON(`{}`)})
			}
		}()
		wg.Wait()
		if (holderErr == nil) == (hedgerErr == nil) {
			t.Fatalf("round %d: holder %v, hedger %v: want exactly one to win", i, holderErr, hedgerErr)
		}
		for _, err := range []error{holderErr, hedgerErr} {
			if err != nil && !errors.Is(err, tasks.ErrDoneByOther) {
				t.Fatalf("round %d: loser's error %v, want ErrDoneByOther", i, err)
			}
		}
		if n := h.results(t); n != 1 {
			t.Fatalf("round %d: %d results, want 1", i, n)
		}
	}
}

// occupied is how many claims and live hedges the editor holds.
func (h *hedgeBundle) occupied(t *testing.T, e *tasks.Editor) int {
	t.Helper()
	return h.count(t, `SELECT (SELECT COUNT(*) FROM tasks WHERE editor_id = ?)
	+ (SELECT COUNT(*) FROM task_hedges h JOIN tasks t ON t.id = h.task_id
		WHERE h.editor_id = ? AND h.expires_at > NOW(3) AND t.fence = h.fence - 1 AND t.status = 'assigned')`, e.ID, e.ID)
}

// A live hedge takes a slot of its editor's capacity on every claim path: the
// group's cycle, the locking way (a task with stages) and a gold copy.
func TestHedgeTakesASlotOfEveryClaim(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	h.inactive(t)
	h.mustTake(t)
	plain := h.insert(t, tasks.NewTask{Category: "news", Title: "plain"})[0]
	staged := h.insert(t, tasks.NewTask{Category: "news", Title: "staged", Stages: []string{"edit", "review"}})[0]
	for _, id := range []int64{plain, staged} {
		task := h.bundle.task(t, id)
		_, err := h.store.Claim(h.ctx, tasks.ClaimParams{TaskID: id, Fence: task.Fence, Status: task.Status,
			Holder: h.hedger.Holder(), EditorID: h.hedger.ID, Lease: time.Minute, Workflow: hasWorkflow(task)})
		if !errors.Is(err, tasks.ErrEditorBusy) {
			t.Errorf("claim of task %q by an editor whose one slot a hedge takes: %v, want ErrEditorBusy", task.Title, err)
		}
	}
	gold := h.insert(t, tasks.NewTask{Category: "news", Title: "gold"})[0]
	if _, err := h.store.MarkGold(h.ctx, gold, tasks.GoldAnswer{Decision: tasks.DecisionApprove}, goldRules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	_, err := h.store.ClaimGold(h.ctx, tasks.GoldClaimParams{EditorID: h.hedger.ID, Holder: h.hedger.Holder(), Categories: []string{"news"}, Lease: time.Minute})
	if !errors.Is(err, tasks.ErrEditorBusy) {
		t.Errorf("gold claim by an editor whose one slot a hedge takes: %v, want ErrEditorBusy", err)
	}
	if n := h.occupied(t, h.hedger); n != 1 {
		t.Errorf("the hedger holds %d claims and hedges, want 1", n)
	}
}

// A hedge take and a claim of the same editor race, many times over, at
// capacity 1 and 2: the editor never holds more claims and live hedges than
// its capacity, and each side is either made or refused as busy (or, for the
// hedge, finds nothing).
func TestHedgeTakeRacesAClaim(t *testing.T) {
	t.Parallel()
	over := 0
	for i := range 12 {
		h := hedgeSetup(t)
		h.inactive(t)
		capacity := 1 + i%2
		if capacity > 1 {
			h.exec(t, `UPDATE editors SET capacity = ? WHERE id = ?`, capacity, h.hedger.ID)
			first := h.insert(t, tasks.NewTask{Category: "news", Title: "first"})[0]
			task := h.bundle.task(t, first)
			if _, err := h.store.Claim(h.ctx, tasks.ClaimParams{TaskID: first, Fence: task.Fence, Status: task.Status,
				Holder: h.hedger.Holder(), EditorID: h.hedger.ID, Capacity: capacity, Lease: time.Hour}); err != nil {
				t.Fatalf("round %d: first claim: %v", i, err)
			}
		}
		next := h.insert(t, tasks.NewTask{Category: "news", Title: "next"})[0]
		task := h.bundle.task(t, next)
		var wg sync.WaitGroup
		var hedgeErr, claimErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, hedgeErr = h.take(t, h.hedger)
		}()
		go func() {
			defer wg.Done()
			_, claimErr = h.store.Claim(h.ctx, tasks.ClaimParams{TaskID: next, Fence: task.Fence, Status: task.Status,
				Holder: h.hedger.Holder(), EditorID: h.hedger.ID, Capacity: capacity, Lease: time.Hour})
		}()
		wg.Wait()
		if hedgeErr != nil && !errors.Is(hedgeErr, tasks.ErrEditorBusy) && !errors.Is(hedgeErr, tasks.ErrNotFound) {
			t.Fatalf("round %d: hedge take: %v", i, hedgeErr)
		}
		if claimErr != nil && !errors.Is(claimErr, tasks.ErrEditorBusy) {
			t.Fatalf("round %d: claim: %v", i, claimErr)
		}
		if n := h.occupied(t, h.hedger); n > capacity {
			over++
			t.Errorf("round %d: capacity %d, the editor holds %d claims and hedges (hedge take %v, claim %v)", i, capacity, n, hedgeErr, claimErr)
		}
	}
	if over > 0 {
		t.Errorf("%d of 12 rounds put the editor past its capacity", over)
	}
}

// A task with stages, and a task of a group, are hedged as any (a task
// without a reservation is not barred for want of one), to an editor the
// workflow rules let take it: not to one limited to another stage, nor to one
// that did an earlier stage of it (the four-eyes rule).
func TestHedgeOfStagedAndGroupTasks(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	h.inactive(t)
	h.exec(t, `UPDATE tasks SET stages = 'edit,review', stage_count = 2, stage = 1 WHERE id = ?`, h.task)
	// third may take edit only; hedger did the edit stage.
	h.exec(t, `UPDATE editor_categories SET stages = 'edit' WHERE editor_id = ?`, h.third.ID)
	h.exec(t, `INSERT INTO task_results (task_id, fence, holder, editor_id, result, stage, stage_name) VALUES (?, 99, ?, ?, '{}', 0, 'edit')`,
		h.task, h.hedger.Holder(), h.hedger.ID)
	for _, e := range []*tasks.Editor{h.third, h.hedger} {
		if c, err := h.take(t, e); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("%s's hedge of the review stage = %+v, %v; want ErrNotFound", e.Name, c, err)
		}
	}
	h.exec(t, `DELETE FROM task_results WHERE task_id = ?`, h.task)
	c := h.mustTake(t)
	if c.Task.StageName() != "review" || len(c.Task.Stages) != 2 {
		t.Errorf("hedge of the staged task = stage %q of %v, want review of edit,review", c.Task.StageName(), c.Task.Stages)
	}

	// A group of one: its task is hedged too.
	h.exec(t, `DELETE FROM task_hedges WHERE task_id = ?`, h.task)
	h.exec(t, `UPDATE tasks SET stages = NULL, stage_count = 1, stage = 0, group_id = id, overlap = 1 WHERE id = ?`, h.task)
	h.mustTake(t)
}

// A claim a hedge took over is not counted as released by its holder, in the
// editor's stats (all time and today) and in its summary of today; its own
// release of another task is.
func TestHedgeTakeoverIsNoRelease(t *testing.T) {
	t.Parallel()
	h := hedgeSetup(t)
	h.inactive(t)
	hc := h.mustTake(t)
	if _, err := h.store.TakeOverHedge(h.ctx, tasks.HedgeRef{TaskID: h.task, Fence: hc.Fence, EditorID: h.hedger.ID}); err != nil {
		t.Fatalf("takeover: %v", err)
	}
	other := h.insert(t, tasks.NewTask{Category: "news", Title: "other"})[0]
	c := h.bundle.claim(t, other, h.holder.Holder(), h.holder.ID, time.Minute)
	if _, err := h.store.Release(h.ctx, tasks.ReleaseParams{TaskID: other, Fence: c.Fence, Holder: h.holder.Holder()}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if n := h.count(t, `SELECT COUNT(*) FROM task_events WHERE editor_id = ? AND kind = 'released'`, h.holder.ID); n != 2 {
		t.Fatalf("%d released events of the holder, want 2: the takeover's and its own", n)
	}
	st, err := h.store.GetEditorStats(h.ctx, h.holder.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.AllTime.Released != 1 || st.Today.Released != 1 || st.Today.Claimed != 2 {
		t.Errorf("holder's stats: all time %+v, today %+v; want 1 release (its own), 2 claims", st.AllTime, st.Today)
	}
	sum, err := h.store.GetEditorSummary(h.ctx, h.holder.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Today.Released != 1 {
		t.Errorf("holder's summary today %+v, want 1 release", sum.Today)
	}
	page, err := h.store.ListEditors(h.ctx, tasks.ListEditorsParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Editors {
		if e.ID == h.holder.ID && e.Today.Released != 1 {
			t.Errorf("holder listed with today %+v, want 1 release", e.Today)
		}
	}
}
