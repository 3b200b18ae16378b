package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// TestCompleteSnooze: a snoozed member of a completion batch goes back to the
// pool claimable after its delay, its attempt not counted and its snoozes one
// more, with a 'snoozed' event after the 'claimed' event its batch claim did
// not write; one at its limit is dead with the limit's error, event and
// webhook; a stale snooze changes nothing; the batch's done and failed
// members end as they would without it; a requeue resets the snoozes.
func TestCompleteSnooze(t *testing.T) {
	t.Parallel()
	b, cc := countedSetup(t, store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookDead}})
	ids := b.insert(t,
		tasks.NewTask{Category: "jobs", Title: "snooze"}, tasks.NewTask{Category: "jobs", Title: "at its limit"},
		tasks.NewTask{Category: "jobs", Title: "snooze 0"}, tasks.NewTask{Category: "jobs", Title: "stale"},
		tasks.NewTask{Category: "jobs", Title: "done"}, tasks.NewTask{Category: "jobs", Title: "failed"})
	const limit = 3
	b.exec(t, "UPDATE tasks SET snoozes = ? WHERE id = ?", limit, ids[1])
	// Batch claims, with no 'claimed' event, but for the third task's.
	cs := b.workerClaim(t, b.ctx, "", "worker:w", ids[0], ids[1], ids[3], ids[4], ids[5])
	claims := map[int64]*tasks.Claim{ids[0]: cs[0], ids[1]: cs[1], ids[3]: cs[2], ids[4]: cs[3], ids[5]: cs[4]}
	claims[ids[2]] = b.claim(t, ids[2], "worker:x", 0, time.Minute)
	var os []tasks.Outcome
	for _, id := range ids {
		c := claims[id]
		os = append(os, tasks.Outcome{TaskID: id, Fence: c.Fence, Holder: c.Task.Holder})
	}
	os[0].Snooze = &tasks.Snooze{For: time.Hour, Max: limit}
	os[1].Snooze = &tasks.Snooze{For: time.Minute, Max: limit}
	os[2].Snooze = &tasks.Snooze{For: 0, Max: limit}
	os[3].Snooze = &tasks.Snooze{For: time.Hour, Max: limit}
	os[4].Result = rawJSON(`{"ok":true}`)
	os[5].Err, os[5].Backoff = "try again", time.Hour
	// The stale member's claim was revoked and the task claimed again by
	// another worker: its snooze must change nothing.
	if _, err := b.store.ForceRelease(b.ctx, ids[3]); err != nil {
		t.Fatal(err)
	}
	b.claim(t, ids[3], "worker:other", 0, time.Minute)
	staleBefore := b.snapshot(t, ids[3])

	start := b.now(t)
	before := cc.Counts()
	res, err := b.store.Complete(b.ctx, os)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	refusedRoundTrips(t, "complete", cc, before)
	end := b.now(t)
	wantErr(t, "the stale snooze", res[3].Err, tasks.ErrStale)
	b.unchanged(t, ids[3], staleBefore)
	for i, want := range map[int]tasks.Status{0: tasks.StatusPending, 1: tasks.StatusDead, 2: tasks.StatusPending, 4: tasks.StatusDone, 5: tasks.StatusPending} {
		if res[i].Err != nil || res[i].Ended == nil || res[i].Ended.Status != want || res[i].Ended.TaskID != ids[i] {
			t.Fatalf("member %d: %+v (%v), want ended %s", i, res[i].Ended, res[i].Err, want)
		}
	}

	// Snoozed: back in the pool after the delay, the attempt not counted.
	for i, delay := range map[int]time.Duration{0: time.Hour, 2: 0} {
		got := b.task(t, ids[i])
		if got.Status != tasks.StatusPending || got.Attempts != 0 || got.Snoozes != 1 || got.Holder != "" || got.AssignedAt != nil ||
			got.LeaseExpiresAt != nil || got.LastError != "" {
			t.Errorf("snoozed task %d: %+v, want pending, 0 attempts, 1 snooze, no holder", i, got)
		}
		if got.RunAfter.Before(start.Add(delay)) || got.RunAfter.After(end.Add(delay)) {
			t.Errorf("snoozed task %d: run_after %v, want %v after the batch (between %v and %v)", i, got.RunAfter, delay, start.Add(delay), end.Add(delay))
		}
		// The batch claim's 'claimed' event is written as the claim would
		// have written it, at its time.
		c := claims[ids[i]]
		claimed := tasks.Event{Kind: tasks.EventClaimed, Fence: c.Fence, Holder: c.Task.Holder}
		if i == 0 {
			claimed.At = c.AssignedAt
		}
		wantHistory(t, b, ids[i], claimed,
			tasks.Event{Kind: tasks.EventSnoozed, Fence: c.Fence, Holder: c.Task.Holder, Detail: delay.String()})
	}
	// At its limit: dead, its attempt not counted either, the holder kept.
	dead := b.task(t, ids[1])
	const limitErr = "snoozed 3 times, the limit"
	if dead.Status != tasks.StatusDead || dead.LastError != limitErr || dead.Snoozes != limit || dead.Attempts != 0 ||
		dead.Holder != "worker:w" || dead.DoneAt == nil {
		t.Errorf("task at its limit: %+v, want dead with %q, 3 snoozes, 0 attempts, its holder kept", dead, limitErr)
	}
	wantHistory(t, b, ids[1],
		tasks.Event{Kind: tasks.EventClaimed, Fence: 1, Holder: "worker:w", At: claims[ids[1]].AssignedAt},
		tasks.Event{Kind: tasks.EventDead, Fence: 1, Holder: "worker:w", Detail: limitErr})
	if n := b.count(t, "SELECT COUNT(*) FROM webhook_outbox WHERE kind = 'dead' AND cause = 'snooze' AND task_id = ? AND detail = ?", ids[1], limitErr); n != 1 {
		t.Errorf("%d dead records of the snooze in the outbox, want 1", n)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM webhook_outbox"); n != 1 {
		t.Errorf("%d records in the outbox, want the one dead (a snooze within its limit is none)", n)
	}
	// The other members ended as they would have alone.
	if got := b.task(t, ids[4]); got.Status != tasks.StatusDone || got.Snoozes != 0 ||
		b.count(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", ids[4]) != 1 {
		t.Errorf("done member: %+v", got)
	}
	if got := b.task(t, ids[5]); got.Status != tasks.StatusPending || got.Attempts != 1 || got.Snoozes != 0 || got.LastError != "try again" {
		t.Errorf("failed member: %+v, want pending after 1 attempt, no snoozes", got)
	}
	if k := kinds(b.events(t, ids[5])); !slices.Equal(k, []tasks.EventKind{tasks.EventClaimed, tasks.EventFailed}) {
		t.Errorf("failed member's events %v", k)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM tasks WHERE claim_unlogged = 1 AND status <> 'assigned'"); n != 0 {
		t.Errorf("%d ended claims still marked without their 'claimed' event", n)
	}

	// The same outcomes again: stale, nothing changes.
	snap := b.snapshot(t, ids[0])
	res, err = b.store.Complete(b.ctx, os[:3])
	if err != nil {
		t.Fatalf("complete again: %v", err)
	}
	for i := range res {
		wantErr(t, fmt.Sprintf("member %d again", i), res[i].Err, tasks.ErrStale)
	}
	b.unchanged(t, ids[0], snap)

	// A requeue of the dead task starts its snoozes again.
	if _, err := b.store.Requeue(b.ctx, tasks.ChangeParams{TaskID: ids[1]}); err != nil {
		t.Fatal(err)
	}
	if got := b.task(t, ids[1]); got.Status != tasks.StatusPending || got.Snoozes != 0 || got.Attempts != 0 {
		t.Errorf("requeued task: %+v, want pending with no snoozes", got)
	}

	// Bad params change nothing.
	c := b.claim(t, ids[2], "worker:x", 0, time.Minute)
	o := tasks.Outcome{TaskID: ids[2], Fence: c.Fence, Holder: "worker:x"}
	for what, sn := range map[string]tasks.Snooze{
		"negative":        {For: -time.Millisecond, Max: 1},
		"over the max":    {For: tasks.SnoozeMax + time.Millisecond, Max: 1},
		"without a limit": {For: time.Second},
	} {
		bad := o
		bad.Snooze = &sn
		if _, err := b.store.Complete(b.ctx, []tasks.Outcome{bad}); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("a snooze %s: %v, want ErrInvalid", what, err)
		}
	}
	bad := o
	bad.Snooze, bad.Result = &tasks.Snooze{For: time.Second, Max: 1}, rawJSON(`1`)
	if _, err := b.store.Complete(b.ctx, []tasks.Outcome{bad}); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("a snooze with a result: %v, want ErrInvalid", err)
	}
	if got := b.task(t, ids[2]); got.Status != tasks.StatusAssigned || got.Fence != c.Fence {
		t.Errorf("refused outcomes changed the task: %+v", got)
	}
}

