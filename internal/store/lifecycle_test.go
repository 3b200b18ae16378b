package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestHeartbeatExtendsLeaseUpToMaxHold(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{MaxHold: time.Hour})
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, "w1", 0, time.Minute)

	before := b.now(t)
	expires, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: "w1", Lease: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	after := b.now(t)
	if expires.Before(before.Add(5*time.Minute)) || expires.After(after.Add(5*time.Minute)) {
		t.Errorf("lease %v not now+5m on the database clock [%v, %v]", expires, before, after)
	}
	if got := b.task(t, id); !got.LeaseExpiresAt.Equal(expires) || got.Fence != c.Fence {
		t.Errorf("stored lease %v fence %d, want %v fence %d", got.LeaseExpiresAt, got.Fence, expires, c.Fence)
	}

	// A shorter lease never shortens the claim.
	expires2, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: "w1", Lease: time.Millisecond})
	if err != nil || expires2.Before(expires) {
		t.Errorf("short heartbeat = %v, %v; want no earlier than %v", expires2, err, expires)
	}

	// A lease beyond assigned_at + MaxHold is capped there ...
	limit := c.AssignedAt.Add(time.Hour)
	capped, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: "w1", Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !capped.Equal(limit) {
		t.Errorf("capped lease = %v, want assigned_at + MaxHold = %v", capped, limit)
	}
	// ... and then the claim cannot be extended any more.
	before2 := b.snapshot(t, id)
	_, err = b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: "w1", Lease: time.Second})
	wantErr(t, "heartbeat at the hold limit", err, tasks.ErrHoldLimit)
	b.unchanged(t, id, before2)

	// Heartbeats are not history: the claim is its one event still.
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE task_id = ?`, id); n != 1 {
		t.Errorf("%d events after three heartbeats, want 1 (the claim)", n)
	}
}

func TestSubmitWritesOneResultAndEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)

	before := b.snapshot(t, id)
	for _, bad := range []string{``, `{"a":`, `nope`} {
		_, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(bad)})
		wantErr(t, "submit of "+bad, err, tasks.ErrInvalid)
	}
	b.unchanged(t, id, before)

	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(`{"verdict":"ok"}`)}); err != nil {
		t.Fatal(err)
	}
	got := b.task(t, id)
	if got.Status != tasks.StatusDone || got.DoneAt == nil || got.EditorID != 0 || got.LeaseExpiresAt != nil ||
		got.Holder != ed.Holder() || got.Fence != c.Fence {
		t.Errorf("task after submit = %+v", got)
	}
	var results []struct {
		Fence    int64  `db:"fence"`
		Holder   string `db:"holder"`
		EditorID int64  `db:"editor_id"`
		Result   string `db:"result"`
	}
	if err := b.db.SelectContext(b.ctx, &results, `SELECT fence, holder, editor_id, result FROM task_results WHERE task_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Fence != c.Fence || results[0].Holder != ed.Holder() || results[0].EditorID != ed.ID ||
		!strings.Contains(results[0].Result, `"verdict"`) {
		t.Errorf("results = %+v, want one row for fence %d", results, c.Fence)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE task_id = ? AND kind = 'submitted' AND fence = ? AND editor_id = ?`, id, c.Fence, ed.ID); n != 1 {
		t.Errorf("%d submitted events, want 1", n)
	}

	// A second submit of the same claim is stale and changes nothing.
	before = b.snapshot(t, id)
	_, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(`{}`)})
	wantErr(t, "second submit", err, tasks.ErrStale)
	b.unchanged(t, id, before)
}

func TestReleaseReturnsTaskToPool(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Reason: "lunch"}); err != nil {
		t.Fatal(err)
	}
	got := b.task(t, id)
	if got.Status != tasks.StatusPending || got.Fence != c.Fence || got.Holder != "" || got.EditorID != 0 ||
		got.AssignedAt != nil || got.LeaseExpiresAt != nil {
		t.Errorf("task after release = %+v", got)
	}
	evs := b.events(t, id)
	if len(evs) != 2 || evs[1].Kind != tasks.EventReleased || evs[1].Detail != "lunch" || evs[1].Fence != c.Fence {
		t.Errorf("events = %+v, want claimed then released (lunch)", evs)
	}
	// Kept from the editor for the release cooldown (the default, a minute), by
	// the same record as a skip.
	if n := b.count(t, "SELECT COUNT(*) FROM task_skips WHERE task_id = ? AND editor_id = ? AND `until` > NOW(3) + INTERVAL 50 SECOND", id, ed.ID); n != 1 {
		t.Errorf("%d records keep the task from the editor for about a minute, want 1", n)
	}
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}, EditorID: ed.ID}); len(got) != 0 {
		t.Errorf("the editor's candidates after release = %v, want none", got)
	}
	before := b.snapshot(t, id)
	_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: c.Fence, Status: tasks.StatusPending, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
	wantErr(t, "claim again by the editor who released it", err, tasks.ErrSkipped)
	b.unchanged(t, id, before)
	// Offered again at once to everyone else, and the next claim bumps the fence.
	bob := b.editor(t, "bob", "news")
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}, EditorID: bob.ID}); !equalIDs(got, []int64{id}) {
		t.Errorf("others' candidates after release = %v", got)
	}
	if c2 := b.claim(t, id, bob.Holder(), bob.ID, time.Minute); c2.Fence != c.Fence+1 {
		t.Errorf("fence after reclaim = %d, want %d", c2.Fence, c.Fence+1)
	}
}

// TestReleaseCooldownBoundsReclaims: an editor that releases a task and asks
// for it again in a loop claims it once per ReleaseCooldown, not once per
// release; once the cooldown passed it may claim it again. A worker's release
// keeps nothing from anyone.
func TestReleaseCooldownBoundsReclaims(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{ReleaseCooldown: 90 * time.Second})
	ed := b.editor(t, "alice", "news")
	id := b.insertOne(t, "news", 0)

	claims, refused := 0, 0
	for range 20 {
		row := b.task(t, id)
		c, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: row.Fence, Status: tasks.StatusPending, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
		if errors.Is(err, tasks.ErrSkipped) {
			refused++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		claims++
		if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Reason: "again"}); err != nil {
			t.Fatal(err)
		}
	}
	if claims != 1 || refused != 19 {
		t.Fatalf("%d claims and %d refusals in 20 tries, want 1 claim and 19 refused", claims, refused)
	}
	if n := len(b.events(t, id)); n != 2 {
		t.Errorf("%d events, want 2 (claimed, released)", n)
	}
	// Kept for the configured cooldown, by the database clock.
	if n := b.count(t, "SELECT COUNT(*) FROM task_skips WHERE task_id = ? AND editor_id = ? AND `until` BETWEEN NOW(3) + INTERVAL 80 SECOND AND NOW(3) + INTERVAL 90 SECOND", id, ed.ID); n != 1 {
		t.Errorf("%d records keep the task from the editor for 80..90 s, want 1", n)
	}
	// Once the cooldown passed, the editor may claim it again.
	b.exec(t, "UPDATE task_skips SET `until` = NOW(3) - INTERVAL 1 SECOND WHERE task_id = ?", id)
	if c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute); c.Fence != 2 {
		t.Errorf("fence after the cooldown = %d, want 2", c.Fence)
	}

	// A worker's release keeps nothing from anyone.
	wid := b.insertOne(t, "jobs", 0)
	wc := b.claim(t, wid, "w1", 0, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: wid, Fence: wc.Fence, Holder: "w1"}); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_skips WHERE task_id = ?`, wid); n != 0 {
		t.Errorf("%d skip records after a worker's release, want 0", n)
	}
	if c := b.claim(t, wid, "w1", 0, time.Minute); c.Fence != wc.Fence+1 {
		t.Errorf("worker's reclaim fence %d, want %d", c.Fence, wc.Fence+1)
	}
}

