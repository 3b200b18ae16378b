package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// insertKeyed inserts one task with a key and a hold and returns what Insert did.
func (b *bundle) insertKeyed(t *testing.T, key string, hold tasks.KeyHold) tasks.Inserted {
	t.Helper()
	ins, err := b.store.Insert(b.ctx, []tasks.NewTask{{Category: "news", Title: "t", Key: key, KeyHold: hold}})
	if err != nil {
		t.Fatalf("insert key %s: %v", key, err)
	}
	return ins[0]
}

// keyEnds are the statements that end a task, each by editor and by worker.
var keyEnds = []struct {
	name string
	end  func(t *testing.T, b *bundle, id int64)
}{
	{"editor submit", func(t *testing.T, b *bundle, id int64) {
		ed := b.editor(t, fmt.Sprintf("ada-%d", id), "news")
		b.submitOne(t, id, ed.Holder(), ed.ID, `{}`)
	}},
	{"editor fail dead", func(t *testing.T, b *bundle, id int64) {
		ed := b.editor(t, fmt.Sprintf("bob-%d", id), "news")
		c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)
		if _, err := b.store.Fail(b.ctx, tasks.FailParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Err: "boom", Dead: true}); err != nil {
			t.Fatal(err)
		}
	}},
	{"worker complete", func(t *testing.T, b *bundle, id int64) {
		b.complete(t, id, tasks.Outcome{Result: rawJSON(`{}`)})
	}},
	{"worker fail dead", func(t *testing.T, b *bundle, id int64) {
		b.complete(t, id, tasks.Outcome{Err: "boom", Dead: true})
	}},
	{"worker last attempt", func(t *testing.T, b *bundle, id int64) {
		b.exec(t, `UPDATE tasks SET max_attempts = 1 WHERE id = ?`, id)
		b.complete(t, id, tasks.Outcome{Err: "boom"})
	}},
	{"cancel", func(t *testing.T, b *bundle, id int64) {
		if _, err := b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: id}); err != nil {
			t.Fatal(err)
		}
	}},
}

// complete claims task id as a worker and ends the claim with o in Complete.
func (b *bundle) complete(t *testing.T, id int64, o tasks.Outcome) {
	t.Helper()
	c := b.claim(t, id, "worker-1", 0, time.Minute)
	o.TaskID, o.Fence, o.Holder = id, c.Fence, "worker-1"
	got, err := b.store.Complete(b.ctx, []tasks.Outcome{o})
	if err != nil || got[0].Err != nil {
		t.Fatalf("complete task %d: %v, %+v", id, err, got)
	}
}

// TestKeyHoldLive: a key held only while live is free once its task ends, by
// every statement that ends one; while the task is pending or assigned it dedups,
// and a key held forever (the default) still does after the end.
func TestKeyHoldLive(t *testing.T) {
	t.Parallel()
	for _, e := range keyEnds {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, store.Config{})
			first := b.insertKeyed(t, "live", tasks.KeyHoldLive)
			forever := b.insertKeyed(t, "forever", "")
			for _, key := range []string{"live", "forever"} {
				if in := b.insertKeyed(t, key, tasks.KeyHoldLive); in.Created {
					t.Fatalf("key %s of a pending task made a second task", key)
				}
			}
			e.end(t, b, first.ID)
			e.end(t, b, forever.ID)
			if st := b.task(t, first.ID).Status; st == tasks.StatusPending || st == tasks.StatusAssigned {
				t.Fatalf("task still %s", st)
			}
			again := b.insertKeyed(t, "live", tasks.KeyHoldLive)
			if !again.Created || again.ID == first.ID {
				t.Errorf("insert of a freed key = %+v, want a new task", again)
			}
			if in := b.insertKeyed(t, "live", ""); in.Created || in.ID != again.ID {
				t.Errorf("insert of the key the new task holds = %+v, want task %d", in, again.ID)
			}
			if in := b.insertKeyed(t, "forever", tasks.KeyHoldLive); in.Created || in.ID != forever.ID {
				t.Errorf("insert of a key held forever = %+v, want task %d", in, forever.ID)
			}
			page, err := b.store.ListTasks(b.ctx, tasks.ListParams{Key: "live"})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Tasks) != 2 || page.Tasks[0].ID != again.ID || page.Tasks[1].ID != first.ID {
				t.Errorf("list by key = %+v, want tasks %d then %d", page.Tasks, again.ID, first.ID)
			}
		})
	}
}

