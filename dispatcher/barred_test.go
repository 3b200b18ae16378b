package dispatcher_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// sendBack has ed edit task id and rev review it and send it back: the task
// is back at edit, reserved for ed for the category's send-back hold.
func (b *bundle) sendBack(t *testing.T, id int64, ed, rev dispatcher.Claimant) {
	t.Helper()
	ctx := t.Context()
	edit, err := b.D.Next(ctx, ed, 0)
	if err != nil || edit.Task.ID != id {
		t.Fatalf("%s's next = %+v, %v; want task %d", ed.Holder, edit, err, id)
	}
	if _, err := b.D.Submit(ctx, ed, refOf(edit), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	review, err := b.D.Next(ctx, rev, 0)
	if err != nil || review.Task.ID != id || review.Task.StageName() != "review" {
		t.Fatalf("%s's next = %+v, %v; want task %d at review", rev.Holder, review, err, id)
	}
	if _, err := b.D.SubmitWith(ctx, rev, refOf(review), dispatcher.Submission{
		Result: json.RawMessage(`{}`), Decision: tasks.DecisionSendBack, Notes: "again",
	}); err != nil {
		t.Fatal(err)
	}
}

// An editor refused a task during its send-back hold gets it once the hold
// ends, not when this process would forget a refusal of a rule no time ends:
// its long poll is woken then.
func TestSendBackHoldBarsForItsLength(t *testing.T) {
	t.Parallel()
	const hold = 2 * time.Second
	b := setup(t, setupOpts{Store: store.Config{Workflows: map[string]tasks.Workflow{
		"desk": {Stages: []string{"edit", "review"}, SendBackHold: hold},
	}}})
	ctx := t.Context()
	ann := b.editorWith(t, "ann", 1, map[string][]string{"desk": {"edit"}}, "desk")
	rev := b.editorWith(t, "rev", 1, map[string][]string{"desk": {"review"}}, "desk")
	cat := b.editorWith(t, "cat", 1, map[string][]string{"desk": {"edit"}}, "desk")
	id := b.Add(t, "desk", 0, 1)[0]
	b.sendBack(t, id, ann, rev)

	// During the hold the task is ann's alone.
	if c, err := b.D.Next(ctx, cat, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("cat's next during the hold = %+v, %v; want ErrNoTask", c, err)
	}
	until := b.Task(t, id).ReservedUntil
	if until == nil {
		t.Fatal("the task sent back is not reserved")
	}
	// Far less than the refusal of a rule no time ends is remembered for.
	c, err := b.D.Next(ctx, cat, 20*time.Second)
	if err != nil || c.Task.ID != id || c.Task.StageName() != "edit" {
		t.Fatalf("cat's long poll = %+v, %v; want task %d at edit once the hold ended", c, err, id)
	}
	if c.AssignedAt.Before(*until) {
		t.Errorf("cat claimed the task at %v, within the hold (to %v)", c.AssignedAt, *until)
	}
}

// A task barred to an editor by a rule no time ends (here the four-eyes
// rule) is tried again as soon as it moves on: at its next stage it may be
// the editor's.
func TestBarredTaskIsTriedAgainOnceItMovesOn(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Store: store.Config{Workflows: map[string]tasks.Workflow{
		"desk": {Stages: []string{"edit", "review"}, SendBackHold: time.Millisecond},
	}}})
	ctx := t.Context()
	ann := b.editorWith(t, "ann", 1, map[string][]string{"desk": {"edit"}}, "desk")
	rev := b.Editor(t, "rev", "desk") // both stages
	id := b.Add(t, "desk", 0, 1)[0]
	b.sendBack(t, id, ann, rev)
	testenv.Eventually(t, 10*time.Second, "the send-back hold ends", func() bool {
		return b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE id = ? AND reserved_until > NOW(3)", id) == 0
	})

	// rev reviewed the task: its edit is not for rev.
	if c, err := b.D.Next(ctx, rev, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("rev's next at edit = %+v, %v; want ErrNoTask", c, err)
	}
	edit, err := b.D.Next(ctx, ann, 0)
	if err != nil || edit.Task.ID != id {
		t.Fatalf("ann's next = %+v, %v; want task %d", edit, err, id)
	}
	if _, err := b.D.Submit(ctx, ann, refOf(edit), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	// At review again, it is rev's.
	c, err := b.D.Next(ctx, rev, 0)
	if err != nil || c.Task.ID != id || c.Task.StageName() != "review" {
		t.Fatalf("rev's next at review = %+v, %v; want task %d", c, err, id)
	}
}
