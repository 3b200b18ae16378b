package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// categoryCount is the count of cat and status in st, 0 when absent.
func categoryCount(st *tasks.PoolStats, cat string, status tasks.Status) int64 {
	for _, c := range st.ByCategory {
		if c.Category == cat && c.Status == status {
			return c.Count
		}
	}
	return 0
}

// TestGoldHeldNotPendingAndCopiesEnd: a gold task held out of the pool and the
// copies whose claims were released or expired are not counted pending (nobody
// can claim them); EndGoldCopies cancels the copies, not the gold task, and
// retention then purges them, their gold_copies rows kept for the scores.
func TestGoldHeldNotPendingAndCopiesEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	gold := b.insertOne(t, "news", 0)
	if _, err := b.store.MarkGold(b.ctx, gold, tasks.GoldAnswer{Decision: "approve"}, goldRules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	b.insertOne(t, "news", 0) // an ordinary task, the one claimable
	ann, bob := b.editor(t, "ann", "news"), b.editor(t, "bob", "news")
	ca, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: "editor:ann", Categories: []string{"news"}, Lease: time.Minute})
	if err != nil {
		t.Fatalf("claim gold for ann: %v", err)
	}
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: ca.Task.ID, Fence: ca.Fence, Holder: "editor:ann"}); err != nil {
		t.Fatalf("release ann's copy: %v", err)
	}
	cb, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: bob.ID, Holder: "editor:bob", Categories: []string{"news"}, Lease: time.Minute})
	if err != nil {
		t.Fatalf("claim gold for bob: %v", err)
	}
	b.expireLease(t, cb.Task.ID)
	if _, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{Limit: 10}); err != nil {
		t.Fatalf("recycle: %v", err)
	}
	st, err := b.store.PoolStats(b.ctx, 0)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	if got := categoryCount(st, "news", tasks.StatusPending); got != 1 || st.ByStatus[tasks.StatusPending] != 1 {
		t.Errorf("pending news = %d (all: %d), want 1: the gold task and the two copies left are claimable by nobody",
			got, st.ByStatus[tasks.StatusPending])
	}

	n, err := b.store.EndGoldCopies(b.ctx, 10)
	if err != nil || n != 2 {
		t.Fatalf("end gold copies = %d, %v; want 2", n, err)
	}
	for _, id := range []int64{ca.Task.ID, cb.Task.ID} {
		if got := b.task(t, id); got.Status != tasks.StatusCancelled || got.DoneAt == nil {
			t.Errorf("copy %d = %s, done_at %v; want cancelled now", id, got.Status, got.DoneAt)
		}
		evs := b.events(t, id)
		if last := evs[len(evs)-1]; last.Kind != tasks.EventCancelled {
			t.Errorf("copy %d's last event = %s, want cancelled", id, last.Kind)
		}
	}
	if got := b.task(t, gold); got.Status != tasks.StatusPending || !got.RunAfter.Equal(tasks.GoldRunAfter) {
		t.Errorf("gold task = %s, run_after %v; want it kept, held out", got.Status, got.RunAfter)
	}
	if n, err := b.store.EndGoldCopies(b.ctx, 10); err != nil || n != 0 {
		t.Errorf("end gold copies again = %d, %v; want 0", n, err)
	}
	// Ann is not served the gold task again.
	if _, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: "editor:ann", Categories: []string{"news"}, Lease: time.Minute}); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("gold claim for ann after her copy ended: %v, want ErrNotFound", err)
	}
	st, err = b.store.PoolStats(b.ctx, 0)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	if p, c := categoryCount(st, "news", tasks.StatusPending), categoryCount(st, "news", tasks.StatusCancelled); p != 1 || c != 2 {
		t.Errorf("news: pending %d, cancelled %d; want 1 and 2", p, c)
	}

	b.exec(t, "UPDATE tasks SET done_at = done_at - INTERVAL 1 HOUR WHERE id IN (?, ?)", ca.Task.ID, cb.Task.ID)
	if _, err := b.store.PurgeTasks(b.ctx, tasks.StatusCancelled, time.Minute, 100); err != nil {
		t.Fatalf("purge: %v", err)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM tasks WHERE id IN (?, ?)", ca.Task.ID, cb.Task.ID); n != 0 {
		t.Errorf("%d copies left after the purge, want 0", n)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM gold_copies WHERE copy_id IN (?, ?) AND answered_at IS NULL", ca.Task.ID, cb.Task.ID); n != 2 {
		t.Errorf("%d gold_copies rows kept, want 2, unanswered", n)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM tasks WHERE id = ?", gold); n != 1 {
		t.Errorf("gold task purged")
	}
}

// TestEndGoldCopiesRefusesBadLimit: a limit below 1 is refused.
func TestEndGoldCopiesRefusesBadLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	if _, err := b.store.EndGoldCopies(b.ctx, 0); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("limit 0: %v, want ErrInvalid", err)
	}
}