func TestFailRetriesThenDies(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insert(t, tasks.NewTask{Category: "jobs", Title: "t", MaxAttempts: 2})[0]

	c := b.claim(t, id, "w1", 0, time.Minute)
	before := b.now(t)
	ended, err := b.store.Fail(b.ctx, tasks.FailParams{TaskID: id, Fence: c.Fence, Holder: "w1", Err: "first " + strings.Repeat("x", 10000), Backoff: time.Hour})
	if err != nil || ended.Status != tasks.StatusPending {
		t.Fatalf("first fail = %+v, %v; want pending", ended, err)
	}
	if ended.TaskID != id || ended.Category != "jobs" || !ended.AssignedAt.Equal(c.AssignedAt) || ended.EndedAt.Before(c.AssignedAt) {
		t.Errorf("first fail ended %+v, want the claim of task %d assigned at %v", ended, id, c.AssignedAt)
	}
	got := b.task(t, id)
	if got.Status != tasks.StatusPending || got.Attempts != 1 || got.Holder != "" || !strings.HasPrefix(got.LastError, "first ") ||
		len([]rune(got.LastError)) != 8192 {
		t.Errorf("after first fail: %+v (last_error %d characters)", got, len([]rune(got.LastError)))
	}
	if got.RunAfter.Before(before.Add(time.Hour)) || got.RunAfter.After(before.Add(time.Hour+time.Minute)) {
		t.Errorf("run_after = %v, want about %v", got.RunAfter, before.Add(time.Hour))
	}
	if ids := b.candidates(t, tasks.CandidatesParams{Categories: []string{"jobs"}}); len(ids) != 0 {
		t.Errorf("candidates during backoff = %v, want none", ids)
	}
	_, err = b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: c.Fence, Holder: "w2", Lease: time.Minute})
	wantErr(t, "claim during backoff", err, tasks.ErrStale)

	b.exec(t, `UPDATE tasks SET run_after = NOW(3) - INTERVAL 1 SECOND WHERE id = ?`, id)
	c2 := b.claim(t, id, "w2", 0, time.Minute)
	ended, err = b.store.Fail(b.ctx, tasks.FailParams{TaskID: id, Fence: c2.Fence, Holder: "w2", Err: "second"})
	if err != nil || ended.Status != tasks.StatusDead {
		t.Fatalf("second fail = %+v, %v; want dead", ended, err)
	}
	got = b.task(t, id)
	if got.Status != tasks.StatusDead || got.Attempts != 2 || got.LastError != "second" || got.DoneAt == nil ||
		got.EditorID != 0 || got.Holder != "w2" {
		t.Errorf("after second fail: %+v", got)
	}
	if k := kinds(b.events(t, id)); len(k) != 4 || k[1] != tasks.EventFailed || k[3] != tasks.EventDead {
		t.Errorf("events = %v, want claimed, failed, claimed, dead", k)
	}
	if ids := b.candidates(t, tasks.CandidatesParams{Categories: []string{"jobs"}}); len(ids) != 0 {
		t.Errorf("dead task offered: %v", ids)
	}
	_, err = b.store.Fail(b.ctx, tasks.FailParams{TaskID: id, Fence: c2.Fence, Holder: "w2", Backoff: -time.Second})
	wantErr(t, "negative backoff", err, tasks.ErrInvalid)
}

