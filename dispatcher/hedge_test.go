package dispatcher_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// hedgeDispatch has the category "desk" hedging tasks due within 10m whose
// holder has been silent for 2m.
func hedgeDispatch(t *testing.T) *bundle {
	t.Helper()
	wf := map[string]tasks.Workflow{"desk": {Hedge: tasks.Hedge{BeforeDue: 10 * time.Minute, InactiveFor: 2 * time.Minute}}}
	return setup(t, setupOpts{Store: store.Config{Workflows: wf}, Dispatcher: dispatcher.Config{Workflows: wf}})
}

// A held task is offered again only when it is near its due_at and its
// holder is inactive; to one editor, never its holder, and asking again
// returns the same hedge. The hedger's submit wins; the holder's is refused
// with ErrDoneByOther, and every fence is accounted for.
func TestNextOffersHedge(t *testing.T) {
	t.Parallel()
	b := hedgeDispatch(t)
	ctx := t.Context()
	ann, bob, cat := b.Editor(t, "ann", "desk"), b.Editor(t, "bob", "desk"), b.Editor(t, "cat", "desk")
	due := time.Now().Add(5 * time.Minute)
	if _, err := b.D.AddTasks(ctx, []tasks.NewTask{{Category: "desk", Title: "near", DueAt: due}}); err != nil {
		t.Fatal(err)
	}
	held, err := b.D.Next(ctx, ann, 0)
	if err != nil {
		t.Fatalf("ann's next: %v", err)
	}
	// ann is active (she just claimed): nothing for bob.
	if c, err := b.D.Next(ctx, bob, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("bob's next while ann is active: %v, %v; want ErrNoTask", c, err)
	}
	// Due far away, ann inactive: nothing either.
	if _, err := b.DB.ExecContext(ctx, `UPDATE tasks SET assigned_at = NOW(3) - INTERVAL 3 MINUTE, due_at = NOW(3) + INTERVAL 1 HOUR WHERE id = ?`, held.Task.ID); err != nil {
		t.Fatal(err)
	}
	if c, err := b.D.Next(ctx, bob, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("bob's next for a task due in 1h: %v, %v; want ErrNoTask", c, err)
	}
	if _, err := b.DB.ExecContext(ctx, `UPDATE tasks SET due_at = NOW(3) + INTERVAL 5 MINUTE WHERE id = ?`, held.Task.ID); err != nil {
		t.Fatal(err)
	}
	hedge, err := b.D.Next(ctx, bob, 0)
	if err != nil || !hedge.Hedge || hedge.Task.ID != held.Task.ID || hedge.Fence != held.Fence+1 {
		t.Fatalf("bob's next = %+v, %v; want a hedge of task %d with fence %d", hedge, err, held.Task.ID, held.Fence+1)
	}
	if again, err := b.D.Next(ctx, bob, 0); err != nil || again.Fence != hedge.Fence || !again.Hedge {
		t.Fatalf("bob's next again = %+v, %v; want the same hedge", again, err)
	}
	if c, err := b.D.Next(ctx, cat, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("cat's next with the hedge taken: %v, %v; want ErrNoTask", c, err)
	}
	if mine, err := b.D.Next(ctx, ann, 0); err != nil || mine.Hedge || mine.Fence != held.Fence {
		t.Fatalf("ann's next = %+v, %v; want her own claim", mine, err)
	}
	if _, err := b.D.HeartbeatHedge(ctx, bob, refOf(hedge)); err != nil {
		t.Fatalf("bob's heartbeat: %v", err)
	}
	if _, err := b.D.HeartbeatHedge(ctx, cat, refOf(hedge)); !errors.Is(err, dispatcher.ErrNotHedge) {
		t.Fatalf("cat's heartbeat of bob's hedge: %v, want ErrNotHedge", err)
	}
	if n := b.RDB.Exists(ctx, b.LockKey(held.Task.ID)).Val(); n != 1 {
		t.Fatalf("ann's lock of the task: %d keys, want 1", n)
	}
	if _, err := b.D.SubmitHedge(ctx, bob, refOf(hedge), dispatcher.Submission{Result: json.RawMessage(`{"by":"bob"}`)}); err != nil {
		t.Fatalf("bob's submit: %v", err)
	}
	// The takeover ended ann's claim: her lock is given back.
	if n := b.RDB.Exists(ctx, b.LockKey(held.Task.ID)).Val(); n != 0 {
		t.Fatalf("the task's lock after bob's takeover and submit: %d keys, want none", n)
	}
	_, err = b.D.Submit(ctx, ann, refOf(held), json.RawMessage(`{"by":"ann"}`))
	if !errors.Is(err, tasks.ErrDoneByOther) {
		t.Fatalf("ann's submit after bob's: %v, want ErrDoneByOther", err)
	}
	if st := b.Task(t, held.Task.ID).Status; st != tasks.StatusDone {
		t.Fatalf("status %s, want done", st)
	}
	if n := b.RowCount(t, `SELECT COUNT(*) FROM task_results WHERE task_id = ?`, held.Task.ID); n != 1 {
		t.Fatalf("%d results, want 1", n)
	}
	if _, bad := b.FenceAccounting(t); len(bad) > 0 {
		t.Fatalf("fences not accounted for: %v", bad)
	}
}

// Without hedge settings nothing is offered again, however late the task.
func TestNextNoHedgeByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ann, bob := b.Editor(t, "ann", "desk"), b.Editor(t, "bob", "desk")
	if _, err := b.D.AddTasks(ctx, []tasks.NewTask{{Category: "desk", Title: "near", DueAt: time.Now().Add(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	held, err := b.D.Next(ctx, ann, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.DB.ExecContext(ctx, `UPDATE tasks SET assigned_at = NOW(3) - INTERVAL 1 HOUR WHERE id = ?`, held.Task.ID); err != nil {
		t.Fatal(err)
	}
	if c, err := b.D.Next(ctx, bob, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("bob's next = %v, %v; want ErrNoTask", c, err)
	}
}
