package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// TestPurgeKeepsGoldTasks: retention never purges a gold task, done or
// cancelled, even when the gold tasks are the oldest rows of a batch: the
// tasks ended after them are purged past them, the gold tasks are still
// served, and their copies, once ended and old, are purged as any task.
func TestPurgeKeepsGoldTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ann", "news")
	done := b.insertOne(t, "news", 0)
	b.submitOne(t, done, "worker-1", 0, `{"ok":true}`)
	cancelled := b.insertOne(t, "news", 0)
	if _, err := b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: cancelled}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	for _, id := range []int64{done, cancelled} {
		if _, err := b.store.MarkGold(b.ctx, id, tasks.GoldAnswer{Decision: "approve"}, goldRules); err != nil {
			t.Fatalf("mark %d gold: %v", id, err)
		}
	}
	plain := b.insertOne(t, "news", 0)
	b.submitOne(t, plain, "worker-1", 0, `{"ok":true}`)
	b.readResults(t, 0, 100)
	// The gold tasks ended first: a batch of one meets them first.
	b.exec(t, "UPDATE tasks SET done_at = NOW(3) - INTERVAL 2 HOUR WHERE id IN (?, ?)", done, cancelled)
	b.exec(t, "UPDATE tasks SET done_at = NOW(3) - INTERVAL 1 HOUR WHERE id = ?", plain)

	for _, st := range []tasks.Status{tasks.StatusDone, tasks.StatusCancelled} {
		p, err := b.store.PurgeTasks(b.ctx, st, time.Minute, 1)
		if err != nil {
			t.Fatalf("purge %s: %v", st, err)
		}
		if want := map[tasks.Status]int64{tasks.StatusDone: 1}[st]; p.Rows["tasks"] != want {
			t.Errorf("purge %s: %v, want %d tasks purged: the plain task past the gold one", st, p.Rows, want)
		}
	}
	if n := b.count(t, "SELECT COUNT(*) FROM tasks WHERE id = ?", plain); n != 0 {
		t.Errorf("the plain done task was kept past its retention")
	}
	for _, id := range []int64{done, cancelled} {
		if n := b.count(t, "SELECT COUNT(*) FROM tasks WHERE id = ?", id); n != 1 {
			t.Errorf("gold task %d purged", id)
		}
		if n := b.count(t, "SELECT COUNT(*) FROM gold_tasks g JOIN tasks t ON t.id = g.task_id WHERE g.task_id = ?", id); n != 1 {
			t.Errorf("gold task %d's gold_tasks row orphaned", id)
		}
	}

	// Both are still served; their copies, once submitted and old, go.
	var copies []int64
	for range 2 {
		c, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ed.ID, Holder: ed.Holder(), Categories: []string{"news"}, Lease: time.Minute})
		if err != nil {
			t.Fatalf("claim gold after the purge: %v", err)
		}
		if _, err := b.store.SubmitGold(b.ctx, tasks.SubmitParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: ed.Holder(),
			Result: rawJSON(`{}`), Decision: "approve"}, goldRules); err != nil {
			t.Fatalf("submit gold copy: %v", err)
		}
		copies = append(copies, c.Task.ID)
	}
	b.exec(t, "UPDATE tasks SET done_at = NOW(3) - INTERVAL 1 HOUR WHERE id IN (?, ?)", copies[0], copies[1])
	if rows := b.purgeAll(t, time.Minute); rows["tasks"] != 2 {
		t.Errorf("purge after the copies = %v, want their 2 tasks", rows)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM tasks WHERE id IN (?, ?)", copies[0], copies[1]); n != 0 {
		t.Errorf("%d copies kept past their retention", n)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM tasks WHERE id IN (?, ?)", done, cancelled); n != 2 {
		t.Errorf("%d gold tasks left of 2", n)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM gold_copies WHERE copy_id IN (?, ?) AND answered_at IS NOT NULL", copies[0], copies[1]); n != 2 {
		t.Errorf("%d scored gold_copies rows kept, want 2", n)
	}
	if n := b.orphans(t); n != 0 {
		t.Errorf("%d rows left without their task", n)
	}
}

// TestPurgePlansPassGoldOver: the purge's read is a range of tasks_done in its
// order with gold_tasks looked up by primary key, with gold tasks and without;
// the lock reads tasks by primary key.
func TestPurgePlansPassGoldOver(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	nts := make([]tasks.NewTask, 2000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "news", Title: "t"}
	}
	ids := b.insert(t, nts...)
	b.exec(t, `UPDATE tasks SET status = 'done', done_at = NOW(3) - INTERVAL 1 DAY WHERE id % 10 < 7`)
	b.exec(t, `ANALYZE TABLE tasks`)
	check := func(when string) {
		t.Helper()
		plan := b.explain(t, store.PurgeTasksSQL, tasks.StatusDone, int64(time.Hour/time.Microsecond), 100)
		t.Logf("PurgeTasks (read, %s):\n%s\n%s", when, store.PurgeTasksSQL, formatPlan(plan))
		noFullScans(t, "purge read", plan)
		for _, r := range plan {
			switch {
			case r.Table == "t" && r.Key == "tasks_done" && r.Type == "range" && !strings.Contains(r.Extra, "filesort"):
			case r.Table == "g" && (r.Type == "eq_ref" || r.Type == "const" || r.Type == "system"):
			default:
				t.Errorf("purge read (%s): %s read by %s %s (%s):\n%s", when, r.Table, r.Type, r.Key, r.Extra, formatPlan(plan))
			}
		}
		q := strings.Replace(store.PurgeLockTasksSQL, "IN (?)", "IN (?, ?, ?)", 1)
		plan = b.explain(t, q, ids[0], ids[1], ids[2], tasks.StatusDone, int64(time.Hour/time.Microsecond))
		t.Logf("PurgeTasks (lock, %s):\n%s\n%s", when, q, formatPlan(plan))
		noFullScans(t, "purge lock", plan)
		for _, r := range plan {
			switch {
			case r.Table == "t" && r.Key == "PRIMARY" && r.Type == "range":
			case r.Table == "g" && (r.Type == "eq_ref" || r.Type == "const" || r.Type == "system"):
			default:
				t.Errorf("purge lock (%s): %s read by %s %s (%s):\n%s", when, r.Table, r.Type, r.Key, r.Extra, formatPlan(plan))
			}
		}
	}
	check("no gold task")
	b.exec(t, `INSERT INTO gold_tasks (task_id, category, answer) SELECT id, category, '{"decision":"approve"}' FROM tasks WHERE id % 100 = 1`)
	b.exec(t, `ANALYZE TABLE gold_tasks`)
	check("gold tasks")
}
