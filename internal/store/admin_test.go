package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// dead makes a task dead the way a worker does: a claim, then a failure with no
// attempts left.
func (b *bundle) dead(t *testing.T, id int64, holder string) *tasks.Claim {
	t.Helper()
	c := b.claim(t, id, holder, 0, time.Minute)
	if _, err := b.store.Fail(b.ctx, tasks.FailParams{TaskID: id, Fence: c.Fence, Holder: holder, Err: "boom", Dead: true}); err != nil {
		t.Fatalf("fail task %d: %v", id, err)
	}
	return c
}

// wantStatusErr fails the test unless err is a *StatusError naming the task's status.
func wantStatusErr(t *testing.T, what string, err error, id int64, status, want tasks.Status) {
	t.Helper()
	var se *tasks.StatusError
	if !errors.As(err, &se) || !errors.Is(err, tasks.ErrWrongStatus) {
		t.Fatalf("%s: error = %v, want a StatusError", what, err)
	}
	if se.TaskID != id || se.Status != status || se.Want != want {
		t.Errorf("%s: %+v, want task %d %s, not %s", what, se, id, status, want)
	}
	if !strings.Contains(err.Error(), string(status)) {
		t.Errorf("%s: message %q does not name the status %s", what, err, status)
	}
}

func TestRequeueDeadTask(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "jobs", 3)
	c := b.dead(t, id, "w1")
	before := b.now(t)

	got, err := b.store.Requeue(b.ctx, tasks.ChangeParams{TaskID: id, Reason: "fixed the parser"})
	if err != nil {
		t.Fatalf("requeue: %v", err)
	}
	if got.TaskID != id || got.Category != "jobs" || got.Fence != c.Fence {
		t.Errorf("requeue = %+v, want task %d of jobs at fence %d", got, id, c.Fence)
	}
	task := b.task(t, id)
	if task.Status != tasks.StatusPending || task.Attempts != 0 || task.Holder != "" || task.EditorID != 0 ||
		task.AssignedAt != nil || task.LeaseExpiresAt != nil || task.DoneAt != nil || task.Fence != c.Fence {
		t.Errorf("after requeue: %+v", task)
	}
	if task.LastError != "boom" {
		t.Errorf("last_error = %q, want the last failure kept", task.LastError)
	}
	if task.RunAfter.Before(before.Add(-time.Second)) || task.RunAfter.After(b.now(t)) {
		t.Errorf("run_after = %v, want about %v", task.RunAfter, before)
	}
	evs := b.events(t, id)
	last := evs[len(evs)-1]
	if last.Kind != tasks.EventRequeued || last.Fence != c.Fence || last.Holder != "w1" || last.Detail != "fixed the parser" {
		t.Errorf("last event = %+v, want requeued at fence %d of w1 with the reason", last, c.Fence)
	}
	if ids := b.candidates(t, tasks.CandidatesParams{Categories: []string{"jobs"}}); !equalIDs(ids, []int64{id}) {
		t.Errorf("candidates after requeue = %v, want [%d]", ids, id)
	}
	c2 := b.claim(t, id, "w2", 0, time.Minute)
	if c2.Fence != c.Fence+1 || c2.Task.Attempts != 1 {
		t.Errorf("claim after requeue: fence %d attempts %d, want %d and 1", c2.Fence, c2.Task.Attempts, c.Fence+1)
	}
}

func TestRequeueRefusesTasksThatAreNotDead(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	pending := b.insertOne(t, "jobs", 0)
	assigned := b.insertOne(t, "jobs", 0)
	b.claim(t, assigned, "w1", 0, time.Minute)
	for _, c := range []struct {
		id     int64
		status tasks.Status
	}{{pending, tasks.StatusPending}, {assigned, tasks.StatusAssigned}} {
		before := b.snapshot(t, c.id)
		_, err := b.store.Requeue(b.ctx, tasks.ChangeParams{TaskID: c.id})
		wantStatusErr(t, "requeue "+string(c.status), err, c.id, c.status, tasks.StatusDead)
		b.unchanged(t, c.id, before)
	}
	_, err := b.store.Requeue(b.ctx, tasks.ChangeParams{TaskID: assigned + 1000})
	wantErr(t, "requeue unknown", err, tasks.ErrNotFound)
	_, err = b.store.Requeue(b.ctx, tasks.ChangeParams{TaskID: 0})
	wantErr(t, "requeue id 0", err, tasks.ErrInvalid)
}

