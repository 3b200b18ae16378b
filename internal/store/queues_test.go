package store_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// queueStat returns the QueueStat of category cat, and whether there is one.
func (b *bundle) queueStat(t *testing.T, cat string) (tasks.QueueStat, bool) {
	t.Helper()
	qs, err := b.store.QueueStats(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Category == cat {
			return q, true
		}
	}
	return tasks.QueueStat{}, false
}

// QueueStats: the age of each category's oldest claimable task, counted from
// when it became claimable (a task released, recycled, force released or put
// back at its next stage counts from then, not from its insert), 0 for a
// category with nothing claimable; the claimable tasks past their due_at;
// paused categories left out.
func TestQueueStats(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	hourAgo := `run_after = NOW(3) - INTERVAL 1 HOUR, created_at = NOW(3) - INTERVAL 1 HOUR, updated_at = NOW(3) - INTERVAL 1 HOUR`

	// Claimable for 10 minutes and 1 minute; one not before an hour from now.
	ids := b.insert(t, tasks.NewTask{Category: "a", Title: "1"}, tasks.NewTask{Category: "a", Title: "2"}, tasks.NewTask{Category: "a", Title: "3"})
	b.exec(t, `UPDATE tasks SET run_after = NOW(3) - INTERVAL 10 MINUTE WHERE id = ?`, ids[0])
	b.exec(t, `UPDATE tasks SET run_after = NOW(3) - INTERVAL 1 MINUTE WHERE id = ?`, ids[1])
	b.exec(t, `UPDATE tasks SET run_after = NOW(3) + INTERVAL 1 HOUR WHERE id = ?`, ids[2])
	if q, ok := b.queueStat(t, "a"); !ok || q.OldestClaimable < 10*time.Minute || q.OldestClaimable > 10*time.Minute+time.Minute || q.Overdue != 0 {
		t.Errorf("a: %+v (reported %v), want the oldest claimable for 10 minutes, none overdue", q, ok)
	}
	// Nothing claimable yet: age 0.
	b.exec(t, `UPDATE tasks SET run_after = NOW(3) + INTERVAL 1 HOUR WHERE id IN (?, ?)`, ids[0], ids[1])
	if q, ok := b.queueStat(t, "a"); !ok || q.OldestClaimable != 0 {
		t.Errorf("a with nothing claimable: %+v (reported %v), want age 0", q, ok)
	}

	// Overdue: two claimable tasks past due, one past due but not claimable
	// yet, one due tomorrow.
	now := b.now(t)
	past, future := now.Add(-time.Hour).Truncate(time.Millisecond), now.Add(24*time.Hour).Truncate(time.Millisecond)
	ids = b.insert(t,
		tasks.NewTask{Category: "due", Title: "1", DueAt: past}, tasks.NewTask{Category: "due", Title: "2", DueAt: past},
		tasks.NewTask{Category: "due", Title: "3", DueAt: past}, tasks.NewTask{Category: "due", Title: "4", DueAt: future})
	b.exec(t, `UPDATE tasks SET run_after = NOW(3) + INTERVAL 1 HOUR WHERE id = ?`, ids[2])
	if q, ok := b.queueStat(t, "due"); !ok || q.Overdue != 2 {
		t.Errorf("due: %+v (reported %v), want 2 overdue", q, ok)
	}

	// Each way back to the pool makes the task claimable again from then.
	back := map[string]func(t *testing.T, id int64){
		"released": func(t *testing.T, id int64) {
			c := b.claim(t, id, "worker:r", 0, time.Minute)
			if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: "worker:r"}); err != nil {
				t.Fatal(err)
			}
		},
		"recycled": func(t *testing.T, id int64) {
			b.claim(t, id, "worker:r", 0, time.Minute)
			b.expireLease(t, id)
			if rs, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{}); err != nil || len(rs) != 1 {
				t.Fatalf("recycle: %v, %v", rs, err)
			}
		},
		"force released": func(t *testing.T, id int64) {
			b.claim(t, id, "worker:r", 0, time.Minute)
			if _, err := b.store.ForceRelease(b.ctx, id); err != nil {
				t.Fatal(err)
			}
		},
		"next stage": func(t *testing.T, id int64) {
			b.exec(t, `UPDATE tasks SET stages = 'edit,review', stage_count = 2 WHERE id = ?`, id)
			c := b.claim(t, id, "worker:r", 0, time.Minute)
			if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: "worker:r", Result: rawJSON(`1`)}); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, f := range back {
		t.Run(name, func(t *testing.T) {
			cat := "back-" + strings.ReplaceAll(name, " ", "-")
			id := b.insertOne(t, cat, 0)
			b.exec(t, `UPDATE tasks SET `+hourAgo+` WHERE id = ?`, id)
			f(t, id)
			if got := b.task(t, id); got.Status != tasks.StatusPending {
				t.Fatalf("task %s, want pending", got.Status)
			}
			if q, ok := b.queueStat(t, cat); !ok || q.OldestClaimable > time.Minute {
				t.Errorf("%s: %+v (reported %v), want claimable since just now, not since its insert an hour ago", cat, q, ok)
			}
		})
	}

	// A paused category's tasks are not claimable.
	b.exec(t, `UPDATE tasks SET `+hourAgo+` WHERE category = 'due'`)
	if _, _, err := b.store.PauseCategory(b.ctx, "due"); err != nil {
		t.Fatal(err)
	}
	if q, ok := b.queueStat(t, "due"); ok {
		t.Errorf("paused category reported: %+v", q)
	}
}

