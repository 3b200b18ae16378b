package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// handover submits claim c of task submitted and claims task next (pending, at
// fence 0) for the same holder.
func (b *bundle) handover(t *testing.T, c *tasks.Claim, editorID, next int64, result string) (*tasks.Handover, error) {
	t.Helper()
	return b.store.SubmitAndClaim(b.ctx,
		tasks.SubmitParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder, Result: rawJSON(result)},
		tasks.ClaimParams{TaskID: next, Fence: 0, Status: tasks.StatusPending, Holder: c.Task.Holder, EditorID: editorID, Lease: time.Minute})
}

func TestSubmitAndClaimIsOneTransaction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		worker bool
		events []tasks.WebhookEvent
	}{
		{name: "editor"},
		{name: "worker", worker: true},
		{name: "editor with outbox", events: []tasks.WebhookEvent{tasks.WebhookSubmitted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, store.Config{WebhookEvents: tc.events})
			holder, editorID := "w1", int64(0)
			if !tc.worker {
				ed := b.editor(t, "alice", "news")
				holder, editorID = ed.Holder(), ed.ID
			}
			a, next := b.insertOne(t, "news", 0), b.insertOne(t, "news", 0)
			c := b.claim(t, a, holder, editorID, time.Minute)

			h, err := b.handover(t, c, editorID, next, `{"verdict":"ok"}`)
			if err != nil {
				t.Fatal(err)
			}
			if h.Ended == nil || h.Ended.TaskID != a || h.Ended.Status != tasks.StatusDone || h.Ended.Holder != holder {
				t.Errorf("ended = %+v, want task %d done by %s", h.Ended, a, holder)
			}
			if h.Refused != nil || h.Claim == nil || h.Claim.Task.ID != next || h.Claim.Fence != 1 {
				t.Fatalf("claim = %+v, refused %v; want task %d at fence 1", h.Claim, h.Refused, next)
			}
			if !h.Claim.AssignedAt.Equal(h.Ended.EndedAt) {
				t.Errorf("claim assigned at %v, submit at %v: want the batch's one instant", h.Claim.AssignedAt, h.Ended.EndedAt)
			}

			done := b.task(t, a)
			if done.Status != tasks.StatusDone || done.EditorID != 0 || done.Fence != c.Fence {
				t.Errorf("submitted task = %+v", done)
			}
			claimed := b.task(t, next)
			if claimed.Status != tasks.StatusAssigned || claimed.Fence != 1 || claimed.Holder != holder || claimed.EditorID != editorID {
				t.Errorf("claimed task = %+v", claimed)
			}
			if n := b.count(t, `SELECT COUNT(*) FROM task_results WHERE task_id = ? AND fence = ?`, a, c.Fence); n != 1 {
				t.Errorf("%d results for the submit, want 1", n)
			}
			if got := kinds(b.events(t, a)); len(got) != 2 || got[1] != tasks.EventSubmitted {
				t.Errorf("submitted task's events = %v, want claimed, submitted", got)
			}
			if got := b.events(t, next); len(got) != 1 || got[0].Kind != tasks.EventClaimed || got[0].Fence != 1 || got[0].Holder != holder {
				t.Errorf("claimed task's events = %+v, want one claimed event at fence 1", got)
			}
			wantOutbox := 0
			if len(tc.events) > 0 {
				wantOutbox = 1
			}
			if n := b.count(t, `SELECT COUNT(*) FROM webhook_outbox WHERE task_id = ? AND kind = 'submitted'`, a); n != wantOutbox {
				t.Errorf("%d outbox records, want %d", n, wantOutbox)
			}
			if !tc.worker {
				held, err := b.store.HeldByEditor(b.ctx, editorID)
				if err != nil || held.Task.ID != next {
					t.Errorf("held by editor = %+v, %v; want task %d", held, err, next)
				}
			}
		})
	}
}