func TestCancelPendingTask(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "jobs", 0)
	other := b.insertOne(t, "jobs", 0)
	cands, err := b.store.Candidates(b.ctx, tasks.CandidatesParams{Categories: []string{"jobs"}})
	if err != nil || len(cands) != 2 {
		t.Fatalf("candidates = %v, %v", cands, err)
	}

	got, err := b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: id, Reason: "duplicate article"})
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if got.TaskID != id || got.Category != "jobs" {
		t.Errorf("cancel = %+v", got)
	}
	task := b.task(t, id)
	if task.Status != tasks.StatusCancelled || task.DoneAt == nil || task.Holder != "" {
		t.Errorf("after cancel: %+v", task)
	}
	if k := kinds(b.events(t, id)); !slices.Equal(k, []tasks.EventKind{tasks.EventCancelled}) {
		t.Errorf("events = %v, want [cancelled]", k)
	}
	// Never handed out: not a candidate, and a claim from a candidate read before
	// the cancel is refused by the store.
	if ids := b.candidates(t, tasks.CandidatesParams{Categories: []string{"jobs"}}); !equalIDs(ids, []int64{other}) {
		t.Errorf("candidates after cancel = %v, want [%d]", ids, other)
	}
	for _, status := range []tasks.Status{tasks.StatusPending, tasks.StatusAssigned} {
		_, err = b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: cands[0].Fence, Status: status, Holder: "w1", Lease: time.Minute})
		wantErr(t, "claim a cancelled task via "+string(status), err, tasks.ErrStale)
	}
	if b.task(t, id).Status != tasks.StatusCancelled {
		t.Fatal("a claim changed a cancelled task")
	}

	// Final: a second cancel and a requeue are refused.
	before := b.snapshot(t, id)
	_, err = b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: id})
	wantStatusErr(t, "cancel again", err, id, tasks.StatusCancelled, "pending or assigned")
	_, err = b.store.Requeue(b.ctx, tasks.ChangeParams{TaskID: id})
	wantStatusErr(t, "requeue cancelled", err, id, tasks.StatusCancelled, tasks.StatusDead)
	b.unchanged(t, id, before)

	st, err := b.store.PoolStats(b.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ByStatus) != len(tasks.Statuses()) || st.ByStatus[tasks.StatusCancelled] != 1 || st.ByStatus[tasks.StatusPending] != 1 {
		t.Errorf("stats by status = %v, want every status, 1 cancelled and 1 pending", st.ByStatus)
	}
}

func TestCancelEndsAnEditorsClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "jobs")
	id := b.insertOne(t, "jobs", 0)
	next := b.insertOne(t, "jobs", 0)
	c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)

	got, err := b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: id, Reason: "withdrawn", By: "admin"})
	if err != nil {
		t.Fatalf("cancel an assigned task: %v", err)
	}
	if got.TaskID != id || got.Category != "jobs" || got.Fence != c.Fence || got.Holder != ed.Holder() {
		t.Errorf("cancel = %+v, want task %d of jobs, the claim's fence %d and holder %s", got, id, c.Fence, ed.Holder())
	}
	task := b.task(t, id)
	if task.Status != tasks.StatusCancelled || task.DoneAt == nil || task.Fence != c.Fence || task.Holder != ed.Holder() ||
		task.EditorID != 0 || task.LeaseExpiresAt != nil {
		t.Errorf("after cancel: %+v, want cancelled at fence %d, the holder kept, no editor and no lease", task, c.Fence)
	}
	evs := b.events(t, id)
	last := evs[len(evs)-1]
	if k := kinds(evs); !slices.Equal(k, []tasks.EventKind{tasks.EventClaimed, tasks.EventCancelled}) {
		t.Errorf("events = %v, want [claimed cancelled]", k)
	}
	if last.Fence != c.Fence || last.Holder != ed.Holder() || last.EditorID != ed.ID || last.Detail != "by admin: withdrawn" {
		t.Errorf("cancelled event = %+v, want fence %d, holder %s, editor %d, detail %q", last, c.Fence, ed.Holder(), ed.ID, "by admin: withdrawn")
	}

	// Whatever the holder sends about the claim is refused, saying why, and
	// changes nothing.
	before := b.snapshot(t, id)
	_, err = b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Lease: time.Minute})
	wantCancelled(t, "heartbeat", err)
	_, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(`{}`)})
	wantCancelled(t, "submit", err)
	_, err = b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder()})
	wantCancelled(t, "release", err)
	_, err = b.store.SubmitAndClaim(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(`{}`)},
		tasks.ClaimParams{TaskID: next, Fence: 0, Status: tasks.StatusPending, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
	wantCancelled(t, "submit and claim", err)
	// Another holder, or another fence, is stale without more.
	_, err = b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: "w9", Lease: time.Minute})
	wantStale(t, "heartbeat of another holder", err)
	_, err = b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence - 1, Holder: ed.Holder(), Lease: time.Minute})
	wantStale(t, "heartbeat of another fence", err)
	b.unchanged(t, id, before)

	// The editor is free to claim the next task; nothing claims the cancelled one.
	if ids := b.candidates(t, tasks.CandidatesParams{Categories: []string{"jobs"}}); !equalIDs(ids, []int64{next}) {
		t.Errorf("candidates after cancel = %v, want [%d]", ids, next)
	}
	b.claim(t, next, ed.Holder(), ed.ID, time.Minute)
	for _, status := range []tasks.Status{tasks.StatusPending, tasks.StatusAssigned} {
		_, err = b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: c.Fence, Status: status, Holder: "w1", Lease: time.Minute})
		wantErr(t, "claim a cancelled task via "+string(status), err, tasks.ErrStale)
	}

	// A cancel of a task that has ended changes nothing.
	_, err = b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: id, By: "admin"})
	wantStatusErr(t, "cancel a cancelled task", err, id, tasks.StatusCancelled, "pending or assigned")
	b.unchanged(t, id, before)
	_, err = b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: id + 1000})
	wantErr(t, "cancel unknown", err, tasks.ErrNotFound)
}

func TestCancelEndsAWorkersClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ids := b.insert(t, tasks.NewTask{Category: "jobs", Title: "a"}, tasks.NewTask{Category: "jobs", Title: "b"})
	// A worker's batch claim, made without its 'claimed' event.
	cs := b.workerClaim(t, b.ctx, "", "worker:w:0", ids...)
	if _, err := b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: ids[0], By: "engine"}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	evs := b.events(t, ids[0])
	if k := kinds(evs); !slices.Equal(k, []tasks.EventKind{tasks.EventClaimed, tasks.EventCancelled}) {
		t.Fatalf("events = %v, want the claim's event written first, then cancelled", k)
	}
	if e := evs[1]; e.Fence != cs[0].Fence || e.Holder != "worker:w:0" || e.Detail != "by engine" {
		t.Errorf("cancelled event = %+v, want fence %d of worker:w:0, detail %q", e, cs[0].Fence, "by engine")
	}
	// The renewal of both: the cancelled one is refused as cancelled, the other
	// renewed.
	res, err := b.store.HeartbeatBatch(b.ctx, []tasks.HeartbeatParams{
		{TaskID: ids[0], Fence: cs[0].Fence, Holder: "worker:w:0", Lease: time.Minute},
		{TaskID: ids[1], Fence: cs[1].Fence, Holder: "worker:w:0", Lease: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCancelled(t, "renewal of the cancelled claim", res[0].Err)
	if res[1].Err != nil {
		t.Errorf("renewal of the live claim: %v", res[1].Err)
	}
	// Its completion is refused; the task stays cancelled, without a result.
	out, err := b.store.Complete(b.ctx, []tasks.Outcome{{TaskID: ids[0], Fence: cs[0].Fence, Holder: "worker:w:0", Result: rawJSON(`1`)}})
	if err != nil {
		t.Fatal(err)
	}
	wantCancelled(t, "completion of the cancelled claim", out[0].Err)
	more := b.insertOne(t, "jobs", 0)
	done, _, err := b.store.CompleteAndClaim(b.ctx, []tasks.Outcome{{TaskID: ids[0], Fence: cs[0].Fence, Holder: "worker:w:0", Result: rawJSON(`1`)}},
		b.claimParams(t, more))
	if err != nil {
		t.Fatal(err)
	}
	wantCancelled(t, "completion of the cancelled claim with a claim", done[0].Err)
	if task := b.task(t, ids[0]); task.Status != tasks.StatusCancelled {
		t.Errorf("after a refused completion: %s, want cancelled", task.Status)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_results WHERE task_id = ?`, ids[0]); n != 0 {
		t.Errorf("%d results of the cancelled task", n)
	}
}

func TestCancelAfterAReleaseIsNotTheHoldersCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "jobs", 0)
	c := b.claim(t, id, "w1", 0, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: "w1"}); err != nil {
		t.Fatal(err)
	}
	got, err := b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder != "" {
		t.Errorf("cancel of a pending task names holder %q", got.Holder)
	}
	// The claim ended with the release: its holder is told stale, not cancelled.
	_, err = b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: "w1", Lease: time.Minute})
	wantStale(t, "heartbeat after release and cancel", err)
}

// wantCancelled fails the test unless err says a cancel ended the claim: it
// wraps ErrCancelled, and ErrStale for callers that know only that.
func wantCancelled(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, tasks.ErrCancelled) || !errors.Is(err, tasks.ErrStale) {
		t.Errorf("%s: error = %v, want one wrapping ErrCancelled and ErrStale", what, err)
	}
}

// wantStale fails the test unless err is a stale refusal that is not a cancel's.
func wantStale(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, tasks.ErrStale) || errors.Is(err, tasks.ErrCancelled) {
		t.Errorf("%s: error = %v, want ErrStale alone", what, err)
	}
}

func TestRequeueMatchingByCategoryIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	nts := make([]tasks.NewTask, 1300)
	for i := range nts {
		cat := "a"
		if i%13 == 0 {
			cat = "b" // 100 in b
		}
		nts[i] = tasks.NewTask{Category: cat, Priority: i % 3, Title: "t"}
	}
	ids := b.insert(t, nts...)
	b.exec(t, `UPDATE tasks SET status = 'dead', fence = 1, holder = 'w', done_at = NOW(3), attempts = 5`)
	live := ids[1] // a pending task of a: not dead, not matched
	b.exec(t, `UPDATE tasks SET status = 'pending', holder = NULL, done_at = NULL WHERE id = ?`, live)

	_, err := b.store.RequeueMatching(b.ctx, tasks.BulkParams{})
	wantErr(t, "empty filter", err, tasks.ErrInvalid)
	_, err = b.store.RequeueMatching(b.ctx, tasks.BulkParams{Category: "a", Limit: tasks.BulkLimitMax + 1})
	wantErr(t, "limit too large", err, tasks.ErrInvalid)
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'pending'`); n != 1 {
		t.Fatalf("refused calls changed tasks: %d pending", n)
	}

	// 1199 dead tasks in a: the default limit of 1000, then the rest.
	res, err := b.store.RequeueMatching(b.ctx, tasks.BulkParams{Category: "a", Reason: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 1000 || res.Changed != 1000 || !res.More || res.ByCategory["a"] != 1000 {
		t.Errorf("first call = %+v, want 1000 matched and changed, more", res)
	}
	res, err = b.store.RequeueMatching(b.ctx, tasks.BulkParams{Category: "a", Reason: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 199 || res.Changed != 199 || res.More {
		t.Errorf("second call = %+v, want 199 matched and changed, no more", res)
	}
	res, err = b.store.RequeueMatching(b.ctx, tasks.BulkParams{Category: "a"})
	if err != nil || res.Matched != 0 || res.More {
		t.Errorf("third call = %+v, %v, want nothing", res, err)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE category = 'a' AND status = 'pending' AND attempts = 0 AND holder IS NULL`); n != 1199 {
		t.Errorf("%d tasks of a requeued, want 1199", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE category = 'b' AND status = 'dead'`); n != 100 {
		t.Errorf("%d tasks of b still dead, want 100", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'requeued' AND fence = 1 AND holder = 'w'`); n != 1199 {
		t.Errorf("%d requeued events, want 1199", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE task_id = ?`, live); n != 0 {
		t.Errorf("the task that was not dead has %d events", n)
	}
}

func TestCancelMatchingByIDsAndCreatedBefore(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ids := b.insert(t,
		tasks.NewTask{Category: "a", Title: "old"},
		tasks.NewTask{Category: "a", Title: "old, claimed"},
		tasks.NewTask{Category: "b", Title: "old, other category"},
		tasks.NewTask{Category: "a", Title: "new"},
	)
	b.exec(t, `UPDATE tasks SET created_at = NOW(3) - INTERVAL 2 DAY WHERE id IN (?, ?, ?)`, ids[0], ids[1], ids[2])
	b.claim(t, ids[1], "w1", 0, time.Minute)
	cutoff := b.now(t).Add(-24 * time.Hour)

	// ids and category: the one of b does not match; the claimed one does.
	res, err := b.store.CancelMatching(b.ctx, tasks.BulkParams{IDs: []int64{ids[1], ids[0], ids[2], ids[0], 99999}, Category: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 2 || res.Changed != 2 || res.Running != 1 || res.More {
		t.Errorf("by ids and category = %+v, want 2 matched and changed, 1 of them running", res)
	}
	for _, id := range ids[:2] {
		if s := b.task(t, id).Status; s != tasks.StatusCancelled {
			t.Errorf("task %d is %s, want cancelled", id, s)
		}
	}
	// created_before by category: only old tasks; the new one stays pending.
	b.exec(t, `UPDATE tasks SET category = 'a' WHERE id = ?`, ids[2])
	res, err = b.store.CancelMatching(b.ctx, tasks.BulkParams{Category: "a", CreatedBefore: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 1 || res.Changed != 1 || res.Running != 0 {
		t.Errorf("created before = %+v, want 1 matched and changed, none running", res)
	}
	want := map[int64]tasks.Status{ids[0]: tasks.StatusCancelled, ids[1]: tasks.StatusCancelled, ids[2]: tasks.StatusCancelled, ids[3]: tasks.StatusPending}
	for id, status := range want {
		if got := b.task(t, id).Status; got != status {
			t.Errorf("task %d is %s, want %s", id, got, status)
		}
	}
	// ids with a limit: one per call, more while some are left.
	more := b.insert(t, tasks.NewTask{Category: "c", Title: "x"}, tasks.NewTask{Category: "c", Title: "y"})
	res, err = b.store.CancelMatching(b.ctx, tasks.BulkParams{IDs: more, Limit: 1})
	if err != nil || res.Matched != 1 || res.Changed != 1 || !res.More {
		t.Errorf("ids, limit 1 = %+v, %v, want 1 and more", res, err)
	}
	res, err = b.store.CancelMatching(b.ctx, tasks.BulkParams{IDs: more, Limit: 1})
	if err != nil || res.Matched != 1 || res.Changed != 1 || res.More {
		t.Errorf("ids, limit 1 again = %+v, %v, want 1 and no more", res, err)
	}
	_, err = b.store.CancelMatching(b.ctx, tasks.BulkParams{IDs: make([]int64, tasks.BulkLimitMax+1)})
	wantErr(t, "too many ids", err, tasks.ErrInvalid)
	_, err = b.store.CancelMatching(b.ctx, tasks.BulkParams{IDs: []int64{0}})
	wantErr(t, "id 0", err, tasks.ErrInvalid)
	_, err = b.store.CancelMatching(b.ctx, tasks.BulkParams{Category: " a"})
	wantErr(t, "bad category", err, tasks.ErrInvalid)
	for _, bad := range []time.Time{time.Date(999, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		_, err = b.store.CancelMatching(b.ctx, tasks.BulkParams{Category: "a", CreatedBefore: bad})
		wantErr(t, "created before "+bad.String(), err, tasks.ErrInvalid)
	}
	// The bounds of the column's range, and a time between two milliseconds: a task
	// created at t.000 was created before t.0005.
	last := b.insert(t, tasks.NewTask{Category: "d", Title: "x"})[0]
	created := b.task(t, last).CreatedAt
	b.exec(t, `UPDATE tasks SET status = 'dead' WHERE id = ?`, last)
	for _, c := range []struct {
		before time.Time
		want   int
	}{
		{time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{created, 0},
		{created.Add(500 * time.Microsecond), 1},
		{time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC), 1},
	} {
		res, err := b.store.RequeueMatching(b.ctx, tasks.BulkParams{Category: "d", CreatedBefore: c.before})
		if err != nil {
			t.Fatalf("created before %v: %v", c.before, err)
		}
		b.exec(t, `UPDATE tasks SET status = 'dead' WHERE id = ?`, last)
		if res.Matched != c.want {
			t.Errorf("created before %v (created at %v): matched %d, want %d", c.before, created, res.Matched, c.want)
		}
	}
}

// TestCancelMatchingEndsClaims cancels by filter a category with a pending task, an
// editor's claim and a worker's claim made without its 'claimed' event: the three
// end cancelled, each claim as Cancel ends one, and the result tells them apart.
func TestCancelMatchingEndsClaims(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "jobs")
	ids := b.insert(t,
		tasks.NewTask{Category: "jobs", Title: "editor's"},
		tasks.NewTask{Category: "jobs", Title: "worker's"},
		tasks.NewTask{Category: "jobs", Title: "pending"},
		tasks.NewTask{Category: "other", Title: "worker's, other category"},
	)
	ec := b.claim(t, ids[0], ed.Holder(), ed.ID, time.Minute)
	wc := b.workerClaim(t, b.ctx, "", "worker:w:0", ids[1], ids[3])

	dry, err := b.store.CancelMatching(b.ctx, tasks.BulkParams{Category: "jobs", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Matched != 3 || dry.Running != 2 || dry.Changed != 0 || !slices.Equal(dry.IDs, []int64{ids[2], ids[0], ids[1]}) {
		t.Errorf("dry run = %+v, want the pending task, then the 2 running ones", dry)
	}
	// A status selects one of the two.
	for _, c := range []struct {
		status           tasks.Status
		matched, running int
	}{{tasks.StatusPending, 1, 0}, {tasks.StatusAssigned, 2, 2}} {
		dry, err := b.store.CancelMatching(b.ctx, tasks.BulkParams{Category: "jobs", Status: c.status, DryRun: true})
		if err != nil || dry.Matched != c.matched || dry.Running != c.running {
			t.Errorf("dry run of the %s tasks = %+v, %v; want %d matched, %d running", c.status, dry, err, c.matched, c.running)
		}
	}
	_, err = b.store.CancelMatching(b.ctx, tasks.BulkParams{Category: "jobs", Status: tasks.StatusDead})
	wantErr(t, "cancel of dead tasks", err, tasks.ErrInvalid)
	_, err = b.store.RequeueMatching(b.ctx, tasks.BulkParams{Category: "jobs", Status: tasks.StatusPending})
	wantErr(t, "requeue of pending tasks", err, tasks.ErrInvalid)

	res, err := b.store.CancelMatching(b.ctx, tasks.BulkParams{Category: "jobs", Reason: "withdrawn"})
	if err != nil {
		t.Fatal(err)
	}
	wantClaims := []tasks.Changed{
		{TaskID: ids[0], Category: "jobs", Fence: ec.Fence, Holder: ed.Holder()},
		{TaskID: ids[1], Category: "jobs", Fence: wc[0].Fence, Holder: "worker:w:0"},
	}
	if res.Matched != 3 || res.Changed != 3 || res.Running != 2 || res.More || !slices.Equal(res.Claims, wantClaims) {
		t.Errorf("cancel = %+v, want 3 cancelled, 2 running with claims %+v", res, wantClaims)
	}
	for i, id := range ids {
		want := tasks.StatusCancelled
		if i == 3 {
			want = tasks.StatusAssigned
		}
		if task := b.task(t, id); task.Status != want || want == tasks.StatusCancelled && (task.EditorID != 0 || task.LeaseExpiresAt != nil) {
			t.Errorf("task %d: %+v, want %s, no editor and no lease", id, task, want)
		}
	}
	// Each claim's events as Cancel writes them: the worker's 'claimed' event
	// first, then 'cancelled' with the claim's fence, holder and editor.
	for _, c := range []struct {
		id, fence, editor int64
		holder            string
	}{{ids[0], ec.Fence, ed.ID, ed.Holder()}, {ids[1], wc[0].Fence, 0, "worker:w:0"}} {
		evs := b.events(t, c.id)
		if k := kinds(evs); !slices.Equal(k, []tasks.EventKind{tasks.EventClaimed, tasks.EventCancelled}) {
			t.Errorf("task %d: events = %v, want [claimed cancelled]", c.id, k)
			continue
		}
		if e := evs[1]; e.Fence != c.fence || e.Holder != c.holder || e.EditorID != c.editor || e.Detail != "withdrawn" {
			t.Errorf("task %d: cancelled event = %+v, want fence %d, holder %s, editor %d", c.id, e, c.fence, c.holder, c.editor)
		}
	}
	// The holders' writes are refused as cancelled; the worker's other claim
	// is renewed; the editor may claim again.
	_, err = b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: ids[0], Fence: ec.Fence, Holder: ed.Holder(), Lease: time.Minute})
	wantCancelled(t, "the editor's heartbeat", err)
	hb, err := b.store.HeartbeatBatch(b.ctx, []tasks.HeartbeatParams{
		{TaskID: ids[1], Fence: wc[0].Fence, Holder: "worker:w:0", Lease: time.Minute},
		{TaskID: ids[3], Fence: wc[1].Fence, Holder: "worker:w:0", Lease: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCancelled(t, "the worker's renewal", hb[0].Err)
	if hb[1].Err != nil {
		t.Errorf("renewal of the claim of the other category: %v", hb[1].Err)
	}
	next := b.insertOne(t, "jobs", 0)
	b.claim(t, next, ed.Holder(), ed.ID, time.Minute)

	// By ids with a limit: the pending one first, then the running ones.
	more := b.insert(t, tasks.NewTask{Category: "c", Title: "x"}, tasks.NewTask{Category: "c", Title: "y"})
	b.workerClaim(t, b.ctx, "", "worker:w:1", more[0])
	res, err = b.store.CancelMatching(b.ctx, tasks.BulkParams{IDs: more, Limit: 1})
	if err != nil || res.Changed != 1 || res.Running != 0 || !res.More || b.task(t, more[1]).Status != tasks.StatusCancelled {
		t.Errorf("ids, limit 1 = %+v, %v, want the pending one and more", res, err)
	}
	res, err = b.store.CancelMatching(b.ctx, tasks.BulkParams{IDs: more, Limit: 1})
	if err != nil || res.Changed != 1 || res.Running != 1 || res.More || b.task(t, more[0]).Status != tasks.StatusCancelled {
		t.Errorf("ids, limit 1 again = %+v, %v, want the running one and no more", res, err)
	}
}

// TestCancelMatchingRacesClaims cancels a category while workers claim from it: every
// task ends cancelled, whether a claim took it first or not, and the counts add up.
func TestCancelMatchingRacesClaims(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	nts := make([]tasks.NewTask, 300)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "race", Title: "t"}
	}
	b.insert(t, nts...)
	cands, err := b.store.Candidates(b.ctx, tasks.CandidatesParams{Categories: []string{"race"}, Limit: 300})
	if err != nil || len(cands) != 300 {
		t.Fatalf("candidates: %d, %v", len(cands), err)
	}
	claimed := make(chan int, 4)
	for w := range 4 {
		go func() {
			n := 0
			for i := w; i < len(cands); i += 4 {
				c := cands[i]
				_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: c.ID, Fence: c.Fence, Status: c.Status, Holder: fmt.Sprintf("w%d", w), Lease: time.Minute})
				if err == nil {
					n++
				} else if !errors.Is(err, tasks.ErrStale) {
					t.Errorf("claim: %v", err)
				}
			}
			claimed <- n
		}()
	}
	res, err := b.store.CancelMatching(b.ctx, tasks.BulkParams{Category: "race"})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for range 4 {
		total += <-claimed
	}
	// Every task was pending or claimed when its batch came: the pending ones
	// first, then the claimed ones, so every task ends cancelled, each claim
	// with it, and a claim that lost to the cancel took nothing.
	cancelled := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'cancelled'`)
	if cancelled != 300 || res.Changed != 300 || res.Running != total || len(res.Claims) != total {
		t.Errorf("cancelled %d (reported %+v), claimed %d: want all 300 cancelled, %d of them running", cancelled, res, total, total)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks t WHERE status = 'cancelled' AND holder IS NOT NULL
AND EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = t.id AND e.kind = 'claimed' AND e.fence = t.fence AND e.holder = t.holder)`); n != total {
		t.Errorf("%d cancelled tasks keep the claim they ended, want %d", n, total)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'cancelled'`); n != cancelled {
		t.Errorf("%d cancelled events for %d cancelled tasks", n, cancelled)
	}
}

// TestBulkQueryPlans checks that the bulk reads use the candidate index in index
// order (no filesort) and the primary key.
func TestBulkQueryPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	nts := make([]tasks.NewTask, 5000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: fmt.Sprintf("c%d", i%10), Priority: i % 5, Title: "t"}
	}
	b.insert(t, nts...)
	b.exec(t, `UPDATE tasks SET status = 'dead', done_at = NOW(3) WHERE id % 10 < 3`)
	b.exec(t, `ANALYZE TABLE tasks`)
	for _, c := range []struct {
		name string
		p    tasks.BulkParams
		ids  []int64
		key  string
	}{
		{"by category", tasks.BulkParams{Category: "c1"}, nil, "tasks_candidate"},
		{"by category, created before", tasks.BulkParams{Category: "c1", CreatedBefore: time.Now()}, nil, "tasks_candidate"},
		{"by ids", tasks.BulkParams{Category: "c1"}, []int64{1, 11, 21, 31}, "PRIMARY"},
	} {
		for _, after := range []bool{false, true} {
			q, args, err := store.BulkQuery(tasks.StatusDead, c.p, c.ids, after, 500)
			if err != nil {
				t.Fatal(err)
			}
			plan := b.explain(t, q, args...)
			t.Logf("%s (cursor %v):\n%s\n%s", c.name, after, q, formatPlan(plan))
			noFullScans(t, c.name, plan)
			if len(plan) != 1 || plan[0].Key != c.key || strings.Contains(plan[0].Extra, "filesort") {
				t.Errorf("%s: want one read of %s in index order:\n%s", c.name, c.key, formatPlan(plan))
			}
		}
	}
}
