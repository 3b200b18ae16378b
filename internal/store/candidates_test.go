package store_test

import (
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestCandidatesOrderByPriorityThenAge(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	low := b.insertOne(t, "news", 1)
	highOld := b.insertOne(t, "sport", 5)
	mid := b.insertOne(t, "news", 3)
	highNew := b.insertOne(t, "news", 5)
	other := b.insertOne(t, "weather", 9)
	negative := b.insertOne(t, "sport", -2)

	got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news", "sport"}, Limit: 10})
	want := []int64{highOld, highNew, mid, low, negative}
	if !equalIDs(got, want) {
		t.Errorf("candidates = %v, want %v", got, want)
	}
	got = b.candidates(t, tasks.CandidatesParams{Categories: []string{"sport", "news", "news"}, Limit: 2})
	if !equalIDs(got, want[:2]) {
		t.Errorf("limit 2: candidates = %v, want %v", got, want[:2])
	}
	got = b.candidates(t, tasks.CandidatesParams{Categories: []string{"weather"}})
	if !equalIDs(got, []int64{other}) {
		t.Errorf("weather: candidates = %v, want [%d]", got, other)
	}
	if got := b.candidates(t, tasks.CandidatesParams{}); len(got) != 0 {
		t.Errorf("no categories: candidates = %v, want none", got)
	}
	// Categories compare exactly.
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"News"}}); len(got) != 0 {
		t.Errorf("category News: candidates = %v, want none", got)
	}
	// Within a priority, the oldest come first, also when LIMIT cuts a category short.
	tie1 := b.insertOne(t, "tie", 1)
	tie2 := b.insertOne(t, "tie", 1)
	b.insertOne(t, "tie", 1)
	got = b.candidates(t, tasks.CandidatesParams{Categories: []string{"tie"}, Limit: 2})
	if !equalIDs(got, []int64{tie1, tie2}) {
		t.Errorf("ties: candidates = %v, want [%d %d]", got, tie1, tie2)
	}
	_, err := b.store.Candidates(b.ctx, tasks.CandidatesParams{Categories: []string{"news"}, Limit: tasks.CandidatesLimitMax + 1})
	wantErr(t, "limit too large", err, tasks.ErrInvalid)
}

func TestCandidatesSkipStatusAndRunAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	pending := b.insertOne(t, "news", 0)
	assigned := b.insertOne(t, "news", 0)
	done := b.insertOne(t, "news", 0)
	later := b.insertOne(t, "news", 0)
	b.claim(t, assigned, "w1", 0, time.Minute)
	c := b.claim(t, done, "w1", 0, time.Minute)
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: done, Fence: c.Fence, Holder: "w1", Result: rawJSON(`{}`)}); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `UPDATE tasks SET run_after = NOW(3) + INTERVAL 1 HOUR WHERE id = ?`, later)

	got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}})
	if !equalIDs(got, []int64{pending}) {
		t.Errorf("candidates = %v, want only the pending task %d", got, pending)
	}
	b.exec(t, `UPDATE tasks SET run_after = NOW(3) - INTERVAL 1 SECOND WHERE id = ?`, later)
	got = b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}})
	if !equalIDs(got, []int64{pending, later}) {
		t.Errorf("after run_after passed: candidates = %v, want %v", got, []int64{pending, later})
	}
}

func TestCandidatesIncludeExpiredClaims(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	pending := b.insertOne(t, "news", 1)
	held := b.insertOne(t, "news", 2)
	otherCat := b.insertOne(t, "sport", 3)
	c := b.claim(t, held, "w1", 0, time.Minute)
	b.claim(t, otherCat, "w1", 0, time.Minute)

	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}}); !equalIDs(got, []int64{pending}) {
		t.Fatalf("live claim offered: candidates = %v", got)
	}
	b.expireLease(t, held)
	b.expireLease(t, otherCat)
	cs, err := b.store.Candidates(b.ctx, tasks.CandidatesParams{Categories: []string{"news"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []tasks.Candidate{
		{ID: held, Fence: c.Fence, Priority: 2, Due: tasks.NoDue, Status: tasks.StatusAssigned},
		{ID: pending, Fence: 0, Priority: 1, Due: tasks.NoDue, Status: tasks.StatusPending},
	}
	if len(cs) != 2 || cs[0] != want[0] || cs[1] != want[1] {
		t.Errorf("candidates = %+v, want %+v (expired claim first by priority, with its fence)", cs, want)
	}
}

func TestCandidatesSkipMemory(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{SkipFor: time.Hour})
	alice := b.editor(t, "alice", "news")
	bob := b.editor(t, "bob", "news")
	skipped := b.insertOne(t, "news", 5)
	other := b.insertOne(t, "news", 1)

	c := b.claim(t, skipped, alice.Holder(), alice.ID, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: skipped, Fence: c.Fence, Holder: alice.Holder(), Reason: "not mine", Skip: true}); err != nil {
		t.Fatal(err)
	}
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}, EditorID: alice.ID}); !equalIDs(got, []int64{other}) {
		t.Errorf("alice: candidates = %v, want [%d] (skipped task hidden)", got, other)
	}
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}, EditorID: bob.ID}); !equalIDs(got, []int64{skipped, other}) {
		t.Errorf("bob: candidates = %v, want [%d %d]", got, skipped, other)
	}
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}}); !equalIDs(got, []int64{skipped, other}) {
		t.Errorf("worker: candidates = %v, want [%d %d]", got, skipped, other)
	}
	// The skip also hides the task when its claim expires while someone else holds it.
	b.claim(t, skipped, bob.Holder(), bob.ID, time.Minute)
	b.expireLease(t, skipped)
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}, EditorID: alice.ID}); !equalIDs(got, []int64{other}) {
		t.Errorf("alice, expired claim: candidates = %v, want [%d]", got, other)
	}
	if got := kinds(b.events(t, skipped)); len(got) != 3 || got[1] != tasks.EventSkipped {
		t.Errorf("events = %v, want claimed, skipped, claimed", got)
	}

	// Once the skip passes, alice is offered the task again.
	var until time.Time
	if err := b.db.GetContext(b.ctx, &until, "SELECT `until` FROM task_skips WHERE task_id = ? AND editor_id = ?", skipped, alice.ID); err != nil {
		t.Fatal(err)
	}
	if d := until.Sub(b.now(t)); d < 59*time.Minute || d > time.Hour {
		t.Errorf("skip lasts %v from now, want SkipFor = 1h", d)
	}
	b.exec(t, "UPDATE task_skips SET `until` = NOW(3) - INTERVAL 1 SECOND WHERE task_id = ?", skipped)
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}, EditorID: alice.ID}); !equalIDs(got, []int64{skipped, other}) {
		t.Errorf("alice after skip passed: candidates = %v, want [%d %d]", got, skipped, other)
	}
	n, err := b.store.PurgeSkips(b.ctx, 0)
	if err != nil || n != 1 {
		t.Errorf("purge skips = %d, %v; want 1", n, err)
	}
}

func TestSkipNeedsEditor(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, "w1", 0, time.Minute)
	before := b.snapshot(t, id)
	_, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: "w1", Skip: true})
	wantErr(t, "worker skip", err, tasks.ErrInvalid)
	b.unchanged(t, id, before)
}
