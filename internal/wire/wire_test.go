package wire_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/wire"
	"github.com/taskd/taskd/tasks"
)

func TestNewTask(t *testing.T) {
	t.Parallel()
	var nt wire.NewTask
	if err := json.Unmarshal([]byte(`{"category":"news","title":"t","priority":3,"payload":null,"max_attempts":2,
		"key":"k","run_after":"2026-01-02T15:04:05Z","due_at":"2026-01-03T00:00:00.5+01:00"}`), &nt); err != nil {
		t.Fatal(err)
	}
	got, err := nt.Task()
	if err != nil {
		t.Fatal(err)
	}
	want := tasks.NewTask{Category: "news", Title: "t", Priority: 3, MaxAttempts: 2, Key: "k",
		RunAfter: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC), DueAt: time.Date(2026, 1, 2, 23, 0, 0, 5e8, time.UTC)}
	if got.Payload != nil || got.Category != want.Category || got.Title != want.Title || got.Priority != want.Priority ||
		got.MaxAttempts != want.MaxAttempts || got.Key != want.Key || !got.RunAfter.Equal(want.RunAfter) || !got.DueAt.Equal(want.DueAt) {
		t.Errorf("Task() = %+v, want %+v (a null payload left nil)", got, want)
	}

	empty := ""
	if _, err := (wire.NewTask{Key: &empty}).Task(); !errors.Is(err, wire.ErrEmptyKey) {
		t.Errorf("an empty key: %v, want ErrEmptyKey", err)
	}
	bad := "tomorrow"
	_, err = (wire.NewTask{DueAt: &bad}).Task()
	var te *wire.TimeError
	if !errors.As(err, &te) || te.Field != "due_at" || te.Value != bad {
		t.Errorf("a bad due_at: %v, want a *TimeError naming due_at and %q", err, bad)
	}
}

func TestResultOf(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.FixedZone("x", 3600))
	b, err := json.Marshal(wire.ResultOf(&tasks.Result{Cursor: 42, TaskID: 7, Fence: 1, Category: "news", Title: "a",
		Holder: "worker:h", Result: json.RawMessage(`{"ok":true}`), SubmittedAt: at}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cursor":"42","task_id":7,"fence":1,"category":"news","title":"a","key":null,"holder":"worker:h",` +
		`"editor_id":null,"result":{"ok":true},"submitted_at":"2026-01-02T14:04:05.123Z"}`
	if string(b) != want {
		t.Errorf("ResultOf as JSON:\n got %s\nwant %s", b, want)
	}
}
