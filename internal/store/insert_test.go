package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestInsertTasksReturnsIDsInInputOrder(t *testing.T) {
	t.Parallel()
	for _, returning := range []bool{true, false} {
		t.Run(fmt.Sprintf("returning=%v", returning), func(t *testing.T) {
			t.Parallel()
			b := setup(t, store.Config{InsertBatchSize: 7})
			store.SetReturning(b.store, returning)

			// Concurrent inserters interleave their batches; every id must still point
			// at the task that was passed at that index.
			const writers, perWriter = 6, 40
			var wg sync.WaitGroup
			idsOf := make([][]int64, writers)
			errs := make([]error, writers)
			for w := range writers {
				wg.Go(func() {
					nts := make([]tasks.NewTask, perWriter)
					for i := range nts {
						nts[i] = tasks.NewTask{Category: "c", Priority: i % 3, Title: fmt.Sprintf("w%d-%d", w, i),
							Payload: json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}
					}
					idsOf[w], errs[w] = b.store.InsertTasks(b.ctx, nts)
				})
			}
			wg.Wait()
			seen := map[int64]bool{}
			for w := range writers {
				if errs[w] != nil {
					t.Fatalf("writer %d: %v", w, errs[w])
				}
				if len(idsOf[w]) != perWriter {
					t.Fatalf("writer %d got %d ids", w, len(idsOf[w]))
				}
				for i, id := range idsOf[w] {
					if seen[id] {
						t.Fatalf("id %d returned twice", id)
					}
					seen[id] = true
					got := b.task(t, id)
					if want := fmt.Sprintf("w%d-%d", w, i); got.Title != want {
						t.Fatalf("writer %d index %d: id %d has title %q, want %q", w, i, id, got.Title, want)
					}
				}
			}
			if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != writers*perWriter {
				t.Errorf("%d rows, want %d", n, writers*perWriter)
			}
		})
	}
}

func TestInsertTasksStoresFieldsAndDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ids := b.insert(t,
		tasks.NewTask{Category: "news", Priority: -3, Title: "Hello wörld", Payload: json.RawMessage(` {"a": [1, 2]} `), MaxAttempts: 9},
		tasks.NewTask{Category: "sport", Title: "t2"},
	)
	got := b.task(t, ids[0])
	var payload map[string][]int
	if err := json.Unmarshal(got.Payload, &payload); err != nil || len(payload["a"]) != 2 {
		t.Errorf("payload = %s (%v)", got.Payload, err)
	}
	if got.Category != "news" || got.Priority != -3 || got.Title != "Hello wörld" || got.MaxAttempts != 9 ||
		got.Status != tasks.StatusPending || got.Fence != 0 || got.Attempts != 0 || got.Holder != "" ||
		got.EditorID != 0 || got.AssignedAt != nil || got.LeaseExpiresAt != nil || got.DoneAt != nil {
		t.Errorf("task = %+v", got)
	}
	second := b.task(t, ids[1])
	if string(second.Payload) != "{}" || second.MaxAttempts != tasks.MaxAttemptsDefault || second.Priority != 0 {
		t.Errorf("defaults: payload %s, max_attempts %d, priority %d", second.Payload, second.MaxAttempts, second.Priority)
	}
	if _, err := b.store.GetTask(b.ctx, ids[1]+100); err == nil {
		t.Error("GetTask of an unknown id succeeded")
	} else {
		wantErr(t, "get unknown task", err, tasks.ErrNotFound)
	}
}

func TestInsertTasksValidationChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 2})
	b.insertOne(t, "news", 0)
	valid := tasks.NewTask{Category: "news", Title: "ok"}
	cases := map[string]tasks.NewTask{
		"category":     {Title: "t"},
		"title":        {Category: "news", Title: strings.Repeat("x", 513)},
		"payload":      {Category: "news", Title: "t", Payload: json.RawMessage(`"not an object"`)},
		"max_attempts": {Category: "news", Title: "t", MaxAttempts: -1},
	}
	for field, bad := range cases {
		// The bad task comes last, after full batches of valid ones.
		_, err := b.store.InsertTasks(b.ctx, []tasks.NewTask{valid, valid, valid, bad})
		wantErr(t, field, err, tasks.ErrInvalid)
		if err != nil && (!strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "task 3")) {
			t.Errorf("error %q does not name task 3 and field %s", err, field)
		}
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks`); n != 1 {
		t.Errorf("%d rows after invalid inserts, want 1", n)
	}
}
