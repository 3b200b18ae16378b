package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// spanCtx returns ctx carrying a span of trace id n (repeated), sampled or not,
// as a traced request's context does.
func spanCtx(ctx context.Context, n byte, sampled bool) (context.Context, string) {
	var tid trace.TraceID
	var sid trace.SpanID
	for i := range tid {
		tid[i] = n
	}
	sid[0] = n
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid}
	if sampled {
		cfg.TraceFlags = trace.FlagsSampled
	}
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(cfg)), tid.String()
}

// traceOfEvent is the trace id of the task's one event of kind k.
func traceOfEvent(t *testing.T, b *bundle, id int64, k tasks.EventKind) string {
	t.Helper()
	var found []string
	for _, ev := range b.events(t, id) {
		if ev.Kind == k {
			found = append(found, ev.TraceID)
		}
	}
	if len(found) != 1 {
		t.Fatalf("task %d has %d %s events, want 1", id, len(found), k)
	}
	return found[0]
}

// TestEventsKeepTheirTraceIDs: each claimed and submitted event keeps the
// trace id of the sampled span it was written under, and none without a span
// or under an unsampled one, also when members with different traces share
// one group commit.
func TestEventsKeepTheirTraceIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	g := newGate(t, b)
	eds, ids := editorsAndTasks(t, b, 3)
	ctxA, traceA := spanCtx(b.ctx, 0xa1, true)
	ctxB, traceB := spanCtx(b.ctx, 0xb2, true)
	ctxC, traceC := spanCtx(b.ctx, 0xc3, true)
	ctxD, traceD := spanCtx(b.ctx, 0xd4, true)
	ctxU, _ := spanCtx(b.ctx, 0xe5, false)

	// group runs writes[0] alone, held on its way, and writes[1:] together in
	// the group after it.
	group := func(writes ...func() error) {
		t.Helper()
		errs := make([]error, len(writes))
		var wg sync.WaitGroup
		g.arm()
		wg.Go(func() { errs[0] = writes[0]() })
		g.waitHeld(t)
		for i := 1; i < len(writes); i++ {
			wg.Go(func() { errs[i] = writes[i]() })
		}
		waitQueued(t, b.store, len(writes)-1)
		g.release()
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		if got, want := g.groupSizes(), []int{1, len(writes) - 1}; !slices.Equal(got, want) {
			t.Fatalf("group sizes = %v, want %v", got, want)
		}
	}

	// The claims: task 0's without a span, alone; tasks 1's and 2's in one
	// group, each under its own trace.
	claims := make([]*tasks.Claim, 3)
	claim := func(ctx context.Context, i int) func() error {
		p := claimParams(b, t, ids[i], eds[i])
		return func() (err error) {
			claims[i], err = b.store.Claim(ctx, p)
			return err
		}
	}
	group(claim(b.ctx, 0), claim(ctxA, 1), claim(ctxB, 2))

	// The submits: task 0's under trace D, alone; task 1's under trace C and
	// task 2's under an unsampled span, in one group.
	submit := func(ctx context.Context, i int) func() error {
		p := tasks.SubmitParams{TaskID: ids[i], Fence: claims[i].Fence, Holder: claims[i].Task.Holder, Result: json.RawMessage(`{}`)}
		return func() error {
			_, err := b.store.Submit(ctx, p)
			return err
		}
	}
	group(submit(ctxD, 0), submit(ctxC, 1), submit(ctxU, 2))

	for i, want := range []struct{ claimed, submitted string }{{"", traceD}, {traceA, traceC}, {traceB, ""}} {
		if got := traceOfEvent(t, b, ids[i], tasks.EventClaimed); got != want.claimed {
			t.Errorf("task %d: claimed event's trace id %q, want %q", i, got, want.claimed)
		}
		if got := traceOfEvent(t, b, ids[i], tasks.EventSubmitted); got != want.submitted {
			t.Errorf("task %d: submitted event's trace id %q, want %q", i, got, want.submitted)
		}
	}
}

// TestWorkerAndReleaseEventsKeepTheirTraceIDs: a worker batch's events keep
// the trace id of the batch's span, and a release's (written through the
// store's common event insert) that of its own.
func TestWorkerAndReleaseEventsKeepTheirTraceIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ids := b.insert(t, tasks.NewTask{Category: "w", Title: "a"}, tasks.NewTask{Category: "w", Title: "b"},
		tasks.NewTask{Category: "w", Title: "c"})
	ctxA, traceA := spanCtx(b.ctx, 0x1a, true)
	ctxB, traceB := spanCtx(b.ctx, 0x2b, true)
	ctxC, traceC := spanCtx(b.ctx, 0x3c, true)

	ps := make([]tasks.ClaimParams, 2)
	for i := range ps {
		ps[i] = tasks.ClaimParams{TaskID: ids[i], Fence: b.task(t, ids[i]).Fence, Status: tasks.StatusPending,
			Holder: "worker", Lease: time.Minute}
	}
	res, err := b.store.ClaimBatch(ctxA, ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("claim %d: %v", i, r.Err)
		}
	}
	done, err := b.store.Complete(ctxB, []tasks.Outcome{
		{TaskID: ids[0], Fence: res[0].Claim.Fence, Holder: "worker", Result: json.RawMessage(`1`)},
		{TaskID: ids[1], Fence: res[1].Claim.Fence, Holder: "worker", Err: "boom"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range done {
		if d.Err != nil {
			t.Fatalf("complete %d: %v", i, d.Err)
		}
	}
	c := b.claim(t, ids[2], "w3", 0, time.Minute)
	if _, err := b.store.Release(ctxC, tasks.ReleaseParams{TaskID: ids[2], Fence: c.Fence, Holder: "w3", Reason: "r"}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		task int64
		kind tasks.EventKind
		want string
	}{
		{ids[0], tasks.EventClaimed, traceA}, {ids[1], tasks.EventClaimed, traceA},
		{ids[0], tasks.EventSubmitted, traceB}, {ids[1], tasks.EventFailed, traceB},
		{ids[2], tasks.EventClaimed, ""}, {ids[2], tasks.EventReleased, traceC},
	} {
		if got := traceOfEvent(t, b, c.task, c.kind); got != c.want {
			t.Errorf("task %d: %s event's trace id %q, want %q", c.task, c.kind, got, c.want)
		}
	}
}
