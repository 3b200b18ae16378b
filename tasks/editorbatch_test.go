package tasks_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

// editorClaim is the batch claim params of pending task id for editor e.
func (b *bundle) editorClaim(t *testing.T, id int64, e *tasks.Editor) tasks.ClaimParams {
	t.Helper()
	task := b.task(t, id)
	return tasks.ClaimParams{
		TaskID: id, Fence: task.Fence, Status: task.Status,
		Holder: e.Holder(), EditorID: e.ID, Lease: time.Minute, TraceContext: "trace-" + e.Name,
	}
}

// One batch, one member of each kind: each claimed or refused on its own,
// for its own reason, in one round trip and one commit, and the refused
// change nothing.
func TestClaimEditorBatch(t *testing.T) {
	t.Parallel()
	b, cc := countedSetup(t, tasks.Config{SkipFor: time.Hour})
	var eds []*tasks.Editor
	for _, name := range []string{"ok1", "ok2", "busy", "disabled", "skipper", "stale", "paused"} {
		eds = append(eds, b.editor(t, name, "news", "paused"))
	}
	ids := b.insert(t,
		tasks.NewTask{Category: "news", Title: "ok1"}, tasks.NewTask{Category: "news", Title: "ok2"},
		tasks.NewTask{Category: "news", Title: "busy"}, tasks.NewTask{Category: "news", Title: "disabled"},
		tasks.NewTask{Category: "news", Title: "skipped"}, tasks.NewTask{Category: "news", Title: "stale"},
		tasks.NewTask{Category: "paused", Title: "paused"}, tasks.NewTask{Category: "news", Title: "held"},
		tasks.NewTask{Category: "news", Title: "to skip"})
	ps := make([]tasks.ClaimParams, 7)
	for i := range ps {
		ps[i] = b.editorClaim(t, ids[i], eds[i])
	}
	// busy holds task 7; disabled is disabled; skipper skipped task 4;
	// task 5 was claimed by someone else since it was read; "paused" is.
	b.claim(t, ids[7], eds[2].Holder(), eds[2].ID, time.Minute)
	if _, err := b.store.DisableEditor(b.ctx, eds[3].ID); err != nil {
		t.Fatal(err)
	}
	sc := b.claim(t, ids[4], eds[4].Holder(), eds[4].ID, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: ids[4], Fence: sc.Fence, Holder: eds[4].Holder(), Skip: true}); err != nil {
		t.Fatal(err)
	}
	ps[4] = b.editorClaim(t, ids[4], eds[4])
	b.claim(t, ids[5], "worker:other", 0, time.Minute)
	if _, _, err := b.store.PauseCategory(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	snaps := make(map[int64]snapshot)
	for _, id := range ids[2:7] {
		snaps[id] = b.snapshot(t, id)
	}

	before := cc.Counts()
	res, err := b.store.ClaimEditorBatch(b.ctx, ps)
	if err != nil {
		t.Fatalf("claim editor batch: %v", err)
	}
	oneRoundTrip(t, "claim editor batch", cc, before)
	for i := range 2 {
		c := res[i].Claim
		if res[i].Err != nil || c == nil || c.Task.ID != ids[i] || c.Fence != ps[i].Fence+1 ||
			c.Task.Holder != eds[i].Holder() || c.Task.EditorID != eds[i].ID || c.Task.TraceContext != ps[i].TraceContext {
			t.Fatalf("member %d: %+v, want task %d claimed by editor %d with fence %d", i, res[i], ids[i], eds[i].ID, ps[i].Fence+1)
		}
		got := b.task(t, ids[i])
		if got.Status != tasks.StatusAssigned || got.Fence != c.Fence || got.EditorID != eds[i].ID || got.Attempts != 1 ||
			got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(c.LeaseExpiresAt) {
			t.Fatalf("task %d after the batch: %+v", ids[i], got)
		}
		if k := kinds(b.events(t, ids[i])); !slices.Equal(k, []tasks.EventKind{tasks.EventClaimed}) {
			t.Fatalf("task %d events %v, want one claimed", ids[i], k)
		}
		held, err := b.store.HeldByEditor(b.ctx, eds[i].ID)
		if err != nil || held.Task.ID != ids[i] || held.Fence != c.Fence {
			t.Fatalf("editor %d holds %+v (%v), want task %d", eds[i].ID, held, err, ids[i])
		}
	}
	wantErr(t, "claim of an editor holding a task", res[2].Err, tasks.ErrEditorBusy)
	wantErr(t, "claim of a disabled editor", res[3].Err, tasks.ErrEditorDisabled)
	wantErr(t, "claim of a skipped task", res[4].Err, tasks.ErrSkipped)
	wantErr(t, "claim of a task claimed meanwhile", res[5].Err, tasks.ErrStale)
	wantErr(t, "claim in a paused category", res[6].Err, tasks.ErrPaused)
	for _, id := range ids[2:7] {
		b.unchanged(t, id, snaps[id])
	}

	// A second batch of the claimed editors: they hold a task each now.
	again := []tasks.ClaimParams{b.editorClaim(t, ids[8], eds[0])}
	res, err = b.store.ClaimEditorBatch(b.ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a second claim of an editor", res[0].Err, tasks.ErrEditorBusy)

	// Bad params change nothing.
	free := b.editor(t, "free", "news")
	p8 := b.editorClaim(t, ids[8], free)
	for _, bad := range [][]tasks.ClaimParams{
		{p8, p8},
		{p8, {TaskID: ids[2], Fence: ps[2].Fence, Status: tasks.StatusPending, Holder: free.Holder(), EditorID: free.ID, Lease: time.Minute}},
		{{TaskID: ids[8], Fence: p8.Fence, Status: tasks.StatusPending, Holder: "worker:w", Lease: time.Minute}},
		{{TaskID: ids[8], Fence: p8.Fence, Status: tasks.StatusAssigned, Holder: free.Holder(), EditorID: free.ID, Lease: time.Minute}},
	} {
		if _, err := b.store.ClaimEditorBatch(b.ctx, bad); !errors.Is(err, tasks.ErrInvalid) {
			t.Fatalf("claim editor batch %+v: %v, want ErrInvalid", bad, err)
		}
	}
	if got := b.task(t, ids[8]); got.Status != tasks.StatusPending {
		t.Fatalf("a refused batch claimed task %d: %+v", ids[8], got)
	}
}

// Many editors, fewer tasks, batches racing with single claims: every task
// claimed at most once, and no editor holds two tasks.
func TestClaimEditorBatchConcurrentOneTaskPerEditor(t *testing.T) {
	t.Parallel()
	b := setup(t, tasks.Config{})
	const editors, tasksN = 40, 30
	var eds []*tasks.Editor
	for i := range editors {
		eds = append(eds, b.editor(t, "e"+string(rune('a'+i%26))+string(rune('a'+i/26)), "news"))
	}
	var nts []tasks.NewTask
	for range tasksN {
		nts = append(nts, tasks.NewTask{Category: "news", Title: "t"})
	}
	ids := b.insert(t, nts...)
	errs := make(chan error, editors)
	// Each editor asks twice: once in a batch of editors, once alone, for
	// tasks chosen so that batches and single claims meet on rows.
	batches := make([][]tasks.ClaimParams, 4)
	for g := range batches {
		for i := g; i < editors; i += 4 {
			batches[g] = append(batches[g], b.editorClaim(t, ids[(i*7)%tasksN], eds[i]))
		}
		slices.SortFunc(batches[g], func(a, b tasks.ClaimParams) int { return int(a.TaskID - b.TaskID) })
		batches[g] = slices.CompactFunc(batches[g], func(a, b tasks.ClaimParams) bool { return a.TaskID == b.TaskID })
	}
	singles := make([]tasks.ClaimParams, editors)
	for i := range singles {
		singles[i] = b.editorClaim(t, ids[(i*11)%tasksN], eds[i])
	}
	for _, ps := range batches {
		go func() {
			_, err := b.store.ClaimEditorBatch(b.ctx, ps)
			errs <- err
		}()
	}
	for _, p := range singles {
		go func() {
			_, err := b.store.Claim(b.ctx, p)
			if err != nil && !errors.Is(err, tasks.ErrStale) && !errors.Is(err, tasks.ErrEditorBusy) {
				errs <- err
				return
			}
			errs <- nil
		}()
	}
	for range 4 + editors {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := b.count(t, "SELECT COUNT(*) FROM (SELECT editor_id FROM tasks WHERE editor_id IS NOT NULL GROUP BY editor_id HAVING COUNT(*) > 1) x"); n != 0 {
		t.Fatalf("%d editors hold more than one task", n)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM (SELECT task_id, fence FROM task_events WHERE kind = 'claimed' GROUP BY task_id, fence HAVING COUNT(*) > 1) x"); n != 0 {
		t.Fatalf("%d claims recorded twice", n)
	}
	claimed := b.count(t, "SELECT COUNT(*) FROM tasks WHERE status = 'assigned'")
	events := b.count(t, "SELECT COUNT(*) FROM task_events WHERE kind = 'claimed'")
	if claimed == 0 || events != claimed {
		t.Fatalf("%d tasks assigned, %d claimed events: want as many, at least one", claimed, events)
	}
}
