package dispatcher_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// N callers long-poll an empty category; M tasks arrive: exactly min(N, M)
// are answered, each with a task of its own, and the rest go on waiting.
// The poll interval is far beyond the test, so a lost wake-up shows as a
// caller that is never answered.
func TestLongPollAnswersAsManyWaitersAsTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{PollInterval: time.Hour, MaxWait: time.Hour}})
	const n = 12
	type result struct {
		claim *tasks.Claim
		err   error
	}
	results := make(chan result, n)
	for i := range n {
		ed := b.Editor(t, fmt.Sprintf("ed%d", i), "news")
		go func() {
			c, err := b.D.Next(ctx, ed, time.Minute)
			results <- result{c, err}
		}()
	}
	testenv.Eventually(t, 20*time.Second, "every caller waiting", func() bool { return b.D.IdleWaiters("news") == n })

	var got []int64
	answer := func(want int, ids []int64) {
		t.Helper()
		for range want {
			select {
			case r := <-results:
				if r.err != nil {
					t.Fatalf("next: %v", r.err)
				}
				if !slices.Contains(ids, r.claim.Task.ID) || slices.Contains(got, r.claim.Task.ID) {
					t.Fatalf("answered with task %d; want one of %v not handed out yet (%v)", r.claim.Task.ID, ids, got)
				}
				got = append(got, r.claim.Task.ID)
			case <-time.After(20 * time.Second):
				t.Fatalf("%d of %d waiters answered; the rest never woke", len(got), n)
			}
		}
	}
	first := b.Add(t, "news", 0, 5)
	answer(5, first)
	// The others are back waiting for a wake-up, none answered.
	testenv.Eventually(t, 20*time.Second, "the rest waiting", func() bool { return b.D.IdleWaiters("news") == n-5 })
	select {
	case r := <-results:
		t.Fatalf("a sixth caller answered with 5 tasks: %+v, %v", r.claim, r.err)
	default:
	}

	// More tasks than waiters: every waiter answered, the rest left pending.
	second := b.Add(t, "news", 0, 10)
	answer(n-5, second)
	var pending int
	if err := b.DB.GetContext(ctx, &pending, "SELECT COUNT(*) FROM tasks WHERE status = 'pending'"); err != nil {
		t.Fatal(err)
	}
	if pending != 15-n {
		t.Fatalf("%d tasks pending, want %d", pending, 15-n)
	}
	if b.D.Stats().Waiting > 0 {
		t.Fatal("a caller still waiting after every one was answered")
	}
}
