package store_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/roundtrip"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// refusedRoundTrips checks the cost of a completion batch with a refused
// member: its one transaction, and the read of whether a cancel ended the
// refused claims.
func refusedRoundTrips(t *testing.T, what string, cc *roundtrip.Connector, before roundtrip.Counts) {
	t.Helper()
	if d := cc.Counts().Sub(before); d.RoundTrips != 2 || d.Commits != 1 {
		t.Fatalf("%s: %d round trips and %d commits, want 2 (the batch, then the read of its refusals) and 1", what, d.RoundTrips, d.Commits)
	}
}

// A claim or submit whose context ends part way (the driver then drops the
// connection mid-batch) commits all of its statements or none.
func TestCanceledWritesAreAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	const n = 300
	var nts []tasks.NewTask
	for i := range n {
		nts = append(nts, tasks.NewTask{Category: "news", Title: "t", Priority: i % 3})
	}
	ids := b.insert(t, nts...)
	canceled := 0
	for i, id := range ids {
		holder := "w" + string(rune('a'+i%26))
		ctx, cancel := context.WithTimeout(b.ctx, time.Duration(rand.IntN(1500))*time.Microsecond)
		c, err := b.store.Claim(ctx, tasks.ClaimParams{TaskID: id, Fence: 0, Status: tasks.StatusPending, Holder: holder, Lease: time.Minute})
		cancel()
		if err != nil {
			canceled++
			continue
		}
		ctx, cancel = context.WithTimeout(b.ctx, time.Duration(rand.IntN(1500))*time.Microsecond)
		_, err = b.store.Submit(ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: holder, Result: rawJSON(`{}`)})
		cancel()
		if err != nil {
			canceled++
		}
	}
	t.Logf("%d of %d claims or submits ended by their context", canceled, 2*n)
	var bad []struct {
		ID     int64  `db:"id"`
		Status string `db:"status"`
		Fence  int64  `db:"fence"`
		Events int    `db:"events"`
		Result int    `db:"results"`
	}
	if err := b.db.SelectContext(b.ctx, &bad, `SELECT t.id, t.status, t.fence,
		(SELECT COUNT(*) FROM task_events e WHERE e.task_id = t.id) AS events,
		(SELECT COUNT(*) FROM task_results r WHERE r.task_id = t.id) AS results
		FROM tasks t HAVING NOT (
			(status = 'pending' AND fence = 0 AND events = 0 AND results = 0) OR
			(status = 'assigned' AND fence = 1 AND events = 1 AND results = 0) OR
			(status = 'done' AND fence = 1 AND events = 2 AND results = 1))`); err != nil {
		t.Fatal(err)
	}
	for _, r := range bad {
		t.Errorf("half-written: %+v", r)
	}
}