// The queue statistics read indexes: the oldest claimable task per category by
// a loose scan of tasks_claimable, a few entries per category; the overdue
// tasks from the range of tasks_overdue before now, from the index alone. No
// scan of the pool either way.
func TestQueueStatsPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	nts := make([]tasks.NewTask, 20000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: fmt.Sprintf("c%d", i%20), Priority: i % 5, Title: "t"}
	}
	b.insert(t, nts...)
	// Most are done, some assigned, a few overdue.
	b.exec(t, `UPDATE tasks SET status = 'done', done_at = NOW(3) WHERE id % 10 < 7`)
	b.exec(t, `UPDATE tasks SET status = 'assigned', fence = 1, holder = 'w', assigned_at = NOW(3),
		lease_expires_at = NOW(3) + INTERVAL 1 MINUTE WHERE id % 10 = 7`)
	b.exec(t, `UPDATE tasks SET due_at = NOW(3) - INTERVAL 1 HOUR WHERE id % 100 = 9`)
	b.exec(t, `UPDATE tasks SET due_at = NOW(3) + INTERVAL 1 DAY WHERE id % 100 = 19`)
	b.exec(t, `ANALYZE TABLE tasks`)

	plan := b.explain(t, store.QueueOldestSQL)
	t.Logf("QueueStats (oldest claimable):\n%s\n%s", store.QueueOldestSQL, formatPlan(plan))
	noFullScans(t, "oldest claimable", plan)
	if len(plan) != 1 || plan[0].Key != "tasks_claimable" || !strings.Contains(plan[0].Extra, "Using index for group-by") {
		t.Errorf("oldest claimable: want one loose scan of tasks_claimable (Using index for group-by):\n%s", formatPlan(plan))
	} else if rows, _ := strconv.Atoi(plan[0].Rows); rows > 200 {
		t.Errorf("oldest claimable: %d rows for 20 categories, want a few per category:\n%s", rows, formatPlan(plan))
	}

	plan = b.explain(t, store.QueueOverdueSQL, tasks.OverdueCountMax)
	t.Logf("QueueStats (overdue):\n%s\n%s", store.QueueOverdueSQL, formatPlan(plan))
	noFullScans(t, "overdue", plan)
	var read bool
	for _, r := range plan {
		if r.Table != "tasks" {
			continue
		}
		read = true
		rows, _ := strconv.Atoi(r.Rows)
		if r.Key != "tasks_overdue" || r.Type != "range" || !strings.Contains(r.Extra, "Using index") || rows > 2000 {
			t.Errorf("overdue: tasks read by %s %s (%s), %d rows; want the range of tasks_overdue before now, from the index alone (200 overdue of 20,000):\n%s",
				r.Type, r.Key, r.Extra, rows, formatPlan(plan))
		}
	}
	if !read {
		t.Errorf("overdue: no read of tasks:\n%s", formatPlan(plan))
	}
}
