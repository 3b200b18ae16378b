package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// endingStore ends its caller's request as each claim commits, answering
// with the request's end as a store does for a write it stops waiting for,
// though the write may commit (see store.Store.Claim).
type endingStore struct {
	*store.Store
	end context.CancelCauseFunc
}

var errRequestGone = errors.New("request gone")

func (s *endingStore) Claim(ctx context.Context, p tasks.ClaimParams) (*tasks.Claim, error) {
	c, err := s.Store.Claim(context.WithoutCancel(ctx), p)
	s.end(errRequestGone)
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return c, err
}

// A claim made as its request ends is given back at once, not left to its
// lease: nobody is answered with it. Nothing keeps it from its editor, who
// never learnt of it.
func TestClaimMadeAsItsRequestEndsIsGivenBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.editorWith(t, "ann", 3, nil, "news")
	id := b.Add(t, "news", 0, 1)[0]
	ctx, end := context.WithCancelCause(t.Context())
	defer end(nil)
	d, err := dispatcher.New(&endingStore{Store: b.Store, end: end}, b.Locks, b.D.Config())
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Next(ctx, ann, 0)
	if !errors.Is(err, errRequestGone) {
		t.Fatalf("next = %+v, %v; want the request's end", c, err)
	}
	task := b.Task(t, id)
	if task.Status != tasks.StatusPending || task.EditorID != 0 {
		t.Fatalf("task %d is %s, held by editor %d; want it back in the pool", id, task.Status, task.EditorID)
	}
	h := b.History(t, id)
	if len(h) != 2 || h[0].Kind != tasks.EventClaimed || h[1].Kind != tasks.EventReleased || h[1].Detail != tasks.ReasonUndelivered {
		t.Errorf("history = %+v; want claimed, released %q", h, tasks.ReasonUndelivered)
	}
	if n, err := b.RDB.Exists(t.Context(), b.LockKey(id)).Result(); err != nil || n != 0 {
		t.Errorf("the task's lock is still there (%d, %v)", n, err)
	}
	// Its editor takes it at once.
	again, err := b.D.Next(t.Context(), ann, 0)
	if err != nil || again.Task.ID != id {
		t.Fatalf("next = %+v, %v; want task %d", again, err, id)
	}
}

// endingBatchStore is endingStore for a worker's batch of claims.
type endingBatchStore struct {
	*store.Store
	end context.CancelCauseFunc
}

func (s *endingBatchStore) ClaimBatch(ctx context.Context, ps []tasks.ClaimParams) ([]tasks.ClaimResult, error) {
	res, err := s.Store.ClaimBatch(context.WithoutCancel(ctx), ps)
	s.end(errRequestGone)
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return res, err
}

// A worker's claims made as its call ends are given back at once, each.
func TestBatchMadeAsItsCallEndsIsGivenBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.Add(t, "jobs", 0, 3)
	ctx, end := context.WithCancelCause(t.Context())
	defer end(nil)
	d, err := dispatcher.New(&endingBatchStore{Store: b.Store, end: end}, b.Locks, b.D.Config())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := d.NextMany(ctx, []string{"w:1", "w:2", "w:3"}, []string{"jobs"}, 0)
	if !errors.Is(err, errRequestGone) || len(cs) != 0 {
		t.Fatalf("next many = %d claims, %v; want none and the call's end", len(cs), err)
	}
	for _, id := range ids {
		if task := b.Task(t, id); task.Status != tasks.StatusPending {
			t.Errorf("task %d is %s, want it back in the pool", id, task.Status)
		}
		h := b.History(t, id)
		if len(h) != 2 || h[0].Kind != tasks.EventClaimed || h[1].Kind != tasks.EventReleased || h[1].Detail != tasks.ReasonUndelivered {
			t.Errorf("task %d's history = %+v; want claimed, released %q", id, h, tasks.ReasonUndelivered)
		}
	}
	again, err := b.D.NextMany(t.Context(), []string{"w:1", "w:2", "w:3"}, []string{"jobs"}, 0)
	if err != nil || len(again) != 3 {
		t.Fatalf("next many = %d claims, %v; want 3", len(again), err)
	}
}

// hungStore is a store whose claims and submits never answer, as on a
// database node that froze: each returns only once its caller's context
// ends.
type hungStore struct{ *store.Store }