// TestCompleteAndClaimSnooze: a snooze carried by a claim ends its claim as
// Complete's does, and the claim is made in the same transaction.
func TestCompleteAndClaimSnooze(t *testing.T) {
	t.Parallel()
	b, cc := countedSetup(t, store.Config{})
	ids := b.insert(t, tasks.NewTask{Category: "jobs", Title: "snoozed"}, tasks.NewTask{Category: "jobs", Title: "next"})
	c := b.workerClaim(t, b.ctx, "", "worker:w:0", ids[0])[0]
	ps := b.claimParams(t, ids[1])
	before := cc.Counts()
	done, claimed, err := b.store.CompleteAndClaim(b.ctx,
		[]tasks.Outcome{{TaskID: ids[0], Fence: c.Fence, Holder: c.Task.Holder, Snooze: &tasks.Snooze{For: time.Minute, Max: 5}}}, ps)
	if err != nil {
		t.Fatalf("complete and claim: %v", err)
	}
	oneRoundTrip(t, "complete and claim", cc, before)
	if done[0].Err != nil || done[0].Ended.Status != tasks.StatusPending || claimed[0].Err != nil {
		t.Fatalf("answers %+v %+v, want the snooze and the claim", done[0], claimed[0])
	}
	if got := b.task(t, ids[0]); got.Status != tasks.StatusPending || got.Attempts != 0 || got.Snoozes != 1 {
		t.Errorf("snoozed task: %+v", got)
	}
	if k := kinds(b.events(t, ids[0])); !slices.Equal(k, []tasks.EventKind{tasks.EventClaimed, tasks.EventSnoozed}) {
		t.Errorf("snoozed task's events %v", k)
	}
	if got := b.task(t, ids[1]); got.Status != tasks.StatusAssigned || got.Snoozes != 0 {
		t.Errorf("claimed task: %+v", got)
	}
}