func TestSubmitAndClaimRefusedSubmitChangesNothing(t *testing.T) {
	t.Parallel()
	// A worker's claim has no editor row whose busy check would refuse the
	// claim: the submit's own outcome must.
	for _, worker := range []bool{false, true} {
		t.Run(map[bool]string{false: "editor", true: "worker"}[worker], func(t *testing.T) {
			t.Parallel()
			b := setup(t, store.Config{})
			holder, editorID := "w1", int64(0)
			if !worker {
				ed := b.editor(t, "alice", "news")
				holder, editorID = ed.Holder(), ed.ID
			}
			a, next := b.insertOne(t, "news", 0), b.insertOne(t, "news", 0)
			c := b.claim(t, a, holder, editorID, time.Minute)

			// A fence the claim does not have, and a claim whose lease passed.
			beforeA, beforeNext := b.snapshot(t, a), b.snapshot(t, next)
			old := *c
			old.Fence--
			_, err := b.handover(t, &old, editorID, next, `{}`)
			wantErr(t, "submit with an old fence", err, tasks.ErrStale)
			b.unchanged(t, a, beforeA)
			b.unchanged(t, next, beforeNext)

			b.expireLease(t, a)
			beforeA = b.snapshot(t, a)
			_, err = b.handover(t, c, editorID, next, `{}`)
			wantErr(t, "submit of an expired claim", err, tasks.ErrStale)
			b.unchanged(t, a, beforeA)
			b.unchanged(t, next, beforeNext)
		})
	}
}

func TestSubmitAndClaimBadParamsChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	a, next := b.insertOne(t, "news", 0), b.insertOne(t, "news", 0)
	c := b.claim(t, a, ed.Holder(), ed.ID, time.Minute)
	beforeA, beforeNext := b.snapshot(t, a), b.snapshot(t, next)

	submit := tasks.SubmitParams{TaskID: a, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(`{}`)}
	claim := tasks.ClaimParams{TaskID: next, Status: tasks.StatusPending, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute}
	for name, tc := range map[string]func(*tasks.SubmitParams, *tasks.ClaimParams){
		"bad result":            func(s *tasks.SubmitParams, _ *tasks.ClaimParams) { s.Result = rawJSON(`{"a":`) },
		"status not pending":    func(_ *tasks.SubmitParams, c *tasks.ClaimParams) { c.Status = tasks.StatusAssigned },
		"another holder":        func(_ *tasks.SubmitParams, c *tasks.ClaimParams) { c.Holder = "someone" },
		"the submitted task":    func(_ *tasks.SubmitParams, c *tasks.ClaimParams) { c.TaskID = a },
		"lease below the floor": func(_ *tasks.SubmitParams, c *tasks.ClaimParams) { c.Lease = time.Microsecond },
	} {
		s, c := submit, claim
		tc(&s, &c)
		_, err := b.store.SubmitAndClaim(b.ctx, s, c)
		wantErr(t, name, err, tasks.ErrInvalid)
	}
	b.unchanged(t, a, beforeA)
	b.unchanged(t, next, beforeNext)
}

func TestSubmitAndClaimRefusedClaimKeepsTheSubmit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		arrange func(b *bundle, t *testing.T, ed *tasks.Editor, next int64)
		want    error
	}{
		{"stale candidate", func(b *bundle, t *testing.T, _ *tasks.Editor, next int64) {
			b.exec(t, `UPDATE tasks SET fence = fence + 1 WHERE id = ?`, next)
		}, tasks.ErrStale},
		{"claimed by another", func(b *bundle, t *testing.T, _ *tasks.Editor, next int64) {
			b.claim(t, next, "w9", 0, time.Minute)
		}, tasks.ErrStale},
		{"skipped by the editor", func(b *bundle, t *testing.T, ed *tasks.Editor, next int64) {
			b.exec(t, "INSERT INTO task_skips (task_id, editor_id, `until`) VALUES (?, ?, NOW(3) + INTERVAL 1 HOUR)", next, ed.ID)
		}, tasks.ErrSkipped},
		{"paused category", func(b *bundle, t *testing.T, _ *tasks.Editor, _ int64) {
			if _, _, err := b.store.PauseCategory(b.ctx, "later"); err != nil {
				t.Fatal(err)
			}
		}, tasks.ErrPaused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, store.Config{})
			ed := b.editor(t, "alice", "news", "later")
			a := b.insertOne(t, "news", 0)
			next := b.insertOne(t, "later", 0)
			c := b.claim(t, a, ed.Holder(), ed.ID, time.Minute)
			tc.arrange(b, t, ed, next)
			beforeNext := b.snapshot(t, next)

			h, err := b.handover(t, c, ed.ID, next, `{}`)
			if err != nil {
				t.Fatal(err)
			}
			if h.Claim != nil {
				t.Errorf("claim = %+v, want none", h.Claim)
			}
			wantErr(t, "the claim", h.Refused, tc.want)
			if h.Ended == nil || b.task(t, a).Status != tasks.StatusDone {
				t.Errorf("ended = %+v, task %+v; want the submit committed", h.Ended, b.task(t, a))
			}
			b.unchanged(t, next, beforeNext)
			if _, err := b.store.HeldByEditor(b.ctx, ed.ID); err == nil {
				t.Error("the editor holds a claim after a refused one")
			}
		})
	}
}

