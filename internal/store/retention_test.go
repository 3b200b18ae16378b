package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// finished makes one task of each kind the purge meets: pending, assigned (with
// events), done (with a result, events and a skip), dead, cancelled, and a group
// with a done member beside a pending one. It returns their ids by name.
func (b *bundle) finished(t *testing.T) map[string]int64 {
	t.Helper()
	ed := b.editor(t, "ada", "news")
	ids := b.insert(t,
		tasks.NewTask{Category: "news", Title: "pending"},
		tasks.NewTask{Category: "news", Title: "assigned"},
		tasks.NewTask{Category: "news", Title: "done"},
		tasks.NewTask{Category: "news", Title: "dead"},
		tasks.NewTask{Category: "news", Title: "cancelled"})
	m := map[string]int64{"pending": ids[0], "assigned": ids[1], "done": ids[2], "dead": ids[3], "cancelled": ids[4]}
	b.claim(t, m["assigned"], "worker-1", 0, time.Hour)
	b.submitOne(t, m["done"], ed.Holder(), ed.ID, `{"ok":true}`)
	b.exec(t, `INSERT INTO task_skips (task_id, editor_id, until) VALUES (?, ?, NOW(3) + INTERVAL 1 HOUR)`, m["done"], ed.ID)
	c := b.claim(t, m["dead"], "worker-1", 0, time.Hour)
	if _, err := b.store.Fail(b.ctx, tasks.FailParams{TaskID: m["dead"], Fence: c.Fence, Holder: "worker-1", Err: "boom", Dead: true}); err != nil {
		t.Fatalf("fail: %v", err)
	}
	if _, err := b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: m["cancelled"]}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	g := b.group(t, tasks.NewTask{Category: "news", Title: "group", Overlap: 2})
	b.submitOne(t, g[0], "worker-2", 0, `{"g":0}`)
	m["group-done"], m["group-pending"] = g[0], g[1]
	// Number the results, as a feed reader would.
	b.readResults(t, 0, 100)
	return m
}

// purgeAll runs the purge of every ended status with retention keep until
// a batch comes back empty, and returns the rows purged by table.
func (b *bundle) purgeAll(t *testing.T, keep time.Duration) map[string]int64 {
	t.Helper()
	rows := map[string]int64{}
	for _, st := range []tasks.Status{tasks.StatusDone, tasks.StatusCancelled, tasks.StatusDead} {
		for {
			p, err := b.store.PurgeTasks(b.ctx, st, keep, 2)
			if err != nil {
				t.Fatalf("purge %s: %v", st, err)
			}
			for k, n := range p.Rows {
				rows[k] += n
			}
			if p.Rows["tasks"] == 0 {
				break
			}
		}
	}
	return rows
}

// orphans counts the rows left without their task.
func (b *bundle) orphans(t *testing.T) int {
	t.Helper()
	n := 0
	for _, table := range []string{"task_results", "task_events", "task_skips"} {
		n += b.count(t, `SELECT COUNT(*) FROM `+table+` c LEFT JOIN tasks t ON t.id = c.task_id WHERE t.id IS NULL`)
	}
	return n
}

func TestPurgeTasksNeverTouchesLiveTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	m := b.finished(t)
	live := map[string]snapshot{}
	for _, name := range []string{"pending", "assigned", "group-pending", "group-done"} {
		live[name] = b.snapshot(t, m[name])
	}
	liveEvents := b.count(t, `SELECT COUNT(*) FROM task_events WHERE task_id IN (?, ?)`, m["pending"], m["assigned"])
	time.Sleep(5 * time.Millisecond)

	rows := b.purgeAll(t, time.Millisecond)

	for name, snap := range live {
		b.unchanged(t, m[name], snap) // the group's done member waits for its group
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE task_id IN (?, ?)`, m["pending"], m["assigned"]); n != liveEvents || n == 0 {
		t.Errorf("live tasks' events = %d, want %d", n, liveEvents)
	}
	for _, name := range []string{"done", "dead", "cancelled"} {
		if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE id = ?`, m[name]); n != 0 {
			t.Errorf("%s task kept after its retention", name)
		}
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_results WHERE task_id = ?`, m["group-done"]); n != 1 {
		t.Errorf("the done member of a live group has %d results, want 1", n)
	}
	if rows["tasks"] != 3 || rows["task_results"] != 1 || rows["task_skips"] != 1 || rows["task_events"] < 5 {
		t.Errorf("purged rows = %v, want 3 tasks, 1 result, 1 skip, their events", rows)
	}
	if n := b.orphans(t); n != 0 {
		t.Errorf("%d rows left without their task", n)
	}

	// Once the group has ended, it goes whole.
	c := b.claim(t, m["group-pending"], "worker-3", 0, time.Minute)
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: m["group-pending"], Fence: c.Fence, Holder: "worker-3", Result: rawJSON(`{}`)}); err != nil {
		t.Fatal(err)
	}
	b.readResults(t, 2, 100)
	time.Sleep(5 * time.Millisecond)
	if rows := b.purgeAll(t, time.Millisecond); rows["tasks"] != 2 || rows["task_results"] != 2 {
		t.Errorf("group purge = %v, want its 2 tasks and 2 results", rows)
	}
	if n := b.orphans(t); n != 0 {
		t.Errorf("%d rows left without their task", n)
	}
}

func TestPurgeTasksKeepsWhatIsWithinRetention(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	b.finished(t)
	before := b.count(t, `SELECT COUNT(*) FROM tasks`)
	if rows := b.purgeAll(t, time.Hour); len(rows) != 0 {
		t.Errorf("purged %v within the retention", rows)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != before {
		t.Errorf("tasks = %d, want %d", n, before)
	}
	if _, err := b.store.PurgeTasks(b.ctx, tasks.StatusPending, time.Millisecond, 10); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("purge of pending tasks: %v, want ErrInvalid", err)
	}
	if _, err := b.store.PurgeTasks(b.ctx, tasks.StatusDone, 0, 10); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("purge with no retention: %v, want ErrInvalid", err)
	}
}

func TestResultsCursorOlderThanRetentionIsExpired(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ids := b.insert(t, tasks.NewTask{Category: "news", Title: "a"}, tasks.NewTask{Category: "news", Title: "b"},
		tasks.NewTask{Category: "news", Title: "c"}, tasks.NewTask{Category: "news", Title: "d"})
	b.submitOne(t, ids[0], "w", 0, `1`)
	b.submitOne(t, ids[1], "w", 0, `2`)
	if got, _ := b.readResults(t, 0, 10); len(got) != 2 {
		t.Fatalf("feed = %d results, want 2", len(got))
	}
	// Submitted but not numbered yet: the first pass leaves it; the call
	// numbers it, as a feed reader would, and purges it in a second pass.
	b.submitOne(t, ids[2], "w", 0, `3`)
	time.Sleep(5 * time.Millisecond)
	if p, err := b.store.PurgeTasks(b.ctx, tasks.StatusDone, time.Millisecond, 10); err != nil || p.Rows["tasks"] != 3 || p.Rows["task_results"] != 3 {
		t.Fatalf("purge = %+v, %v; want the 2 numbered tasks, and the third once numbered", p, err)
	}
	for _, after := range []int64{0, 1, 2} {
		_, err := b.store.Results(b.ctx, tasks.ResultsParams{After: after}, func(*tasks.Result) error { return nil })
		var ce *tasks.CursorExpiredError
		if !errors.Is(err, tasks.ErrCursorExpired) || !errors.As(err, &ce) || ce.Cursor != after || ce.Oldest != 3 {
			t.Errorf("results after %d: %v, want cursor expired with oldest 3", after, err)
		}
	}
	b.submitOne(t, ids[3], "w", 0, `4`)
	got, page := b.readResults(t, 3, 10)
	if len(got) != 1 || got[0].TaskID != ids[3] || got[0].Cursor != 4 || page.Next != 4 {
		t.Errorf("results after the oldest cursor kept = %+v, want task %d at 4", got, ids[3])
	}
}

func TestPurgeDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	for i, st := range []string{"delivered", "failed", "pending"} {
		ev := int64(100 + i)
		b.exec(t, `INSERT INTO webhook_outbox (id, kind, task_id, fence, category, cause, fanned_out) VALUES (?, 'submitted', ?, 1, 'news', 'submit', 1)`, ev, id)
		b.exec(t, `INSERT INTO webhook_deliveries (event_id, webhook, status, done_at) VALUES (?, 'a', ?, IF(? = 'pending', NULL, NOW(3)))`, ev, st, st)
		b.exec(t, `INSERT INTO webhook_attempts (event_id, webhook, attempt, duration_ms) VALUES (?, 'a', 1, 5)`, ev)
	}
	// An event with a second webhook's delivery pending keeps its outbox row.
	b.exec(t, `INSERT INTO webhook_deliveries (event_id, webhook, status) VALUES (100, 'b', 'pending')`)
	time.Sleep(5 * time.Millisecond)
	p, err := b.store.PurgeDeliveries(b.ctx, time.Millisecond, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"webhook_deliveries": 2, "webhook_attempts": 2, "webhook_outbox": 1}
	if fmt.Sprint(p.Rows) != fmt.Sprint(want) {
		t.Errorf("purged %v, want %v", p.Rows, want)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'`); n != 2 {
		t.Errorf("pending deliveries = %d, want 2", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM webhook_attempts WHERE event_id = 102`); n != 1 {
		t.Errorf("a pending delivery's attempts = %d, want 1", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM webhook_outbox WHERE id IN (100, 102)`); n != 2 {
		t.Errorf("events with a pending delivery kept = %d, want 2", n)
	}
}

