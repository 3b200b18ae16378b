package dispatcher

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

// TestCandidatePoolMergesByDue: across categories, within a priority, the pool
// hands out tasks with a due time first, earliest first, then those without
// (tasks.NoDue), oldest first; and a contended category's spread keeps tasks
// of distinct due times in order.
func TestCandidatePoolMergesByDue(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2030, 1, d, 0, 0, 0, 0, time.UTC) }
	c := func(id int64, prio int, due time.Time) tasks.Candidate {
		return tasks.Candidate{ID: id, Priority: prio, Due: due, Status: tasks.StatusPending}
	}
	f := &fakeReads{cats: map[string][]tasks.Candidate{
		"news":  {c(1, 2, tasks.NoDue), c(2, 1, day(5)), c(3, 1, tasks.NoDue), c(4, 1, tasks.NoDue)},
		"sport": {c(10, 1, day(3)), c(11, 1, day(6)), c(12, 0, day(1))},
	}}
	p := newCandidatePool(8, f.read)
	var got []int64
	for range 7 {
		ps, err := p.take(context.Background(), []string{"news", "sport"}, 1, nil)
		if err != nil || len(ps) != 1 {
			t.Fatalf("take = %v, %v", pooledIDs(ps), err)
		}
		got = append(got, ps[0].ID)
	}
	if want := []int64{1, 10, 2, 11, 3, 4, 12}; !slices.Equal(got, want) {
		t.Errorf("handed out %v, want %v", got, want)
	}

	// Spread picks among candidates of the same priority and due time only.
	cs := []tasks.Candidate{c(1, 1, day(1)), c(2, 1, day(2)), c(3, 1, tasks.NoDue), c(4, 1, tasks.NoDue)}
	for range 50 {
		if i := spread(cs, 0, leftOut{}); i != 0 {
			t.Fatalf("spread from a task due on day 1 picked %d", cs[i].ID)
		}
		if i := spread(cs, 2, leftOut{}); i != 2 && i != 3 {
			t.Fatalf("spread from a task without a due time picked %d", cs[i].ID)
		}
	}
}
