package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// workflowBundle has the category "desk" with the stages edit and review.
func workflowBundle(t *testing.T) *bundle {
	t.Helper()
	return setup(t, setupOpts{Store: store.Config{Workflows: map[string]tasks.Workflow{
		"desk": {Stages: []string{"edit", "review"}},
	}}})
}

// editorWith creates an editor with a capacity and stage limits.
func (b *bundle) editorWith(t *testing.T, name string, capacity int, stages map[string][]string, cats ...string) dispatcher.Claimant {
	t.Helper()
	_, hash := tasks.NewToken()
	e, err := b.Store.CreateEditor(t.Context(), tasks.CreateEditorParams{
		Name: name, Categories: cats, TokenHash: hash, Capacity: capacity, Stages: stages,
	})
	if err != nil {
		t.Fatalf("create editor %s: %v", name, err)
	}
	return dispatcher.EditorClaimant(e)
}

func refOf(c *tasks.Claim) dispatcher.ClaimRef {
	return dispatcher.ClaimRef{TaskID: c.Task.ID, Fence: c.Fence}
}

func TestNextWithinCapacity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ann := b.editorWith(t, "ann", 3, nil, "news")
	b.Add(t, "news", 0, 5)
	held := map[int64]bool{}
	var first *tasks.Claim
	for i := range 3 {
		c, err := b.D.Next(ctx, ann, 0)
		if err != nil {
			t.Fatalf("next %d: %v", i, err)
		}
		if held[c.Task.ID] {
			t.Fatalf("next %d gave task %d again", i, c.Task.ID)
		}
		held[c.Task.ID] = true
		if first == nil {
			first = c
		}
	}
	// At capacity: the oldest claim it holds, again.
	c, err := b.D.Next(ctx, ann, 0)
	if err != nil || c.Task.ID != first.Task.ID || c.Fence != first.Fence {
		t.Fatalf("next at capacity = %+v, %v; want task %d again", c, err, first.Task.ID)
	}
	if n := b.RowCount(t, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, ann.EditorID); n != 3 {
		t.Errorf("ann holds %d tasks, want 3", n)
	}
	// A submit frees a place: its next is a new task.
	next, err := b.D.Submit(ctx, ann, refOf(first), json.RawMessage(`{}`))
	if err != nil || next == nil || held[next.Task.ID] {
		t.Errorf("submit = %+v, %v; want a fourth task", next, err)
	}

	// A claimant that says less than the editor's capacity only claims less;
	// one that says more is held to the store's.
	liar := ann
	liar.Capacity = 10
	c, err = b.D.Next(ctx, liar, 0)
	if err != nil || !held[c.Task.ID] && c.Task.ID != next.Task.ID {
		t.Errorf("next claiming a capacity of 10 = %+v, %v; want one of the 3 held", c, err)
	}
	if n := b.RowCount(t, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, ann.EditorID); n != 3 {
		t.Errorf("ann holds %d tasks, want 3", n)
	}
}

