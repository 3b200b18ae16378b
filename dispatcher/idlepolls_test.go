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

// parkEditors starts n editors of cat long-polling d for a minute and waits
// until every one is parked; the returned channel gets each one's answer,
// and stop ends those still waiting.
func parkEditors(t *testing.T, b *bundle, n int, cat string) (answers <-chan error, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, n)
	for i := range n {
		ed := b.Editor(t, fmt.Sprintf("ed%d", i), cat)
		go func() {
			_, err := b.D.Next(ctx, ed, time.Minute)
			out <- err
		}()
	}
	testenv.Eventually(t, 20*time.Second, "every caller parked", func() bool { return b.D.IdleWaiters(cat) == n })
	return out, cancel
}

// Parked long polls with no work cost a process one look per category per
// poll interval, whatever their number: counted in candidate reads, the
// store queries a look makes (before, each waiter looked every interval).
func TestLongPollIdleLooksOncePerPollInterval(t *testing.T) {
	t.Parallel()
	const (
		n     = 50
		every = 50 * time.Millisecond
	)
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{PollInterval: every, MaxWait: time.Hour}})
	_, stop := parkEditors(t, b, n, "news")
	defer stop()
	r0, start := b.D.Stats().CandidateReads, time.Now()
	time.Sleep(40 * every)
	reads, elapsed := b.D.Stats().CandidateReads-r0, time.Since(start)
	// Polls come every interval spread over [every/2, 3*every/2): at most
	// 2 per interval, and a few looks in flight at either end.
	if limit := 2*int64(elapsed/every) + 4; reads > limit {
		t.Fatalf("%d candidate reads in %v with %d polls parked and no work, want at most %d (one per poll interval of %v)",
			reads, elapsed.Round(time.Millisecond), n, limit, every)
	}
	if reads == 0 {
		t.Fatalf("no candidate read in %v: the parked polls never looked", elapsed.Round(time.Millisecond))
	}
	// None was lost: each is parked again once the look it may be making
	// (a poll's, every interval) ends.
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("all %d callers parked after the idle period", n), func() bool {
		return b.D.IdleWaiters("news") == n
	})
}

// Tasks that arrive with nobody told (here added to the store behind the
// dispatcher's back) are found by a poll, and a poll's look that found one
// wakes more: a backlog is taken in a few poll intervals, not one task per
// interval.
func TestLongPollPollFindsUnannouncedBacklog(t *testing.T) {
	t.Parallel()
	const (
		n      = 30
		tasksN = 16
	)
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{PollInterval: time.Second, MaxWait: time.Hour}})
	answers, stop := parkEditors(t, b, n, "news")
	defer stop()
	ts := make([]tasks.NewTask, tasksN)
	for i := range ts {
		ts[i] = tasks.NewTask{Category: "news", Title: fmt.Sprintf("quiet #%d", i)}
	}
	if _, err := b.Store.Insert(context.Background(), ts); err != nil {
		t.Fatal(err)
	}
	p0 := b.D.HubPolls()
	for i := range tasksN {
		select {
		case err := <-answers:
			if err != nil {
				t.Fatalf("next: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d unannounced tasks handed out in a minute", i, tasksN)
		}
	}
	// One poll finds the first; the looks it passes on find the rest.
	if polls := b.D.HubPolls() - p0; polls > 4 {
		t.Fatalf("%d polls to hand out %d unannounced tasks, want at most 4", polls, tasksN)
	}
	select {
	case err := <-answers:
		t.Fatalf("a caller answered with %d tasks for %d callers: %v", tasksN, n, err)
	default:
	}
}
