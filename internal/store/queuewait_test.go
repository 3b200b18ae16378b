package store_test

import (
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// A claim's queue wait runs from when its task became claimable, on the database
// clock: a claimed task's run_after says when (the later of the run_after and the
// updated_at it had while pending, or the lease end of a claim taken over), its
// assigned_at when it was claimed.
func TestClaimKeepsWhenTheTaskBecameClaimable(t *testing.T) {
	t.Parallel()
	// Made pending 10 s ago, claimable since 20 s (a release, a recycle, a
	// stage's submit: run_after stays in the past); or made pending 10 s ago
	// with its backoff ended 5 s ago (a retry).
	cases := map[string]struct {
		set  string
		want time.Duration
	}{
		"made pending after run_after": {`run_after = NOW(3) - INTERVAL 20 SECOND, updated_at = NOW(3) - INTERVAL 10 SECOND`, 10 * time.Second},
		"run_after after made pending": {`run_after = NOW(3) - INTERVAL 5 SECOND, updated_at = NOW(3) - INTERVAL 10 SECOND`, 5 * time.Second},
	}
	claims := map[string]func(b *bundle, t *testing.T, id int64) *tasks.Claim{
		"batch":   func(b *bundle, t *testing.T, id int64) *tasks.Claim { return claimAs(b, t, id, tasks.StatusPending) },
		"locking": func(b *bundle, t *testing.T, id int64) *tasks.Claim { return claimAs(b, t, id, "") },
		"worker batch": func(b *bundle, t *testing.T, id int64) *tasks.Claim {
			rs, err := b.store.ClaimBatch(b.ctx, b.claimParams(t, id))
			if err != nil || rs[0].Err != nil {
				t.Fatalf("claim batch: %v, %+v", err, rs)
			}
			return rs[0].Claim
		},
	}
	b := setup(t, store.Config{})
	for name, c := range cases {
		for path, claim := range claims {
			t.Run(name+"/"+path, func(t *testing.T) {
				id := b.insertOne(t, "queuewait", 0)
				b.exec(t, `UPDATE tasks SET `+c.set+` WHERE id = ?`, id)
				got := claim(b, t, id)
				// The claim's own statement is a few milliseconds at most.
				if wait := got.AssignedAt.Sub(got.Task.RunAfter); wait < c.want || wait > c.want+2*time.Second {
					t.Errorf("queue wait (assigned_at %v - run_after %v) = %v, want %v", got.AssignedAt, got.Task.RunAfter, wait, c.want)
				}
				if stored := b.task(t, id); !stored.RunAfter.Equal(got.Task.RunAfter) {
					t.Errorf("stored run_after %v, the claim's %v", stored.RunAfter, got.Task.RunAfter)
				}
			})
		}
	}
	t.Run("taken over", func(t *testing.T) {
		id := b.insertOne(t, "queuewait", 0)
		b.claim(t, id, "worker:a", 0, time.Minute)
		b.exec(t, `UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 7 SECOND WHERE id = ?`, id)
		lease := *b.task(t, id).LeaseExpiresAt
		got, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: 1, Holder: "worker:b", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if !got.TookOver || !got.Task.RunAfter.Equal(lease) {
			t.Errorf("took over %v, run_after %v, want the passed lease %v", got.TookOver, got.Task.RunAfter, lease)
		}
		if stored := b.task(t, id); !stored.RunAfter.Equal(lease) {
			t.Errorf("stored run_after %v, want the passed lease %v", stored.RunAfter, lease)
		}
	})
	// A release makes the task claimable at the release: the next claim's
	// queue wait starts there, not at the insert.
	t.Run("released", func(t *testing.T) {
		id := b.insertOne(t, "queuewait", 0)
		b.exec(t, `UPDATE tasks SET run_after = NOW(3) - INTERVAL 1 HOUR, created_at = NOW(3) - INTERVAL 1 HOUR, updated_at = NOW(3) - INTERVAL 1 HOUR WHERE id = ?`, id)
		first := b.claim(t, id, "worker:a", 0, time.Minute)
		if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: first.Fence, Holder: "worker:a"}); err != nil {
			t.Fatal(err)
		}
		second := claimAs(b, t, id, tasks.StatusPending)
		if second.Task.RunAfter.Before(first.AssignedAt) || second.AssignedAt.Sub(second.Task.RunAfter) > time.Minute {
			t.Errorf("claimable since %v after a release following a claim at %v, want at the release", second.Task.RunAfter, first.AssignedAt)
		}
	})
}

// claimAs claims task id for a worker, telling the store its status was status.
func claimAs(b *bundle, t *testing.T, id int64, status tasks.Status) *tasks.Claim {
	t.Helper()
	task := b.task(t, id)
	c, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: task.Fence, Status: status, Holder: "worker:q", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