func TestStageLimitedEditorsAndTheFourEyesRule(t *testing.T) {
	t.Parallel()
	b := workflowBundle(t)
	ctx := t.Context()
	ann := b.Editor(t, "ann", "desk")
	rev := b.editorWith(t, "rev", 1, map[string][]string{"desk": {"review"}}, "desk")
	ids := b.Add(t, "desk", 0, 2)

	// Nothing at review yet: the reviewer gets nothing, though edits wait.
	if c, err := b.D.Next(ctx, rev, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("reviewer's next = %+v, %v; want ErrNoTask", c, err)
	}
	// The reviewer waits; ann's edit wakes it with the task at review.
	got := make(chan *tasks.Claim, 1)
	go func() {
		c, err := b.D.Next(ctx, rev, time.Minute)
		if err != nil {
			t.Errorf("reviewer's long poll: %v", err)
		}
		got <- c
	}()
	edit, err := b.D.Next(ctx, ann, 0)
	if err != nil || edit.Task.ID != ids[0] || edit.Task.StageName() != "edit" {
		t.Fatalf("ann's next = %+v, %v; want task %d at edit", edit, err, ids[0])
	}
	next, err := b.D.SubmitWith(ctx, ann, refOf(edit), dispatcher.Submission{Result: json.RawMessage(`{"text":"draft"}`)})
	if err != nil {
		t.Fatal(err)
	}
	// Ann's next is the other edit, never the review of her own.
	if next == nil || next.Task.ID != ids[1] {
		t.Errorf("ann's next after her edit = %+v, want task %d", next, ids[1])
	}
	select {
	case c := <-got:
		if c == nil || c.Task.ID != ids[0] || c.Task.StageName() != "review" {
			t.Fatalf("reviewer got %+v, want task %d at review", c, ids[0])
		}
		// Sent back with notes: to ann first.
		if _, err := b.D.SubmitWith(ctx, rev, refOf(c), dispatcher.Submission{
			Result: json.RawMessage(`{}`), Decision: tasks.DecisionSendBack, Notes: "check the dates",
		}); err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the reviewer's long poll was not answered")
	}
	// Ann still holds the other edit: at capacity 1, her next is that one.
	if c, err := b.D.Next(ctx, ann, 0); err != nil || c.Task.ID != ids[1] {
		t.Fatalf("ann's next = %+v, %v; want task %d she holds", c, err, ids[1])
	}
	held, _ := b.Store.HeldByEditor(ctx, ann.EditorID)
	b.D.Submit(ctx, ann, refOf(held), json.RawMessage(`{}`))
	// Her next claim is the task sent back to her, ahead of the pool.
	b.Add(t, "desk", 9, 1)
	c, err := b.D.Next(ctx, ann, 0)
	if err != nil || c.Task.ID != ids[0] || c.Task.StageName() != "edit" {
		t.Fatalf("ann's next = %+v, %v; want task %d sent back to edit", c, err, ids[0])
	}
	// A send back at the first stage changes nothing.
	if _, err := b.D.SubmitWith(ctx, ann, refOf(c), dispatcher.Submission{
		Result: json.RawMessage(`{}`), Decision: tasks.DecisionSendBack,
	}); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("send back at edit: %v, want ErrInvalid", err)
	}
	if task := b.Task(t, ids[0]); task.Status != tasks.StatusAssigned || task.Fence != c.Fence {
		t.Errorf("after a refused send back: %+v", task)
	}
	for _, bad := range []dispatcher.Submission{
		{Result: json.RawMessage(`{}`), Decision: " approve"},
		{Result: json.RawMessage(`{}`), Decision: "a\x00b"},
		{Result: json.RawMessage(`{}`), Decision: string(make([]byte, tasks.MaxDecisionLen+1))},
	} {
		if _, err := b.D.SubmitWith(ctx, ann, refOf(c), bad); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("decision %q: %v, want ErrInvalid", bad.Decision, err)
		}
	}
}

