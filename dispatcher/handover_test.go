package dispatcher_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/testenv"
)

// roundTrips is a go-redis hook that counts round trips: a command or a
// pipeline is one.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// A submit gives its task's lock back in the round trip to Redis that takes
// the next task's lock: one round trip for the cycle, and the old lock gone.
func TestSubmitHandsItsLockOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	b := setup(t, setupOpts{redis: rdb})
	ed := b.editor(t, "ada", "news")
	ids := b.add(t, "news", 0, 3)

	first, err := b.d.Next(ctx, ed, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Warm up: the scripts are loaded and the candidates read.
	next, err := b.d.Submit(ctx, ed, dispatcher.ClaimRef{TaskID: first.Task.ID, Fence: first.Fence}, json.RawMessage(`{"ok":true}`))
	if err != nil || next == nil {
		t.Fatalf("submit: next %v, %v", next, err)
	}
	rt.n.Store(0)
	last, err := b.d.Submit(ctx, ed, dispatcher.ClaimRef{TaskID: next.Task.ID, Fence: next.Fence}, json.RawMessage(`{"ok":true}`))
	if err != nil || last == nil {
		t.Fatalf("submit: next %v, %v", last, err)
	}
	if n := rt.n.Load(); n != 1 {
		t.Errorf("%d Redis round trips for a submit and its next claim, want 1", n)
	}
	if n := rdb.Exists(ctx, b.lockKey(next.Task.ID)).Val(); n != 0 {
		t.Errorf("the submitted task's lock is still in Redis")
	}
	if v := rdb.Get(ctx, b.lockKey(last.Task.ID)).Val(); v != ed.Holder {
		t.Errorf("the next task's lock = %q, want %q", v, ed.Holder)
	}

	// With nothing left to claim the lock is given back on its own.
	none, err := b.d.Submit(ctx, ed, dispatcher.ClaimRef{TaskID: last.Task.ID, Fence: last.Fence}, json.RawMessage(`{"ok":true}`))
	if err != nil || none != nil {
		t.Fatalf("last submit: next %v, %v; want none", none, err)
	}
	if n := rdb.Exists(ctx, b.lockKey(last.Task.ID)).Val(); n != 0 {
		t.Errorf("the last task's lock is still in Redis")
	}
	if len(ids) != 3 {
		t.Fatalf("added %d tasks", len(ids))
	}
}
