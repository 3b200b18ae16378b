package store_test

import (
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestAcceptedResult(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ada", "news")
	id := b.insertOne(t, "news", 0)
	_, err := b.store.AcceptedResult(b.ctx, id)
	wantErr(t, "result of a pending task", err, tasks.ErrNotFound)
	_, err = b.store.AcceptedResult(b.ctx, id+1000)
	wantErr(t, "result of no task", err, tasks.ErrNotFound)

	// A first claim expires and is taken over; the second claim's submission is
	// the accepted one.
	first := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)
	_, err = b.store.AcceptedResult(b.ctx, id)
	wantErr(t, "result of an assigned task", err, tasks.ErrNotFound)
	b.expireLease(t, id)
	second := b.claim(t, id, "worker-1", 0, time.Minute)
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: second.Fence, Holder: "worker-1", Result: rawJSON(`{"words":5}`)}); err != nil {
		t.Fatal(err)
	}
	r, err := b.store.AcceptedResult(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.TaskID != id || r.Fence != second.Fence || r.Fence == first.Fence || r.Holder != "worker-1" || r.EditorID != 0 ||
		string(r.Result) != `{"words": 5}` && string(r.Result) != `{"words":5}` || r.SubmittedAt.IsZero() {
		t.Errorf("accepted result = %+v", r)
	}
}
