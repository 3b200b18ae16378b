package store_test

import (
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestDisableEditor(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ann := b.editor(t, "ann", "news")
	bob := b.editor(t, "bob", "news")
	ids := b.insert(t, tasks.NewTask{Category: "news", Title: "1"}, tasks.NewTask{Category: "news", Title: "2"},
		tasks.NewTask{Category: "news", Title: "3"})
	c := b.claim(t, ids[0], ann.Holder(), ann.ID, time.Minute)

	all, err := b.store.DisableEditor(b.ctx, ann.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("revoked %d claims, want 1", len(all))
	}
	revoked := all[0]
	if revoked.TaskID != ids[0] || revoked.Fence != c.Fence || revoked.Holder != ann.Holder() ||
		revoked.Category != "news" || revoked.Status != tasks.StatusPending || revoked.AssignedAt.IsZero() {
		t.Fatalf("revoked = %+v, want task %d fence %d of %s", revoked, ids[0], c.Fence, ann.Holder())
	}
	task := b.task(t, ids[0])
	if task.Status != tasks.StatusPending || task.Fence != c.Fence+1 || task.EditorID != 0 || task.Holder != "" {
		t.Errorf("task after the disable: %+v; want pending, fence bumped, no holder", task)
	}
	evs := b.events(t, ids[0])
	if last := evs[len(evs)-1]; last.Kind != tasks.EventReleased || last.Fence != c.Fence || last.EditorID != ann.ID || last.Detail != "forced: editor disabled" {
		t.Errorf("last event = %+v, want 'released' of fence %d, detail forced: editor disabled", last, c.Fence)
	}
	ed, err := b.store.GetEditor(b.ctx, ann.ID)
	if err != nil || !ed.Disabled() {
		t.Fatalf("editor after the disable = %+v, %v; want disabled", ed, err)
	}
	// The old claim is gone for its holder.
	_, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: ids[0], Fence: c.Fence, Holder: ann.Holder(), Result: rawJSON(`1`)})
	wantErr(t, "submit of the revoked claim", err, tasks.ErrStale)

	// No claim for a disabled editor, by either path, and nothing changes.
	for _, id := range ids[1:] {
		before := b.snapshot(t, id)
		task := b.task(t, id)
		for _, st := range []tasks.Status{tasks.StatusPending, ""} {
			_, err := b.store.Claim(b.ctx, tasks.ClaimParams{
				TaskID: id, Fence: task.Fence, Status: st, Holder: ann.Holder(), EditorID: ann.ID, Lease: time.Minute,
			})
			wantErr(t, "claim by a disabled editor (status "+string(st)+")", err, tasks.ErrEditorDisabled)
		}
		b.unchanged(t, id, before)
	}
	// An expired claim of a disabled editor cannot be taken over by it either.
	bc := b.claim(t, ids[1], bob.Holder(), bob.ID, time.Minute)
	b.expireLease(t, ids[1])
	_, err = b.store.Claim(b.ctx, tasks.ClaimParams{
		TaskID: ids[1], Fence: bc.Fence, Status: tasks.StatusAssigned, Holder: ann.Holder(), EditorID: ann.ID, Lease: time.Minute,
	})
	wantErr(t, "takeover by a disabled editor", err, tasks.ErrEditorDisabled)
	// Others and workers still claim.
	b.claim(t, ids[2], "worker-1", 0, time.Minute)

	// Disabling again keeps the time and revokes nothing.
	again, err := b.store.DisableEditor(b.ctx, ann.ID)
	if err != nil || again != nil {
		t.Errorf("second disable = %+v, %v; want nothing revoked", again, err)
	}
	if ed2, _ := b.store.GetEditor(b.ctx, ann.ID); ed2 == nil || !ed2.DisabledAt.Equal(*ed.DisabledAt) {
		t.Errorf("disabled at %v after a second disable, want %v", ed2.DisabledAt, ed.DisabledAt)
	}

	if err := b.store.EnableEditor(b.ctx, ann.ID); err != nil {
		t.Fatal(err)
	}
	if ed, _ := b.store.GetEditor(b.ctx, ann.ID); ed == nil || ed.Disabled() {
		t.Errorf("editor after enable = %+v, want enabled", ed)
	}
	b.claim(t, ids[0], ann.Holder(), ann.ID, time.Minute)
	if err := b.store.EnableEditor(b.ctx, ann.ID); err != nil {
		t.Errorf("enabling an enabled editor: %v", err)
	}

	_, err = b.store.DisableEditor(b.ctx, bob.ID+100)
	wantErr(t, "disable an unknown editor", err, tasks.ErrNotFound)
	wantErr(t, "enable an unknown editor", b.store.EnableEditor(b.ctx, bob.ID+100), tasks.ErrNotFound)
}

// TestDisableEditorRevokesAnExpiredClaim: a claim whose lease passed but that no
// sweep recycled yet still names the editor; the disable returns it to the pool.
func TestDisableEditorRevokesAnExpiredClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ann := b.editor(t, "ann", "news")
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ann.Holder(), ann.ID, time.Minute)
	b.expireLease(t, id)
	all, err := b.store.DisableEditor(b.ctx, ann.ID)
	if err != nil || len(all) != 1 || all[0].TaskID != id || all[0].Fence != c.Fence {
		t.Fatalf("revoked = %+v, %v; want task %d fence %d", all, err, id, c.Fence)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, ann.ID); n != 0 {
		t.Errorf("%d tasks name the disabled editor", n)
	}
}

// TestDisableEditorRaisesSessionEpoch: each disable raises the editor's
// session epoch, a disable of a disabled editor too; an enable keeps it, and
// another editor's does not move. The editor read by its token hash carries
// it, as a page session's sign-in reads it.
func TestDisableEditorRaisesSessionEpoch(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ann := b.editor(t, "ann", "news")
	bob := b.editor(t, "bob", "news")
	epoch := func(id int64) int64 {
		t.Helper()
		ed, err := b.store.GetEditor(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ed.SessionEpoch
	}
	if got := epoch(ann.ID); got != 0 {
		t.Fatalf("a new editor's session epoch %d, want 0", got)
	}
	for want := int64(1); want <= 2; want++ {
		if _, err := b.store.DisableEditor(b.ctx, ann.ID); err != nil {
			t.Fatal(err)
		}
		if got := epoch(ann.ID); got != want {
			t.Errorf("session epoch after disable %d: %d, want %d", want, got, want)
		}
	}
	if err := b.store.EnableEditor(b.ctx, ann.ID); err != nil {
		t.Fatal(err)
	}
	if got := epoch(ann.ID); got != 2 {
		t.Errorf("session epoch after the enable: %d, want 2 (kept)", got)
	}
	hash := tasks.HashToken("ann-epoch-token")
	if err := b.store.SetEditorToken(b.ctx, ann.ID, hash); err != nil {
		t.Fatal(err)
	}
	if ed, err := b.store.EditorByTokenHash(b.ctx, hash); err != nil || ed.SessionEpoch != 2 {
		t.Errorf("editor by token hash = %+v, %v; want session epoch 2", ed, err)
	}
	if got := epoch(bob.ID); got != 0 {
		t.Errorf("another editor's session epoch %d, want 0", got)
	}
}
