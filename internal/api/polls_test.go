package api

import (
	"context"
	"errors"
	"testing"
)

func TestPollsEndTheOldest(t *testing.T) {
	p := newPolls(2)
	var ctxs []context.Context
	var dones []func()
	for range 3 {
		ctx, end := context.WithCancelCause(context.Background())
		ctxs = append(ctxs, ctx)
		dones = append(dones, p.hold(7, end))
	}
	if !errors.Is(context.Cause(ctxs[0]), errPollReplaced) {
		t.Errorf("the oldest poll: cause %v, want errPollReplaced", context.Cause(ctxs[0]))
	}
	for i, ctx := range ctxs[1:] {
		if ctx.Err() != nil {
			t.Errorf("poll %d ended: %v", i+2, context.Cause(ctx))
		}
	}
	if n := p.held(7); n != 2 {
		t.Errorf("held %d, want 2", n)
	}
	// Another editor has a bound of its own.
	ctx, end := context.WithCancelCause(context.Background())
	defer p.hold(8, end)()
	if ctx.Err() != nil || p.held(7) != 2 {
		t.Errorf("editor 8's poll: %v; editor 7 holds %d", ctx.Err(), p.held(7))
	}
	for _, done := range dones {
		done()
	}
	if n := p.held(7); n != 0 {
		t.Errorf("held %d after every poll returned, want 0", n)
	}
	if _, ok := p.byEditor[7]; ok {
		t.Error("an editor without polls keeps an entry")
	}
}

func TestPollsWithoutBound(t *testing.T) {
	p := newPolls(0)
	for range 10 {
		ctx, end := context.WithCancelCause(context.Background())
		defer p.hold(7, end)()
		if ctx.Err() != nil {
			t.Fatal("a poll ended without a bound")
		}
	}
}

func TestPollsEnd(t *testing.T) {
	p := newPolls(4)
	var ctxs []context.Context
	for _, id := range []int64{7, 7, 8} {
		ctx, end := context.WithCancelCause(context.Background())
		defer p.hold(id, end)()
		ctxs = append(ctxs, ctx)
	}
	p.end(7, errPollCategories)
	for i, ctx := range ctxs[:2] {
		if !errors.Is(context.Cause(ctx), errPollCategories) || !pollEnded(context.Cause(ctx)) {
			t.Errorf("editor 7's poll %d: cause %v, want errPollCategories", i+1, context.Cause(ctx))
		}
	}
	if ctxs[2].Err() != nil {
		t.Errorf("editor 8's poll ended: %v", context.Cause(ctxs[2]))
	}
}
