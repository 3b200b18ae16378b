package dispatcher_test

import (
	"context"
	"testing"
)

// TestNextSkipsPausedCategoryFromStaleCandidates pauses a category whose candidates
// this dispatcher has read already: Next refuses them (the store's claim checks the
// pause) and hands out the editor's other category instead.
func TestNextSkipsPausedCategoryFromStaleCandidates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ada := b.Editor(t, "ada", "news")
	ed := b.Editor(t, "bob", "news", "sport")
	b.Add(t, "news", 9, 10)
	sport := b.Add(t, "sport", 0, 1)[0]
	// Ada's claim reads news candidates into the pool; she keeps her task.
	c, err := b.D.Next(ctx, ada, 0)
	if err != nil || c.Task.Category != "news" {
		t.Fatalf("first claim = %+v, %v; want a news task", c, err)
	}
	// Another process pauses news: this dispatcher hears nothing of it.
	if _, _, err := b.Store.PauseCategory(ctx, "news"); err != nil {
		t.Fatal(err)
	}
	got, err := b.D.Next(ctx, ed, 0)
	if err != nil || got.Task.ID != sport {
		t.Fatalf("claim while news is paused = %+v, %v; want sport task %d", got, err, sport)
	}
	if n := b.RowCount(t, `SELECT COUNT(*) FROM tasks WHERE category = 'news' AND status <> 'pending'`); n != 1 {
		t.Errorf("%d news tasks not pending, want only ada's", n)
	}
	if st := b.D.Stats(); st.RefusedClaims != 0 {
		t.Errorf("refused claims = %d: a paused category is no lost race", st.RefusedClaims)
	}
}
