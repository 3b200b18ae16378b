package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/roundtrip"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// claimParams are the batch claim params of pending tasks ids, holder i for
// ids[i].
func (b *bundle) claimParams(t *testing.T, ids ...int64) []tasks.ClaimParams {
	t.Helper()
	ps := make([]tasks.ClaimParams, len(ids))
	for i, id := range ids {
		task := b.task(t, id)
		ps[i] = tasks.ClaimParams{
			TaskID: id, Fence: task.Fence, Status: task.Status,
			Holder: fmt.Sprintf("worker:w:%d", i), Lease: time.Minute,
		}
	}
	return ps
}

func TestClaimBatch(t *testing.T) {
	t.Parallel()
	b, cc := countedSetup(t, store.Config{})
	ids := b.insert(t,
		tasks.NewTask{Category: "jobs", Title: "a"}, tasks.NewTask{Category: "jobs", Title: "b"},
		tasks.NewTask{Category: "jobs", Title: "c"}, tasks.NewTask{Category: "paused", Title: "d"})
	ps := b.claimParams(t, ids...)
	// c was claimed by someone else since it was read: its fence moved on.
	b.claim(t, ids[2], "other", 0, time.Minute)
	if _, _, err := b.store.PauseCategory(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	before := cc.Counts()
	res, err := b.store.ClaimBatch(b.ctx, ps)
	if err != nil {
		t.Fatalf("claim batch: %v", err)
	}
	oneRoundTrip(t, "claim batch", cc, before)
	for i, id := range ids[:2] {
		c := res[i].Claim
		if res[i].Err != nil || c == nil || c.Task.ID != id || c.Fence != ps[i].Fence+1 || c.Task.Holder != ps[i].Holder {
			t.Fatalf("member %d: %+v, want claimed with fence %d by %s", i, res[i], ps[i].Fence+1, ps[i].Holder)
		}
		got := b.task(t, id)
		if got.Status != tasks.StatusAssigned || got.Fence != c.Fence || got.Holder != ps[i].Holder || got.Attempts != 1 ||
			got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(c.LeaseExpiresAt) {
			t.Fatalf("task %d after the batch: %+v", id, got)
		}
		if k := kinds(b.events(t, id)); !slices.Equal(k, []tasks.EventKind{tasks.EventClaimed}) {
			t.Fatalf("task %d events %v, want one claimed", id, k)
		}
	}
	wantErr(t, "claim of a task claimed meanwhile", res[2].Err, tasks.ErrStale)
	wantErr(t, "claim in a paused category", res[3].Err, tasks.ErrPaused)
	if got := b.task(t, ids[2]); got.Holder != "other" || got.Fence != ps[2].Fence+1 {
		t.Fatalf("the refused member changed its task: %+v", got)
	}
	if got := b.task(t, ids[3]); got.Status != tasks.StatusPending || got.Fence != ps[3].Fence {
		t.Fatalf("the paused member changed its task: %+v", got)
	}

	// Bad params change nothing.
	for _, bad := range [][]tasks.ClaimParams{
		{ps[0], ps[0]},
		{{TaskID: ids[0], Fence: 1, Status: tasks.StatusPending, Holder: "w", EditorID: 3, Lease: time.Minute}},
		{{TaskID: ids[0], Fence: 1, Status: tasks.StatusAssigned, Holder: "w", Lease: time.Minute}},
		{{TaskID: ids[0], Fence: 1, Status: tasks.StatusPending, Holder: "", Lease: time.Minute}},
	} {
		if _, err := b.store.ClaimBatch(b.ctx, bad); !errors.Is(err, tasks.ErrInvalid) {
			t.Fatalf("claim batch %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestHeartbeatBatch(t *testing.T) {
	t.Parallel()
	b, cc := countedSetup(t, store.Config{MaxHold: time.Hour})
	ids := b.insert(t,
		tasks.NewTask{Category: "jobs", Title: "a"}, tasks.NewTask{Category: "jobs", Title: "b"},
		tasks.NewTask{Category: "jobs", Title: "c"})
	var ps []tasks.HeartbeatParams
	for i, id := range ids {
		c := b.claim(t, id, fmt.Sprintf("worker:w:%d", i), 0, time.Second)
		ps = append(ps, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: c.Task.Holder, Lease: time.Minute})
	}
	// b's claim was revoked; c's reaches the maximum hold.
	if _, err := b.store.ForceRelease(b.ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	b.exec(t, "UPDATE tasks SET assigned_at = NOW(3) - INTERVAL 1 HOUR, lease_expires_at = NOW(3) + INTERVAL 1 SECOND WHERE id = ?", ids[2])
	now := b.now(t)
	before := cc.Counts()
	res, err := b.store.HeartbeatBatch(b.ctx, ps)
	if err != nil {
		t.Fatalf("heartbeat batch: %v", err)
	}
	// The batch, and a read of its refused member (was its claim cancelled?).
	if d := cc.Counts().Sub(before); d.RoundTrips != 2 || d.Commits != 1 {
		t.Fatalf("heartbeat batch with a refused member: %d round trips and %d commits, want 2 (the batch, the read of the refused) and 1", d.RoundTrips, d.Commits)
	}
	if res[0].Err != nil || res[0].LeaseExpiresAt.Before(now.Add(time.Minute-time.Second)) {
		t.Fatalf("live member: %+v, want its lease a minute from now", res[0])
	}
	if got := b.task(t, ids[0]); !got.LeaseExpiresAt.Equal(res[0].LeaseExpiresAt) {
		t.Fatalf("task a's lease %v, want %v", got.LeaseExpiresAt, res[0].LeaseExpiresAt)
	}
	wantErr(t, "heartbeat of a revoked claim", res[1].Err, tasks.ErrStale)
	wantErr(t, "heartbeat at the hold limit", res[2].Err, tasks.ErrHoldLimit)
	// A renewal writes the lease only: no event, no last-seen time.
	if n := b.count(t, "SELECT COUNT(*) FROM task_events WHERE kind = 'heartbeat'") + b.count(t, "SELECT COUNT(*) FROM editor_seen"); n != 0 {
		t.Fatalf("%d heartbeat events and last-seen rows, want none", n)
	}
	// A batch whose members are all renewed is one round trip.
	before = cc.Counts()
	if res, err := b.store.HeartbeatBatch(b.ctx, ps[:1]); err != nil || res[0].Err != nil {
		t.Fatalf("heartbeat batch of the live claim: %v, %+v", err, res)
	}
	oneRoundTrip(t, "heartbeat batch", cc, before)
}

func TestComplete(t *testing.T) {
	t.Parallel()
	b, cc := countedSetup(t, store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookSubmitted, tasks.WebhookDead}})
	ids := b.insert(t,
		tasks.NewTask{Category: "jobs", Title: "done"}, tasks.NewTask{Category: "jobs", Title: "stale"},
		tasks.NewTask{Category: "jobs", Title: "retry"}, tasks.NewTask{Category: "jobs", Title: "dead"},
		tasks.NewTask{Category: "jobs", Title: "last attempt", MaxAttempts: 1})
	var os []tasks.Outcome
	for i, id := range ids {
		c := b.claim(t, id, fmt.Sprintf("worker:w:%d", i), 0, time.Minute)
		os = append(os, tasks.Outcome{TaskID: id, Fence: c.Fence, Holder: c.Task.Holder})
	}
	os[0].Result = rawJSON(`{"ok":true}`)
	os[1].Result = rawJSON(`1`)
	os[2].Err, os[2].Backoff = "try again", time.Hour
	os[3].Err, os[3].Dead = "hopeless", true
	os[4].Err = "out of attempts"
	// The stale member's claim was revoked: its write must change nothing
	// and refuse nothing else.
	if _, err := b.store.ForceRelease(b.ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	staleBefore := b.snapshot(t, ids[1])
	before := cc.Counts()
	res, err := b.store.Complete(b.ctx, os)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	refusedRoundTrips(t, "complete", cc, before)
	wantErr(t, "the stale member", res[1].Err, tasks.ErrStale)
	b.unchanged(t, ids[1], staleBefore)
	for i, want := range map[int]tasks.Status{0: tasks.StatusDone, 2: tasks.StatusPending, 3: tasks.StatusDead, 4: tasks.StatusDead} {
		if res[i].Err != nil || res[i].Ended == nil || res[i].Ended.Status != want || res[i].Ended.TaskID != ids[i] {
			t.Fatalf("member %d: %+v (%v), want ended %s", i, res[i].Ended, res[i].Err, want)
		}
		if got := b.task(t, ids[i]); got.Status != want {
			t.Fatalf("task %d %s, want %s", ids[i], got.Status, want)
		}
	}
	var result string
	if err := b.db.GetContext(b.ctx, &result, "SELECT result FROM task_results WHERE task_id = ? AND fence = ?", ids[0], os[0].Fence); err != nil {
		t.Fatalf("the done member's result: %v", err)
	}
	if result != `{"ok": true}` && result != `{"ok":true}` {
		t.Fatalf("result %q", result)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM task_results"); n != 1 {
		t.Fatalf("%d results, want 1", n)
	}
	retry := b.task(t, ids[2])
	if retry.Holder != "" || retry.LastError != "try again" || retry.RunAfter.Before(b.now(t).Add(50*time.Minute)) {
		t.Fatalf("the retried task: holder %q, last error %q, run after %v", retry.Holder, retry.LastError, retry.RunAfter)
	}
	if dead := b.task(t, ids[3]); dead.Holder != os[3].Holder || dead.LastError != "hopeless" || dead.DoneAt == nil {
		t.Fatalf("the dead task keeps its holder and records the error: %+v", dead)
	}
	for i, want := range map[int]tasks.EventKind{0: tasks.EventSubmitted, 2: tasks.EventFailed, 3: tasks.EventDead, 4: tasks.EventDead} {
		evs := b.events(t, ids[i])
		if last := evs[len(evs)-1]; last.Kind != want || last.Fence != os[i].Fence {
			t.Fatalf("task %d: last event %s fence %d, want %s fence %d", ids[i], last.Kind, last.Fence, want, os[i].Fence)
		}
	}
	if n := b.count(t, "SELECT COUNT(*) FROM webhook_outbox WHERE kind = 'submitted'"); n != 1 {
		t.Fatalf("%d submitted records in the outbox, want 1", n)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM webhook_outbox WHERE kind = 'dead' AND detail IN ('hopeless', 'out of attempts')"); n != 2 {
		t.Fatalf("%d dead records in the outbox, want 2", n)
	}

	// The same outcomes again: every member is stale now, nothing changes.
	res, err = b.store.Complete(b.ctx, os)
	if err != nil {
		t.Fatalf("complete again: %v", err)
	}
	for i := range res {
		wantErr(t, fmt.Sprintf("member %d again", i), res[i].Err, tasks.ErrStale)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM task_results"); n != 1 {
		t.Fatalf("%d results after a stale batch, want 1", n)
	}

	// Bad params change nothing.
	for _, bad := range [][]tasks.Outcome{
		{os[0], os[0]},
		{{TaskID: ids[0], Fence: 1, Holder: "w", Result: rawJSON(`{`)}},
		{{TaskID: ids[0], Fence: 1, Holder: "w", Backoff: -time.Second}},
	} {
		if _, err := b.store.Complete(b.ctx, bad); !errors.Is(err, tasks.ErrInvalid) {
			t.Fatalf("complete %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

// countedSetup is setup over a connection pool whose requests are counted.
func countedSetup(t *testing.T, cfg store.Config) (*bundle, *roundtrip.Connector) {
	t.Helper()
	db, cc, err := roundtrip.OpenMySQL(t.Context(), storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store, err := store.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	askGalera(t, store)
	return &bundle{ctx: t.Context(), db: db, store: store}, cc
}

// oneRoundTrip fails the test unless the requests since before were one
// round trip carrying one commit.
func oneRoundTrip(t *testing.T, what string, cc *roundtrip.Connector, before roundtrip.Counts) {
	t.Helper()
	if d := cc.Counts().Sub(before); d.RoundTrips != 1 || d.Commits != 1 {
		t.Fatalf("%s: %d round trips and %d commits, want 1 and 1", what, d.RoundTrips, d.Commits)
	}
}

// A batch of one holder, a worker process's, names the holder once: a member
// whose claim was revoked and taken again, by another holder or by the same
// at a new fence, is stale, and the others complete.
func TestCompleteOneHolder(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ids := b.insert(t, tasks.NewTask{Category: "jobs", Title: "a"}, tasks.NewTask{Category: "jobs", Title: "b"},
		tasks.NewTask{Category: "jobs", Title: "c"}, tasks.NewTask{Category: "jobs", Title: "d"})
	const holder = "worker:one"
	var os []tasks.Outcome
	for _, id := range ids {
		c := b.claim(t, id, holder, 0, time.Minute)
		os = append(os, tasks.Outcome{TaskID: id, Fence: c.Fence, Holder: holder, Result: rawJSON(`1`)})
	}
	// Task c is taken by another holder, task d by the same one at a new fence.
	for i, h := range map[int]string{2: "worker:two", 3: holder} {
		if _, err := b.store.ForceRelease(b.ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
		b.claim(t, ids[i], h, 0, time.Minute)
	}
	res, err := b.store.Complete(b.ctx, os)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	for i, want := range []tasks.Status{tasks.StatusDone, tasks.StatusDone, tasks.StatusAssigned, tasks.StatusAssigned} {
		if got := b.task(t, ids[i]); got.Status != want {
			t.Errorf("task %d: %s, want %s", i, got.Status, want)
		}
		if stale := errors.Is(res[i].Err, tasks.ErrStale); stale != (want == tasks.StatusAssigned) {
			t.Errorf("member %d: %v", i, res[i].Err)
		}
	}
	if n := b.count(t, "SELECT COUNT(*) FROM task_results"); n != 2 {
		t.Errorf("%d results, want 2", n)
	}
}

// TestWorkerBatchHolders checks that a worker batch names its members' holders
// exactly whatever they hold: quotes, backslashes, placeholders, JSON and SQL
// syntax, characters beyond ASCII; a holder differing from the claim's only in
// case or in an escape ends nothing.
func TestWorkerBatchHolders(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	holders := []string{`w"1\`, `w', NULL); -- ?`, `wörker 😀 \u0041`, `{"a":[1]}`, `W"1\`}
	var nts []tasks.NewTask
	for range holders {
		nts = append(nts, tasks.NewTask{Category: "jobs", Title: "t"})
	}
	ids := b.insert(t, nts...)
	ps := b.claimParams(t, ids...)
	for i := range ps {
		ps[i].Holder = holders[i]
	}
	res, err := b.store.ClaimBatch(b.ctx, ps)
	if err != nil {
		t.Fatalf("claim batch: %v", err)
	}
	var os []tasks.Outcome
	for i, id := range ids {
		if res[i].Err != nil || res[i].Claim.Task.Holder != holders[i] {
			t.Fatalf("member %d: %+v, want claimed by %q", i, res[i], holders[i])
		}
		if got := b.task(t, id); got.Holder != holders[i] {
			t.Fatalf("task %d held by %q, want %q", id, got.Holder, holders[i])
		}
		o := tasks.Outcome{TaskID: id, Fence: res[i].Claim.Fence, Holder: holders[i], Result: []byte(`{"ok":true}`)}
		if i == 1 {
			o.Result, o.Err = nil, "boom"
		}
		os = append(os, o)
	}
	// The last two members name holders not their claims': one differs in a
	// digit, the other in case alone.
	os[3].Holder, os[4].Holder = `{"a":[2]}`, `w"1\`
	done, err := b.store.Complete(b.ctx, os)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	for i, id := range ids {
		got := b.task(t, id)
		switch i {
		case 0, 2:
			if done[i].Err != nil || got.Status != tasks.StatusDone || got.Holder != holders[i] {
				t.Fatalf("member %d: %+v, task %+v, want done by %q", i, done[i], got, holders[i])
			}
		case 1:
			if done[i].Err != nil || got.Status != tasks.StatusPending {
				t.Fatalf("member %d: %+v, task %+v, want failed back to pending", i, done[i], got)
			}
		default:
			wantErr(t, fmt.Sprintf("member %d with another holder", i), done[i].Err, tasks.ErrStale)
			if got.Status != tasks.StatusAssigned || got.Holder != holders[i] {
				t.Fatalf("member %d's task changed: %+v", i, got)
			}
		}
	}
}
