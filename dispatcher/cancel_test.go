package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

// TestCancelHeldTask: a cancel of a task an editor holds ends the claim: its
// lock is given back at once, its watchers are told, the editor's writes
// about it are refused as cancelled, and the editor's next is another task.
func TestCancelHeldTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ann := b.Editor(t, "ann", "news")
	ids := b.Add(t, "news", 0, 2)
	claim, err := b.D.Next(ctx, ann, 0)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	id := claim.Task.ID
	var told []dispatcher.ClaimRef
	stop := b.D.WatchCancels(func(ref dispatcher.ClaimRef) { told = append(told, ref) })
	defer stop()

	if err := b.D.Cancel(ctx, tasks.ChangeParams{TaskID: id, By: "admin"}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if n := b.RDB.Exists(ctx, b.LockKey(id)).Val(); n != 0 {
		t.Error("the cancelled claim's lock is still in Redis")
	}
	ref := dispatcher.ClaimRef{TaskID: id, Fence: claim.Fence}
	if len(told) != 1 || told[0] != ref {
		t.Errorf("watchers told %v, want %v", told, ref)
	}
	if _, err := b.D.Heartbeat(ctx, ann, ref); !errors.Is(err, tasks.ErrCancelled) {
		t.Errorf("the holder's heartbeat: err = %v, want ErrCancelled", err)
	}
	if _, err := b.D.Submit(ctx, ann, ref, json.RawMessage(`1`)); !errors.Is(err, tasks.ErrCancelled) {
		t.Errorf("the holder's submit: err = %v, want ErrCancelled", err)
	}
	if got := b.Task(t, id); got.Status != tasks.StatusCancelled || got.Fence != claim.Fence {
		t.Errorf("after cancel: status %s fence %d, want cancelled at fence %d", got.Status, got.Fence, claim.Fence)
	}
	next, err := b.D.Next(ctx, ann, 0)
	if err != nil || next.Task.ID != ids[0]+ids[1]-id {
		t.Fatalf("ann's next: %v, %v; want the other task", next, err)
	}
	var se *tasks.StatusError
	if err := b.D.Cancel(ctx, tasks.ChangeParams{TaskID: id}); !errors.As(err, &se) || se.Status != tasks.StatusCancelled {
		t.Errorf("cancel of a cancelled task: err = %v, want a StatusError naming cancelled", err)
	}
	if len(told) != 1 {
		t.Errorf("watchers told %v after a refused cancel", told)
	}
}

// TestCancelMatchingEndsHeldTasks: a cancel by filter ends the claims of the
// tasks it finds assigned as Cancel ends one: their locks given back, their
// watchers told, their holders' writes refused as cancelled.
func TestCancelMatchingEndsHeldTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ann := b.Editor(t, "ann", "news")
	bea := b.Editor(t, "bea", "news")
	b.Add(t, "news", 0, 3)
	var refs []dispatcher.ClaimRef
	eds := []dispatcher.Claimant{ann, bea}
	for _, ed := range eds {
		c, err := b.D.Next(ctx, ed, 0)
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		refs = append(refs, dispatcher.ClaimRef{TaskID: c.Task.ID, Fence: c.Fence})
	}
	var told []dispatcher.ClaimRef
	stop := b.D.WatchCancels(func(ref dispatcher.ClaimRef) { told = append(told, ref) })
	defer stop()

	res, err := b.D.CancelMatching(ctx, tasks.BulkParams{Category: "news"})
	if err != nil {
		t.Fatalf("cancel matching: %v", err)
	}
	if res.Changed != 3 || res.Running != 2 {
		t.Errorf("cancel matching = %+v, want 3 cancelled, 2 of them running", res)
	}
	if !slices.Equal(told, refs) {
		t.Errorf("watchers told %v, want %v", told, refs)
	}
	for i, ed := range eds {
		if n := b.RDB.Exists(ctx, b.LockKey(refs[i].TaskID)).Val(); n != 0 {
			t.Errorf("the lock of cancelled task %d is still in Redis", refs[i].TaskID)
		}
		if _, err := b.D.Heartbeat(ctx, ed, refs[i]); !errors.Is(err, tasks.ErrCancelled) {
			t.Errorf("editor %d's heartbeat: err = %v, want ErrCancelled", i, err)
		}
	}
}