func (hungStore) Claim(ctx context.Context, _ tasks.ClaimParams) (*tasks.Claim, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

func (hungStore) Submit(ctx context.Context, _ tasks.SubmitParams) (*tasks.Ended, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

func (hungStore) SubmitAndClaim(ctx context.Context, _ tasks.SubmitParams, _ tasks.ClaimParams) (*tasks.Handover, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// A request's deadline bounds its answer: a submit or a claim that the store
// does not answer ends with its request, not a give-back's grace later.
func TestHungWriteEndsWithItsRequestsDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.editorWith(t, "ann", 1, nil, "news")
	bob := b.editorWith(t, "bob", 1, nil, "news")
	b.Add(t, "news", 0, 3)
	held, err := b.D.Next(t.Context(), ann, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(hungStore{b.Store}, b.Locks, b.D.Config())
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	// Well under the grace a cancelled request's write is given (5 s).
	const bound = timeout + 2*time.Second
	for _, call := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"submit", func(ctx context.Context) error {
			_, err := d.Submit(ctx, ann, refOf(held), json.RawMessage(`{}`))
			return err
		}},
		{"next", func(ctx context.Context) error {
			_, err := d.Next(ctx, bob, 0)
			return err
		}},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		start := time.Now()
		err := call.do(ctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s = %v; want the request's deadline", call.name, err)
		}
		if took > bound {
			t.Errorf("%s answered after %v; want within %v of a request timing out after %v", call.name, took.Round(time.Millisecond), bound, timeout)
		}
	}
}

// lateStore makes each claim as its caller's context ends (its commit lands
// just past the request's deadline), then freezes: its releases never
// answer until their caller's context ends, as a database node that froze
// right after a commit.
type lateStore struct{ *store.Store }

func (s lateStore) Claim(ctx context.Context, p tasks.ClaimParams) (*tasks.Claim, error) {
	<-ctx.Done()
	return s.Store.Claim(context.WithoutCancel(ctx), p)
}

func (lateStore) Release(ctx context.Context, _ tasks.ReleaseParams) (*tasks.Ended, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// A claim committed as its request's deadline passed is given back aside:
// the request answers at its deadline, not after the give-back's own bound
// on a store that stopped answering.
func TestClaimPastTheDeadlineGivenBackAside(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.editorWith(t, "ann", 1, nil, "news")
	b.Add(t, "news", 0, 1)
	d, err := dispatcher.New(lateStore{b.Store}, b.Locks, b.D.Config())
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	// Well under the give-back's bound (5 s).
	const bound = timeout + 2*time.Second
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	start := time.Now()
	_, err = d.Next(ctx, ann, 0)
	took := time.Since(start)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("next = %v; want the request's deadline", err)
	}
	if took > bound {
		t.Errorf("next answered after %v; want within %v of a request timing out after %v", took.Round(time.Millisecond), bound, timeout)
	}
}

// slowBackStore makes each claim as its caller's context ends, as lateStore,
// and takes a while to answer a release, which it then makes; released is
// set once it did.
type slowBackStore struct {
	*store.Store
	released *atomic.Bool
}

func (s slowBackStore) Claim(ctx context.Context, p tasks.ClaimParams) (*tasks.Claim, error) {
	<-ctx.Done()
	return s.Store.Claim(context.WithoutCancel(ctx), p)
}

func (s slowBackStore) Release(ctx context.Context, p tasks.ReleaseParams) (*tasks.Ended, error) {
	time.Sleep(500 * time.Millisecond)
	ended, err := s.Store.Release(ctx, p)
	s.released.Store(err == nil)
	return ended, err
}

// Stop waits for the give-backs run aside: once it returns, the store can be
// closed, and no give-back is left to use it.
func TestStopWaitsForGiveBacksAside(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.editorWith(t, "ann", 1, nil, "news")
	b.Add(t, "news", 0, 1)
	var released atomic.Bool
	d, err := dispatcher.New(slowBackStore{b.Store, &released}, b.Locks, b.D.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = d.Next(ctx, ann, 0)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("next = %v; want the request's deadline", err)
	}
	sctx, scancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer scancel()
	if err := d.Stop(sctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !released.Load() {
		t.Fatal("stop returned before the give-back it ran aside ended")
	}
}