// A submit-and-claim whose context ends part way (the driver then drops the
// connection mid-batch) leaves each change with its event or neither, and
// never a claim without its submit.
func TestCanceledSubmitAndClaimIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookSubmitted}})
	const pairs = 150
	nts := make([]tasks.NewTask, 2*pairs)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "news", Title: "t"}
	}
	ids := b.insert(t, nts...)
	canceled := 0
	for i := 0; i < len(ids); i += 2 {
		holder := fmt.Sprintf("w%d", i%7)
		c := b.claim(t, ids[i], holder, 0, time.Minute)
		ctx, cancel := context.WithTimeout(b.ctx, time.Duration(rand.IntN(2000))*time.Microsecond)
		_, err := b.store.SubmitAndClaim(ctx,
			tasks.SubmitParams{TaskID: ids[i], Fence: c.Fence, Holder: holder, Result: rawJSON(`{}`)},
			tasks.ClaimParams{TaskID: ids[i+1], Status: tasks.StatusPending, Holder: holder, Lease: time.Minute})
		cancel()
		if err != nil {
			canceled++
		}
	}
	t.Logf("%d of %d submit-and-claims ended by their context", canceled, pairs)
	if canceled == 0 || canceled == pairs {
		t.Logf("no mix of finished and cut batches this run")
	}
	type state struct {
		ID      int64  `db:"id"`
		Status  string `db:"status"`
		Fence   int64  `db:"fence"`
		Claimed int    `db:"claimed"`
		Done    int    `db:"submitted"`
		Results int    `db:"results"`
		Outbox  int    `db:"outbox"`
	}
	var all []state
	if err := b.db.SelectContext(b.ctx, &all, `SELECT t.id, t.status, t.fence,
		(SELECT COUNT(*) FROM task_events e WHERE e.task_id = t.id AND e.kind = 'claimed') AS claimed,
		(SELECT COUNT(*) FROM task_events e WHERE e.task_id = t.id AND e.kind = 'submitted') AS submitted,
		(SELECT COUNT(*) FROM task_results r WHERE r.task_id = t.id) AS results,
		(SELECT COUNT(*) FROM webhook_outbox o WHERE o.task_id = t.id) AS outbox
		FROM tasks t ORDER BY t.id`); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(all); i += 2 {
		a, next := all[i], all[i+1]
		aDone := a == state{ID: a.ID, Status: "done", Fence: 1, Claimed: 1, Done: 1, Results: 1, Outbox: 1}
		aHeld := a == state{ID: a.ID, Status: "assigned", Fence: 1, Claimed: 1}
		nextClaimed := next == state{ID: next.ID, Status: "assigned", Fence: 1, Claimed: 1}
		nextPending := next == state{ID: next.ID, Status: "pending"}
		switch {
		case aDone && (nextClaimed || nextPending), aHeld && nextPending:
		default:
			t.Errorf("half-written pair:\n  submitted %+v\n  claimed   %+v", a, next)
		}
	}
}