// TestListLeavesOutGoldHeld: the task list, with status pending, with no
// status, and by category (a branch per ended status), leaves out the tasks
// held out of the pool by gold tasks (a gold task pending when marked, a copy
// released and not yet cancelled), and lists the gold task's copy once it is
// cancelled; the queue stats report no claimable wait for a category whose
// pending tasks are all held out.
func TestListLeavesOutGoldHeld(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	gold := b.insertOne(t, "facts", 0)
	if _, err := b.store.MarkGold(b.ctx, gold, tasks.GoldAnswer{Result: rawJSON(`{"label":"spam","score":3}`)}, goldRules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	plain := b.insertOne(t, "facts", 0)
	ann := b.editor(t, "ann", "facts")
	c, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: ann.Holder(), Categories: []string{"facts"}, Lease: time.Minute})
	if err != nil {
		t.Fatalf("claim gold: %v", err)
	}
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: ann.Holder()}); err != nil {
		t.Fatalf("release the copy: %v", err)
	}
	list := func(p tasks.ListParams) []int64 {
		t.Helper()
		page, err := b.store.ListTasks(b.ctx, p)
		if err != nil {
			t.Fatalf("list %+v: %v", p, err)
		}
		var ids []int64
		for _, task := range page.Tasks {
			ids = append(ids, task.ID)
		}
		return ids
	}
	for _, p := range []tasks.ListParams{
		{Status: tasks.StatusPending}, {}, {Category: "facts"}, {Category: "facts", Status: tasks.StatusPending},
		{Status: tasks.StatusPending, Oldest: true},
	} {
		if got := list(p); len(got) != 1 || got[0] != plain {
			t.Errorf("list %+v = %v, want only the claimable task %d (gold %d and its copy %d held out)", p, got, plain, gold, c.Task.ID)
		}
	}
	qs, err := b.store.QueueStats(b.ctx)
	if err != nil {
		t.Fatalf("queue stats: %v", err)
	}
	if len(qs) != 1 || qs[0].Category != "facts" {
		t.Fatalf("queue stats = %+v, want facts", qs)
	}

	if n, err := b.store.EndGoldCopies(b.ctx, 10); err != nil || n != 1 {
		t.Fatalf("end gold copies = %d, %v; want 1", n, err)
	}
	if got := list(tasks.ListParams{Status: tasks.StatusCancelled}); len(got) != 1 || got[0] != c.Task.ID {
		t.Errorf("cancelled = %v, want the copy %d", got, c.Task.ID)
	}
	if _, err := b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: plain}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if got := list(tasks.ListParams{Status: tasks.StatusPending}); len(got) != 0 {
		t.Errorf("pending = %v, want none", got)
	}
	qs, err = b.store.QueueStats(b.ctx)
	if err != nil {
		t.Fatalf("queue stats: %v", err)
	}
	for _, q := range qs {
		if q.OldestClaimable != 0 || q.Overdue != 0 {
			t.Errorf("queue stat %+v, want no wait: its pending task is a gold task, which nobody can claim", q)
		}
	}
}

// stageCount is the count of cat, stage and status in st, 0 when absent.
func stageCount(st *tasks.PoolStats, cat, stage string, status tasks.Status) int64 {
	for _, c := range st.ByStage {
		if c.Category == cat && c.Stage == stage && c.Status == status {
			return c.Count
		}
	}
	return 0
}

// TestGoldHeldNotPendingByStage: a gold task with stages, and its copy
// released, are counted pending at no stage; a plain task at the same stage
// is.
func TestGoldHeldNotPendingByStage(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	stages := []string{"edit", "review"}
	gold := b.insert(t, tasks.NewTask{Category: "news", Title: "gold", Stages: stages})[0]
	if _, err := b.store.MarkGold(b.ctx, gold, tasks.GoldAnswer{Decision: "approve"}, goldRules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	b.insert(t, tasks.NewTask{Category: "news", Title: "plain", Stages: stages})
	ann := b.editor(t, "ann", "news")
	c, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: ann.Holder(), Categories: []string{"news"}, Lease: time.Minute})
	if err != nil {
		t.Fatalf("claim gold: %v", err)
	}
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: ann.Holder()}); err != nil {
		t.Fatalf("release the copy: %v", err)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM tasks WHERE stage_status = 'pending' AND stage_name = 'edit'"); n != 3 {
		t.Fatalf("%d pending tasks at edit, want 3: the gold task, its copy and the plain one", n)
	}
	st, err := b.store.PoolStats(b.ctx, 0)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	if got := stageCount(st, "news", "edit", tasks.StatusPending); got != 1 {
		t.Errorf("pending news at edit = %d, want 1: the plain task (stages %+v)", got, st.ByStage)
	}
	if got := categoryCount(st, "news", tasks.StatusPending); got != 1 {
		t.Errorf("pending news = %d, want 1", got)
	}
}