// The purge runs beside claims and submits without making them wait: none
// fails or takes long (a lock wait would last the server's
// innodb_lock_wait_timeout), the assigned tasks are all there, and every done
// task is either there or purged whole.
func TestPurgeBesideClaimsAndSubmits(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	const n = 200
	nts := make([]tasks.NewTask, n)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "news", Title: fmt.Sprint(i)}
	}
	ids := b.insert(t, nts...)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var purgeErr error
	purged := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			p, err := b.store.PurgeTasks(b.ctx, tasks.StatusDone, time.Millisecond, 20)
			if err != nil {
				purgeErr = err
				return
			}
			purged += int(p.Rows["tasks"])
		}
	})
	submitted := map[int64]bool{}
	var held []int64
	for i, id := range ids {
		start := time.Now()
		c, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Status: tasks.StatusPending, Holder: "w", Lease: time.Hour})
		if err != nil {
			t.Fatalf("claim %d beside the purge: %v", id, err)
		}
		if i%3 == 0 { // keep it assigned
			held = append(held, id)
			continue
		}
		if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: "w", Result: rawJSON(`1`)}); err != nil {
			t.Fatalf("submit %d beside the purge: %v", id, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("claim and submit of %d took %v beside the purge", id, d)
		}
		submitted[id] = true
	}
	close(stop)
	wg.Wait()
	if purgeErr != nil {
		t.Fatalf("purge: %v", purgeErr)
	}
	if purged == 0 {
		t.Error("the purge purged nothing while tasks were done (with no feed reader, it numbers the results itself)")
	}
	if got := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'assigned'`); got != len(held) {
		t.Errorf("assigned tasks = %d, want %d", got, len(held))
	}
	if got := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'done'`); got != len(submitted)-purged {
		t.Errorf("done tasks = %d, want %d submitted - %d purged", got, len(submitted), purged)
	}
	if n := b.orphans(t); n != 0 {
		t.Errorf("%d rows left without their task", n)
	}
}