func TestFailDeadSkipsRetries(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insert(t, tasks.NewTask{Category: "jobs", Title: "t", MaxAttempts: 5})[0]
	c := b.claim(t, id, "w1", 0, time.Minute)
	ended, err := b.store.Fail(b.ctx, tasks.FailParams{TaskID: id, Fence: c.Fence, Holder: "w1", Err: "bad input", Dead: true})
	if err != nil || ended.Status != tasks.StatusDead {
		t.Fatalf("fail dead = %+v, %v; want dead", ended, err)
	}
	if got := b.task(t, id); got.Status != tasks.StatusDead || got.Attempts != 1 {
		t.Errorf("after a dead fail with 4 attempts left: %+v", got)
	}
	if k := kinds(b.events(t, id)); len(k) != 2 || k[1] != tasks.EventDead {
		t.Errorf("events = %v, want claimed, dead", k)
	}
}

func TestEndedClaimCarriesTheClaimsTraceContext(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ids := b.insert(t, tasks.NewTask{Category: "news", Title: "a"}, tasks.NewTask{Category: "news", Title: "b"})
	for i, id := range ids {
		c, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: 0, Holder: "w1", Lease: time.Minute, TraceContext: traceparent})
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		var ended *tasks.Ended
		if i == 0 {
			ended, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: "w1", Result: rawJSON(`1`)})
		} else {
			ended, err = b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: "w1"})
		}
		if err != nil {
			t.Fatalf("end claim %d: %v", i, err)
		}
		want := []tasks.Status{tasks.StatusDone, tasks.StatusPending}[i]
		if ended.TraceContext != traceparent || ended.Status != want || ended.Category != "news" || !ended.AssignedAt.Equal(c.AssignedAt) {
			t.Errorf("ended claim %d = %+v, want status %s, the claim's trace context and assignment time", i, ended, want)
		}
	}
}

func TestForceReleaseBumpsFence(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)

	ended, err := b.store.ForceRelease(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ended.Holder != ed.Holder() || ended.Category != "news" || ended.Status != tasks.StatusPending || !ended.AssignedAt.Equal(c.AssignedAt) {
		t.Errorf("revoked claim = %+v, want alice's claim of a news task, assigned at %v", ended, c.AssignedAt)
	}
	got := b.task(t, id)
	if got.Status != tasks.StatusPending || got.Fence != c.Fence+1 || got.EditorID != 0 || got.Holder != "" {
		t.Errorf("after force release: %+v, want pending at fence %d", got, c.Fence+1)
	}
	evs := b.events(t, id)
	if len(evs) != 2 || evs[1].Kind != tasks.EventReleased || evs[1].Detail != "forced" || evs[1].Fence != c.Fence || evs[1].Holder != ed.Holder() {
		t.Errorf("events = %+v, want a forced release of fence %d", evs, c.Fence)
	}
	before := b.snapshot(t, id)
	_, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(`{}`)})
	wantErr(t, "submit after force release", err, tasks.ErrStale)
	_, err = b.store.ForceRelease(b.ctx, id)
	wantErr(t, "force release of a pending task", err, tasks.ErrStale)
	_, err = b.store.ForceRelease(b.ctx, id+1000)
	wantErr(t, "force release of an unknown task", err, tasks.ErrNotFound)
	b.unchanged(t, id, before)

	// The editor is free again, and the next claim gets fence+2.
	if c2 := b.claim(t, id, ed.Holder(), ed.ID, time.Minute); c2.Fence != c.Fence+2 {
		t.Errorf("next fence = %d, want %d", c2.Fence, c.Fence+2)
	}
}
