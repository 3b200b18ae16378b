package sweeper_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/tasks"
)

// TestSweepEndsGoldCopies: a sweep recycles an expired copy of a gold task and
// cancels it, and the copy released before it, so that retention can purge
// them; the gold task itself stays pending.
func TestSweepEndsGoldCopies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids, err := b.Store.Insert(ctx, []tasks.NewTask{{Category: "news", Title: "gold", Payload: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	gold := ids[0].ID
	rules := func(string) (tasks.GoldRule, bool) { return tasks.GoldRule{Rule: tasks.GoldRuleDecision}, true }
	if _, err := b.Store.MarkGold(ctx, gold, tasks.GoldAnswer{Decision: "approve"}, rules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	var copies []int64
	for i, name := range []string{"ann", "bob"} {
		ed, err := b.Store.CreateEditor(ctx, tasks.CreateEditorParams{Name: name, Categories: []string{"news"}, TokenHash: tasks.HashToken(name)})
		if err != nil {
			t.Fatal(err)
		}
		c, err := b.Store.ClaimGold(ctx, tasks.GoldClaimParams{EditorID: ed.ID, Holder: "editor:" + name, Categories: []string{"news"}, Lease: time.Minute})
		if err != nil {
			t.Fatalf("claim gold for %s: %v", name, err)
		}
		copies = append(copies, c.Task.ID)
		if i == 0 {
			if _, err := b.Store.Release(ctx, tasks.ReleaseParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: "editor:" + name}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := b.DB.ExecContext(ctx, "UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 SECOND WHERE id = ?", c.Task.ID); err != nil {
			t.Fatal(err)
		}
	}
	res := sweepOnce(t, b.newSweeper(t, sweeper.Config{Schedule: "1m"}))
	if res.Recycled != 1 || res.GoldCopiesEnded != 2 {
		t.Errorf("sweep = %+v, want 1 recycled and 2 gold copies ended", res)
	}
	var statuses []string
	if err := b.DB.SelectContext(ctx, &statuses, "SELECT status FROM tasks WHERE id IN (?, ?, ?) ORDER BY id", gold, copies[0], copies[1]); err != nil {
		t.Fatal(err)
	}
	if len(statuses) != 3 || statuses[0] != "pending" || statuses[1] != "cancelled" || statuses[2] != "cancelled" {
		t.Errorf("gold task and copies = %v, want pending, cancelled, cancelled", statuses)
	}
}