func TestOverlapThroughNext(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Store: store.Config{Workflows: map[string]tasks.Workflow{"labels": {Overlap: 2}}}})
	ctx := t.Context()
	ann := b.editorWith(t, "ann", 2, nil, "labels")
	bob := b.Editor(t, "bob", "labels")
	ids := b.Add(t, "labels", 0, 1)
	first, err := b.D.Next(ctx, ann, 0)
	if err != nil || first.Task.GroupID != ids[0] {
		t.Fatalf("ann's next = %+v, %v", first, err)
	}
	// The group's other task is not hers, even with room for it.
	if c, err := b.D.Next(ctx, ann, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Errorf("ann's second next = %+v, %v; want ErrNoTask (nothing else is for her)", c, err)
	}
	second, err := b.D.Next(ctx, bob, 0)
	if err != nil || second.Task.GroupID != ids[0] || second.Task.ID == first.Task.ID {
		t.Fatalf("bob's next = %+v, %v; want the group's other task", second, err)
	}
	if _, err := b.D.SubmitWith(ctx, ann, refOf(first), dispatcher.Submission{Result: json.RawMessage(`{}`), Decision: "cat"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.D.SubmitWith(ctx, bob, refOf(second), dispatcher.Submission{Result: json.RawMessage(`{}`), Decision: "dog"}); err != nil {
		t.Fatal(err)
	}
	page, err := b.Store.TaskResults(context.Background(), tasks.TaskResultsParams{TaskID: ids[0]})
	if err != nil || len(page.Results) != 2 || page.Results[0].Decision == page.Results[1].Decision {
		t.Errorf("results = %+v, %v; want two that disagree", page, err)
	}
}

// A task is sent back at most its category's MaxSendBacks times: the send back
// past it is refused and changes nothing, and the reviewer may still approve.
func TestSendBackLimit(t *testing.T) {
	t.Parallel()
	desk := tasks.Workflow{Stages: []string{"edit", "review"}, MaxSendBacks: 2, SendBackHold: time.Hour}
	b := setup(t, setupOpts{
		Store:      store.Config{Workflows: map[string]tasks.Workflow{"desk": desk}},
		Dispatcher: dispatcher.Config{Workflows: map[string]tasks.Workflow{"desk": desk}},
	})
	ctx := t.Context()
	ed := b.editorWith(t, "ed", 1, map[string][]string{"desk": {"edit"}}, "desk")
	rev := b.editorWith(t, "rev", 1, map[string][]string{"desk": {"review"}}, "desk")
	id := b.Add(t, "desk", 0, 1)[0]
	back := dispatcher.Submission{Result: json.RawMessage(`{"verdict":"again"}`), Decision: tasks.DecisionSendBack, Notes: "again"}
	for round := 0; ; round++ {
		edit, err := b.D.Next(ctx, ed, 0)
		if err != nil || edit.Task.ID != id || edit.Task.StageName() != "edit" {
			t.Fatalf("round %d: edit %+v, %v", round, edit, err)
		}
		if _, err := b.D.SubmitWith(ctx, ed, refOf(edit), dispatcher.Submission{Result: json.RawMessage(`{"text":"draft"}`)}); err != nil {
			t.Fatalf("round %d: submit the edit: %v", round, err)
		}
		review, err := b.D.Next(ctx, rev, 0)
		if err != nil || review.Task.ID != id || review.Task.StageName() != "review" {
			t.Fatalf("round %d: review %+v, %v", round, review, err)
		}
		_, err = b.D.SubmitWith(ctx, rev, refOf(review), back)
		if round < desk.MaxSendBacks {
			if err != nil {
				t.Fatalf("send back %d: %v", round+1, err)
			}
			continue
		}
		if !errors.Is(err, tasks.ErrSendBackLimit) {
			t.Fatalf("send back %d: %v, want ErrSendBackLimit", round+1, err)
		}
		// The limit is told to the holder only: a claim not someone's is
		// stale, as for any other write.
		if _, err := b.D.SubmitWith(ctx, ed, refOf(review), back); !errors.Is(err, tasks.ErrStale) {
			t.Errorf("another editor's send back: %v, want ErrStale", err)
		}
		// Nothing changed: the reviewer holds the claim, the results are
		// as they were.
		if task := b.Task(t, id); task.Status != tasks.StatusAssigned || task.Fence != review.Fence || task.StageName() != "review" {
			t.Errorf("after the refused send back: %+v", task)
		}
		page, err := b.Store.TaskResults(ctx, tasks.TaskResultsParams{TaskID: id})
		if want := 2*desk.MaxSendBacks + 1; err != nil || len(page.Results) != want {
			t.Errorf("results after the refusal: %d (%v), want %d", len(page.Results), err, want)
		}
		if _, err := b.D.SubmitWith(ctx, rev, refOf(review), dispatcher.Submission{Result: json.RawMessage(`{}`), Decision: tasks.DecisionApprove}); err != nil {
			t.Fatalf("approve after the refusal: %v", err)
		}
		if task := b.Task(t, id); task.Status != tasks.StatusDone {
			t.Errorf("after the approval: %s, want done", task.Status)
		}
		return
	}
}
