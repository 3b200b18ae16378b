package store_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestInsertKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ins, err := b.store.Insert(b.ctx, []tasks.NewTask{
		{Category: "news", Title: "a", Key: "k-a"},
		{Category: "news", Title: "no key"},
		{Category: "news", Title: "a again", Key: "k-a"},
		{Category: "news", Title: "b", Key: "k-b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ins[0].Created || !ins[1].Created || ins[2].Created || !ins[3].Created || ins[2].ID != ins[0].ID {
		t.Fatalf("first insert = %+v, want created, created, the first one's id, created", ins)
	}
	if got := b.task(t, ins[0].ID); got.Key != "k-a" || got.Title != "a" {
		t.Errorf("task k-a = %+v", got)
	}
	if got := b.task(t, ins[1].ID); got.Key != "" {
		t.Errorf("task without a key has key %q", got.Key)
	}

	// Again: the keyed tasks exist and come back as they are; the unkeyed one is new.
	again, err := b.store.Insert(b.ctx, []tasks.NewTask{
		{Category: "news", Title: "b changed", Key: "k-b"},
		{Category: "news", Title: "no key"},
		{Category: "news", Title: "c", Key: "k-c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if again[0].ID != ins[3].ID || again[0].Created || again[0].Slots != nil || !again[1].Created || !again[2].Created {
		t.Errorf("second insert = %+v, want k-b existing (id %d), two created", again, ins[3].ID)
	}
	if got := b.task(t, ins[3].ID); got.Title != "b" {
		t.Errorf("existing task k-b changed its title to %q", got.Title)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != 5 {
		t.Errorf("%d tasks, want 5", n)
	}
	// InsertTasks returns the existing ids too.
	ids, err := b.store.InsertTasks(b.ctx, []tasks.NewTask{{Category: "news", Title: "c?", Key: "k-c"}})
	if err != nil || len(ids) != 1 || ids[0] != again[2].ID {
		t.Errorf("InsertTasks of an existing key = %v, %v; want [%d]", ids, err, again[2].ID)
	}
}

func TestInsertKeyValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	for _, c := range []struct {
		task tasks.NewTask
		want string
	}{
		{tasks.NewTask{Key: strings.Repeat("é", tasks.MaxKeyLen+1)}, "key must be 1..255 characters"},
		{tasks.NewTask{Key: "bad\xff"}, "key must be valid UTF-8"},
		{tasks.NewTask{Key: " padded"}, "key must not start or end with spaces"},
		{tasks.NewTask{Key: "padded "}, "key must not start or end with spaces"},
		{tasks.NewTask{RunAfter: time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC)}, "run_after must be from 1000-01-01 to 9999-12-31"},
		{tasks.NewTask{DueAt: time.Date(9999, 12, 31, 1, 0, 0, 0, time.UTC)}, "due_at must be from 1000-01-01 to 9999-12-31"},
	} {
		c.task.Category, c.task.Title = "news", "t"
		_, err := b.store.Insert(b.ctx, []tasks.NewTask{{Category: "news", Title: "ok", Key: "fine"}, c.task})
		wantErr(t, c.want, err, tasks.ErrInvalid)
		if err == nil || !strings.Contains(err.Error(), "task 1: invalid input: "+c.want) {
			t.Errorf("error %v, want it to name task 1 and say %q", err, c.want)
		}
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != 0 {
		t.Errorf("%d tasks inserted by refused calls", n)
	}
	// The longest key fits.
	long := strings.Repeat("é", tasks.MaxKeyLen)
	if _, err := b.store.Insert(b.ctx, []tasks.NewTask{{Category: "news", Title: "t", Key: long}}); err != nil {
		t.Errorf("a key of %d characters: %v", tasks.MaxKeyLen, err)
	}
}

// TestInsertKeysConcurrently runs inserts of overlapping keys at the same time, in
// the same order and in opposite orders (whose duplicate checks can deadlock): each
// key makes exactly one task, exactly one caller is told it made it, the others get
// its id, and no call fails.
func TestInsertKeysConcurrently(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"same order", "opposite orders"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			for _, returning := range []bool{true, false} {
				b := setup(t, store.Config{InsertBatchSize: 7})
				store.SetReturning(b.store, returning)
				const keys, callers, rounds = 40, 4, 5
				for round := range rounds {
					batch := make([]tasks.NewTask, keys)
					for i := range batch {
						batch[i] = tasks.NewTask{Category: "news", Title: "t", Key: fmt.Sprintf("r%d-k%02d", round, i)}
					}
					results := make([][]tasks.Inserted, callers)
					errs := make([]error, callers)
					var wg sync.WaitGroup
					start := make(chan struct{})
					for c := range callers {
						mine := slices.Clone(batch)
						if mode == "opposite orders" && c%2 == 1 {
							slices.Reverse(mine)
						}
						wg.Go(func() {
							<-start
							results[c], errs[c] = b.store.Insert(b.ctx, mine)
							if mode == "opposite orders" && c%2 == 1 {
								slices.Reverse(results[c])
							}
						})
					}
					close(start)
					wg.Wait()
					for c, err := range errs {
						if err != nil {
							t.Fatalf("returning %v, round %d, caller %d: %v", returning, round, c, err)
						}
					}
					for i := range keys {
						created := 0
						for c := range callers {
							if results[c][i].ID != results[0][i].ID {
								t.Errorf("key %d: caller %d got id %d, caller 0 got %d", i, c, results[c][i].ID, results[0][i].ID)
							}
							if results[c][i].Created {
								created++
							}
						}
						if created != 1 {
							t.Errorf("returning %v, round %d, key %d: %d callers were told they made it, want 1", returning, round, i, created)
						}
					}
					if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE task_key LIKE ?`, fmt.Sprintf("r%d-%%", round)); n != keys {
						t.Errorf("round %d: %d tasks, want %d", round, n, keys)
					}
				}
				t.Logf("returning %v: %d transactions started over on a key conflict or deadlock", returning, store.LockConflicts(b.store))
			}
		})
	}
}

// TestCandidatesDueOrder: within a priority, tasks with a due_at come first,
// earliest first, then the others, oldest first; run_after in the future keeps a
// task out of the candidates and both claim paths refuse it.
func TestCandidatesDueOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	day := func(d int) time.Time { return time.Date(2030, 1, d, 0, 0, 0, 0, time.UTC) }
	ids := b.insert(t,
		tasks.NewTask{Category: "news", Priority: 1, Title: "none"},
		tasks.NewTask{Category: "news", Priority: 1, Title: "due 3", DueAt: day(3)},
		tasks.NewTask{Category: "news", Priority: 1, Title: "due 2", DueAt: day(2)},
		tasks.NewTask{Category: "news", Priority: 0, Title: "due 1, low", DueAt: day(1)},
		tasks.NewTask{Category: "news", Priority: 1, Title: "none, newer"},
		tasks.NewTask{Category: "news", Priority: 5, Title: "future", RunAfter: time.Now().Add(time.Hour)},
	)
	cs, err := b.store.Candidates(b.ctx, tasks.CandidatesParams{Categories: []string{"news"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, c := range cs {
		got = append(got, c.ID)
	}
	if want := []int64{ids[2], ids[1], ids[0], ids[4], ids[3]}; !equalIDs(got, want) {
		t.Errorf("candidates %v, want %v", got, want)
	}
	if !cs[0].Due.Equal(day(2)) || !cs[2].Due.Equal(tasks.NoDue) {
		t.Errorf("candidate due times %v and %v, want %v and NoDue", cs[0].Due, cs[2].Due, day(2))
	}
	if got := b.task(t, ids[1]); got.DueAt == nil || !got.DueAt.Equal(day(3)) {
		t.Errorf("task due_at = %v, want %v", got.DueAt, day(3))
	}
	for _, status := range []tasks.Status{tasks.StatusPending, ""} {
		_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: ids[5], Status: status, Holder: "w", Lease: time.Minute})
		wantErr(t, fmt.Sprintf("claim (status %q) before run_after", status), err, tasks.ErrStale)
	}
	b.exec(t, `UPDATE tasks SET run_after = NOW(3) WHERE id = ?`, ids[5])
	b.claim(t, ids[5], "w", 0, time.Minute)
}
