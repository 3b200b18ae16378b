package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

func TestDisableEditor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	// ann is the Claimant a cache would still hold once she is disabled.
	ann := b.Editor(t, "ann", "news")
	bob := b.Editor(t, "bob", "news")
	ids := b.Add(t, "news", 0, 2)
	claim, err := b.D.Next(ctx, ann, 0)
	if err != nil {
		t.Fatal(err)
	}

	all, err := b.D.DisableEditor(ctx, ann.EditorID)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("revoked %d claims, want 1", len(all))
	}
	revoked := all[0]
	if revoked.TaskID != claim.Task.ID || revoked.Fence != claim.Fence {
		t.Fatalf("revoked = %+v, want task %d fence %d", revoked, claim.Task.ID, claim.Fence)
	}
	if n := b.RDB.Exists(ctx, b.LockKey(claim.Task.ID)).Val(); n != 0 {
		t.Error("the revoked claim's lock is still in redis")
	}
	ref := dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}
	if _, err := b.D.Submit(ctx, ann, ref, json.RawMessage(`1`)); !errors.Is(err, tasks.ErrStale) {
		t.Errorf("submit of the revoked claim: %v, want ErrStale", err)
	}
	if c, err := b.D.Next(ctx, ann, 0); !errors.Is(err, tasks.ErrEditorDisabled) || c != nil {
		t.Errorf("next of the disabled editor = %+v, %v; want ErrEditorDisabled", c, err)
	}
	// The tasks the refused claims tried are others' at once, the revoked one too.
	got := map[int64]bool{}
	for range ids {
		c, err := b.D.Next(ctx, bob, 0)
		if err != nil {
			t.Fatalf("bob's next: %v", err)
		}
		got[c.Task.ID] = true
		if _, err := b.D.Submit(ctx, bob, dispatcher.ClaimRef{TaskID: c.Task.ID, Fence: c.Fence}, json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	if !got[ids[0]] || !got[ids[1]] {
		t.Errorf("bob got %v, want both tasks %v", got, ids)
	}
	if _, err := b.D.DisableEditor(ctx, bob.EditorID+100); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("disable of an unknown editor: %v, want ErrNotFound", err)
	}
}

// TestDisableEditorUnderLoad: while 8 goroutines claim and submit as one editor,
// with a Claimant that never learns of the disable, the editor is disabled after
// 40 claims. No
// claim starts after the disable returned and succeeds, and in the end no task
// names the editor.
func TestDisableEditorUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ann := b.Editor(t, "ann", "news")
	b.Add(t, "news", 0, 500)

	var disabled atomic.Bool
	var after, refused, claimed atomic.Int64
	started := make(chan struct{}) // closed once 40 claims are in
	var once sync.Once
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for refusals := 0; refusals < 20; {
				late := disabled.Load()
				c, err := b.D.Next(ctx, ann, 0)
				switch {
				case errors.Is(err, tasks.ErrEditorDisabled):
					refused.Add(1)
					if late {
						refusals++
					}
					continue
				case err != nil:
					t.Errorf("next: %v", err)
					return
				}
				if claimed.Add(1) >= 40 {
					once.Do(func() { close(started) })
				}
				if late {
					after.Add(1)
				}
				// A submit may find the claim revoked: that is the point.
				_, err = b.D.Submit(ctx, ann, dispatcher.ClaimRef{TaskID: c.Task.ID, Fence: c.Fence}, json.RawMessage(`1`))
				if err != nil && !errors.Is(err, tasks.ErrStale) {
					t.Errorf("submit: %v", err)
					return
				}
			}
		}()
	}
	<-started
	if _, err := b.D.DisableEditor(ctx, ann.EditorID); err != nil {
		t.Fatal(err)
	}
	disabled.Store(true)
	wg.Wait()
	t.Logf("%d claims, %d refused", claimed.Load(), refused.Load())
	if n := after.Load(); n != 0 {
		t.Errorf("%d claims that started after the disable returned succeeded", n)
	}
	var n int
	if err := b.DB.Get(&n, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, ann.EditorID); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d tasks name the disabled editor", n)
	}
}
