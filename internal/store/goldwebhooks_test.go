package store_test

import (
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// TestGoldCopiesEndWithoutOutbox: the claims of gold copies ended by the
// sweep's recycle, by the editor's next claim freeing an expired one, by a
// release, a skip, a forced release and the editor's disabling write their
// events and no webhook outbox record; a plain task's recycle beside them
// writes its record.
func TestGoldCopiesEndWithoutOutbox(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{WebhookEvents: tasks.WebhookEvents()})
	gold := b.insertOne(t, "news", 0)
	if _, err := b.store.MarkGold(b.ctx, gold, tasks.GoldAnswer{Decision: "approve"}, goldRules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	copyFor := func(ed *tasks.Editor) *tasks.Claim {
		t.Helper()
		c, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ed.ID, Holder: ed.Holder(), Categories: []string{"news"}, Lease: time.Minute})
		if err != nil {
			t.Fatalf("claim gold for %s: %v", ed.Name, err)
		}
		return c
	}
	var copies []int64
	// Recycled by the sweep.
	ann := b.editor(t, "ann", "news")
	c := copyFor(ann)
	copies = append(copies, c.Task.ID)
	plain := b.insertOne(t, "news", 0)
	b.claim(t, plain, "worker-1", 0, time.Minute)
	b.expireLease(t, c.Task.ID)
	b.expireLease(t, plain)
	if r, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{Limit: 10}); err != nil || len(r) != 2 {
		t.Fatalf("recycle = %v, %v; want the copy and the plain task", r, err)
	}
	// Freed by the editor's next claim.
	bob := b.editor(t, "bob", "news")
	c = copyFor(bob)
	copies = append(copies, c.Task.ID)
	b.expireLease(t, c.Task.ID)
	next := b.insertOne(t, "news", 0)
	b.claim(t, next, bob.Holder(), bob.ID, time.Minute)
	// Released, skipped, forced, revoked by the disabling.
	for i, end := range []func(ed *tasks.Editor, c *tasks.Claim) error{
		func(ed *tasks.Editor, c *tasks.Claim) error {
			_, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: ed.Holder()})
			return err
		},
		func(ed *tasks.Editor, c *tasks.Claim) error {
			_, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: ed.Holder(), Skip: true})
			return err
		},
		func(_ *tasks.Editor, c *tasks.Claim) error {
			_, err := b.store.ForceRelease(b.ctx, c.Task.ID)
			return err
		},
		func(ed *tasks.Editor, _ *tasks.Claim) error {
			r, err := b.store.DisableEditor(b.ctx, ed.ID)
			if err == nil && len(r) != 1 {
				t.Errorf("disable revoked %d claims, want the copy", len(r))
			}
			return err
		},
	} {
		ed := b.editor(t, "ed"+string(rune('a'+i)), "news")
		c := copyFor(ed)
		copies = append(copies, c.Task.ID)
		if err := end(ed, c); err != nil {
			t.Fatalf("end %d: %v", i, err)
		}
	}
	for _, id := range copies {
		if n := b.count(t, "SELECT COUNT(*) FROM task_events WHERE task_id = ? AND kind IN ('recycled', 'released', 'skipped')", id); n != 1 {
			t.Errorf("copy %d: %d end events, want 1", id, n)
		}
		if n := b.count(t, "SELECT COUNT(*) FROM webhook_outbox WHERE task_id = ?", id); n != 0 {
			t.Errorf("copy %d: %d webhook outbox records, want none", id, n)
		}
	}
	if n := b.count(t, "SELECT COUNT(*) FROM webhook_outbox WHERE task_id = ? AND kind = 'expired'", plain); n != 1 {
		t.Errorf("plain task: %d expired outbox records, want 1", n)
	}
}