// TestKeyHoldPeriod: a key held for a period dedups after its task ended until the
// period has passed and the sweeper's pass frees it.
func TestKeyHoldPeriod(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	first := b.insertKeyed(t, "p", tasks.KeyHoldFor(time.Second))
	long := b.insertKeyed(t, "long", tasks.KeyHoldFor(time.Hour))
	b.submitOne(t, first.ID, "worker-1", 0, `{}`)
	b.submitOne(t, long.ID, "worker-1", 0, `{}`)
	if in := b.insertKeyed(t, "p", ""); in.Created {
		t.Fatal("a key within its period after the end made a new task")
	}
	if n, err := b.store.FreeKeys(b.ctx, 0); err != nil || n != 0 {
		t.Fatalf("free keys within the period = %d, %v; want 0", n, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if in := b.insertKeyed(t, "p", ""); in.Created {
		t.Fatal("a key whose period passed was free before the sweeper's pass")
	}
	if n, err := b.store.FreeKeys(b.ctx, 0); err != nil || n != 1 {
		t.Fatalf("free keys after the period = %d, %v; want 1", n, err)
	}
	if in := b.insertKeyed(t, "p", ""); !in.Created {
		t.Error("a key freed after its period did not make a new task")
	}
	if in := b.insertKeyed(t, "long", ""); in.Created {
		t.Error("a key within a longer period made a new task")
	}
	if n, err := b.store.FreeKeys(b.ctx, 0); err != nil || n != 0 {
		t.Errorf("free keys again = %d, %v; want 0", n, err)
	}
	if _, err := b.store.FreeKeys(b.ctx, tasks.RecycleLimitMax+1); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("free keys with a limit too big: %v, want ErrInvalid", err)
	}
}

// TestKeyHoldRequeue: requeueing a dead task takes its key again, unless another
// task took it meanwhile (ErrDuplicate, nothing changed).
func TestKeyHoldRequeue(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	a := b.insertKeyed(t, "a", tasks.KeyHoldLive)
	c := b.insertKeyed(t, "c", tasks.KeyHoldLive)
	b.dead(t, a.ID, "worker-1")
	b.dead(t, c.ID, "worker-1")
	if _, err := b.store.Requeue(b.ctx, tasks.ChangeParams{TaskID: a.ID}); err != nil {
		t.Fatal(err)
	}
	if in := b.insertKeyed(t, "a", ""); in.Created || in.ID != a.ID {
		t.Errorf("insert of the key of a requeued task = %+v, want task %d", in, a.ID)
	}
	taker := b.insertKeyed(t, "c", "")
	if !taker.Created {
		t.Fatal("the key of a dead live-only task was not free")
	}
	_, err := b.store.Requeue(b.ctx, tasks.ChangeParams{TaskID: c.ID})
	wantErr(t, "requeue of a task whose key another holds", err, tasks.ErrDuplicate)
	if st := b.task(t, c.ID).Status; st != tasks.StatusDead {
		t.Errorf("task %d is %s after a refused requeue, want dead", c.ID, st)
	}
}

// TestKeyHoldFreedKeyRace: callers racing to insert a key that was freed make one
// task, and all of them get its id.
func TestKeyHoldFreedKeyRace(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	const callers, rounds = 6, 10
	for round := range rounds {
		key := fmt.Sprintf("race-%d", round)
		old := b.insertKeyed(t, key, tasks.KeyHoldLive)
		b.dead(t, old.ID, "worker-1")
		got := make([]tasks.Inserted, callers)
		errs := make([]error, callers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				<-start
				var ins []tasks.Inserted
				ins, errs[c] = b.store.Insert(b.ctx, []tasks.NewTask{{Category: "news", Title: "t", Key: key, KeyHold: tasks.KeyHoldLive}})
				if errs[c] == nil {
					got[c] = ins[0]
				}
			})
		}
		close(start)
		wg.Wait()
		created := 0
		for c := range callers {
			if errs[c] != nil {
				t.Fatalf("round %d, caller %d: %v", round, c, errs[c])
			}
			if got[c].ID != got[0].ID || got[c].ID == old.ID {
				t.Errorf("round %d: caller %d got task %d, caller 0 %d, the old one is %d", round, c, got[c].ID, got[0].ID, old.ID)
			}
			if got[c].Created {
				created++
			}
		}
		if created != 1 {
			t.Errorf("round %d: %d callers made the task, want 1", round, created)
		}
		if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE task_key = ? AND status = 'pending'`, key); n != 1 {
			t.Errorf("round %d: %d live tasks with the key, want 1", round, n)
		}
	}
}

func TestKeyHoldValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	for _, c := range []struct {
		task tasks.NewTask
		want string
	}{
		{tasks.NewTask{KeyHold: tasks.KeyHoldLive}, "key_hold needs a key"},
		{tasks.NewTask{Key: "k", KeyHold: "always"}, "key_hold must be"},
		{tasks.NewTask{Key: "k", KeyHold: "1500ms"}, "key_hold must be"},
		{tasks.NewTask{Key: "k", KeyHold: "0s"}, "key_hold must be"},
		{tasks.NewTask{Key: "k", KeyHold: "-1h"}, "key_hold must be"},
		{tasks.NewTask{Key: "k", KeyHold: tasks.KeyHoldFor(tasks.MaxKeyHold + time.Second)}, "key_hold must be"},
	} {
		c.task.Category, c.task.Title = "news", "t"
		_, err := b.store.Insert(b.ctx, []tasks.NewTask{c.task})
		wantErr(t, c.want, err, tasks.ErrInvalid)
	}
	for _, h := range []tasks.KeyHold{"", tasks.KeyHoldForever, tasks.KeyHoldLive, "1s", tasks.KeyHoldFor(tasks.MaxKeyHold)} {
		if _, err := b.store.Insert(b.ctx, []tasks.NewTask{{Category: "news", Title: "t", Key: "ok-" + string(h), KeyHold: h}}); err != nil {
			t.Errorf("key_hold %q: %v", h, err)
		}
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != 5 {
		t.Errorf("%d tasks, want the 5 valid ones", n)
	}
}

// TestKeyHoldPlans: the sweeper's pass reads the range of tasks_key_free that has
// passed, and the insert's lookup of held keys is a dive per key into
// tasks_key_held, whatever the tasks that had the keys before.
func TestKeyHoldPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	for i := range 50 {
		in := b.insertKeyed(t, fmt.Sprintf("k%d", i%5), tasks.KeyHoldLive)
		if in.Created {
			b.dead(t, in.ID, "worker-1")
		}
		b.insertKeyed(t, fmt.Sprintf("p%d", i), tasks.KeyHoldFor(time.Hour))
	}
	b.exec(t, `ANALYZE TABLE tasks`)
	for _, c := range []struct {
		name, query, index string
		args               []any
	}{
		{"free keys", store.FreeKeysSQL, "tasks_key_free", []any{100}},
		{"held keys", strings.Replace(store.ExistingKeysSQL, "IN (?)", "IN (?, ?)", 1), "tasks_key_held", []any{"k1", "k2"}},
	} {
		plan := b.explain(t, c.query, c.args...)
		noFullScans(t, c.name, plan)
		if len(plan) != 1 || plan[0].Key != c.index || plan[0].Type != "range" {
			t.Errorf("%s: plan %+v, want a range of %s", c.name, plan, c.index)
		}
	}
	if n, err := b.store.FreeKeys(b.ctx, 0); err != nil || n != 0 {
		t.Errorf("free keys = %d, %v; want 0 (every period runs for an hour)", n, err)
	}
}

// TestKeyColumnsOfATaskWithoutKey: key_held and key_free_at stay NULL through a
// task's life when it has no key, so claims, recycles and ends of such tasks move
// no entry in tasks_key_held or tasks_key_free; with a key held only while live,
// only the end moves one.
func TestKeyColumnsOfATaskWithoutKey(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	cols := func(id int64) string {
		t.Helper()
		var row struct {
			Held *string    `db:"key_held"`
			Free *time.Time `db:"key_free_at"`
		}
		if err := b.db.GetContext(b.ctx, &row, `SELECT key_held, key_free_at FROM tasks WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("held=%v free=%v", row.Held != nil, row.Free != nil)
	}
	plain := b.insert(t, tasks.NewTask{Category: "news", Title: "a"}, tasks.NewTask{Category: "news", Title: "b"})
	live := b.insertKeyed(t, "live", tasks.KeyHoldLive).ID
	period := b.insertKeyed(t, "period", tasks.KeyHoldFor(time.Hour)).ID
	want := func(id int64, when, w string) {
		t.Helper()
		if got := cols(id); got != w {
			t.Errorf("task %d %s: %s, want %s", id, when, got, w)
		}
	}
	for _, id := range []int64{plain[0], live, period} {
		b.claim(t, id, "w", 0, time.Minute)
		b.expireLease(t, id)
	}
	if _, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{}); err != nil {
		t.Fatal(err)
	}
	want(plain[0], "recycled", "held=false free=false")
	want(live, "recycled", "held=true free=false")
	want(period, "recycled", "held=true free=false")
	for _, id := range []int64{plain[0], live, period} {
		b.submitOne(t, id, "w", 0, `{}`)
	}
	b.dead(t, plain[1], "w")
	want(plain[0], "done", "held=false free=false")
	want(plain[1], "dead", "held=false free=false")
	want(live, "done", "held=false free=false")
	want(period, "done", "held=true free=true")
}
