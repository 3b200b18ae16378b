package dispatcher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// Many editors woken together, as many as tasks arrive: every one answered
// with a task of its own, within the wait (the poll interval is far beyond
// the test: a candidate one claim held and gave back must wake a waiter, or
// the one that came back empty-handed meanwhile waits for its poll), each
// claim fenced and recorded once. (The store sends claims that arrive
// together in groups: internal/store/group_test.go.)
func TestLongPollWokenEditorsAllAnswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{PollInterval: time.Hour, MaxWait: time.Hour}})
	const n = 60
	type result struct {
		ed    int64
		claim *tasks.Claim
		err   error
	}
	results := make(chan result, n)
	for i := range n {
		ed := b.Editor(t, fmt.Sprintf("ed%d", i), "news")
		go func() {
			c, err := b.D.Next(ctx, ed, time.Minute)
			results <- result{ed.EditorID, c, err}
		}()
	}
	testenv.Eventually(t, 20*time.Second, "every caller waiting", func() bool { return b.D.IdleWaiters("news") == n })
	ids := b.Add(t, "news", 0, n)
	seen := make(map[int64]bool)
	for range n {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("next: %v", r.err)
			}
			if seen[r.claim.Task.ID] || r.claim.Task.EditorID != r.ed {
				t.Fatalf("editor %d answered with task %d of editor %d (seen before: %v)", r.ed, r.claim.Task.ID, r.claim.Task.EditorID, seen[r.claim.Task.ID])
			}
			seen[r.claim.Task.ID] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d waiters answered", len(seen), n)
		}
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("task %d handed to nobody", id)
		}
	}
	var held, events int
	if err := b.DB.GetContext(ctx, &held, "SELECT COUNT(DISTINCT editor_id) FROM tasks WHERE status = 'assigned'"); err != nil {
		t.Fatal(err)
	}
	if err := b.DB.GetContext(ctx, &events, "SELECT COUNT(*) FROM task_events WHERE kind = 'claimed'"); err != nil {
		t.Fatal(err)
	}
	if held != n || events != n {
		t.Fatalf("%d editors hold a task and %d claims recorded, want %d and %d", held, events, n, n)
	}
}
