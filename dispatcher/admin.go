package dispatcher

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// An operator's actions on tasks, and on categories. The store makes and fences
// each change; the dispatcher keeps its callers in step: a requeued task or a
// resumed category wakes callers waiting for its category, a cancelled task or a
// paused category leaves this process's candidates, and a cancelled claim's
// holder is told.

// Requeue puts a dead task back in the pool (see store.Store.Requeue) and wakes
// a caller waiting for its category. It returns tasks.ErrNotFound for an
// unknown task and an error wrapping tasks.ErrWrongStatus (a
// *tasks.StatusError) for a task that is not dead.
func (d *Dispatcher) Requeue(ctx context.Context, p tasks.ChangeParams) (err error) {
	ctx, span := d.tel.tracer.Start(ctx, "dispatcher.requeue", trace.WithAttributes(attrTaskID.Int64(p.TaskID)))
	defer func() { endSpan(span, err) }()
	c, err := d.store.Requeue(ctx, p)
	if err != nil {
		return Unavailable(fmt.Errorf("requeue: %w", err))
	}
	span.SetAttributes(attrCategory.String(c.Category))
	d.wake(ctx, c.Category)
	return nil
}

// Cancel cancels a task for good, pending or assigned (see
// store.Store.Cancel). For an assigned task it ends the claim: it gives back
// the claim's Redis lock, so that no lock of it is left for anyone to wait
// on, and announces the cancel to the watchers of WatchCancels (on every
// process, with Config.PubSub), so that a worker running the task cancels
// its handler at once rather than at its next renewal. Everything the
// holder sends about the claim afterwards is refused with an error wrapping
// tasks.ErrCancelled. It returns tasks.ErrNotFound for an unknown task and
// an error wrapping tasks.ErrWrongStatus (a *tasks.StatusError) for a task
// that has ended (done, dead or cancelled), changing nothing.
func (d *Dispatcher) Cancel(ctx context.Context, p tasks.ChangeParams) (err error) {
	ctx, span := d.tel.tracer.Start(ctx, "dispatcher.cancel", trace.WithAttributes(attrTaskID.Int64(p.TaskID)))
	defer func() { endSpan(span, err) }()
	c, err := d.store.Cancel(ctx, p)
	if err != nil {
		return Unavailable(fmt.Errorf("cancel: %w", err))
	}
	span.SetAttributes(attrCategory.String(c.Category), attrFence.Int64(c.Fence))
	if c.Holder == "" {
		d.cands.invalidate(c.Category)
		return nil
	}
	d.releaseLock(ctx, c.TaskID, c.Holder)
	d.notify.cancelled(ctx, ClaimRef{TaskID: c.TaskID, Fence: c.Fence})
	return nil
}

// WatchCancels calls fn with each claim a cancel ends (Cancel of an assigned
// task) soon after the cancel committed: a cancel through this dispatcher
// and, with Config.PubSub (and Start's relay running), one through any
// process that shares the wake-up channel. fn runs on the announcing
// goroutine and must not block. A watcher may miss an announcement (Redis
// unreachable, a relay resubscribing): the holder's next renewal learns of
// the cancel anyway, refused with tasks.ErrCancelled. It returns the
// function that ends the watch.
func (d *Dispatcher) WatchCancels(fn func(ClaimRef)) (stop func()) {
	return d.notify.watchCancels(fn)
}

// RequeueMatching requeues the dead tasks p selects, up to p.Limit per call
// (see store.Store.RequeueMatching), and wakes callers waiting for their
// categories. On an error, the result counts what batches committed before it.
func (d *Dispatcher) RequeueMatching(ctx context.Context, p tasks.BulkParams) (_ *tasks.BulkResult, err error) {
	ctx, span := d.tel.tracer.Start(ctx, "dispatcher.requeue_matching")
	defer func() { endSpan(span, err) }()
	res, err := d.store.RequeueMatching(ctx, p)
	if res != nil {
		d.notify.notify(ctx, res.ByCategory)
	}
	if err != nil {
		return res, Unavailable(fmt.Errorf("requeue matching: %w", err))
	}
	return res, nil
}

// CancelMatching cancels the tasks p selects, pending and assigned, up to
// p.Limit per call (see store.Store.CancelMatching). Each claim it ends is
// ended as Cancel ends one: its Redis lock given back (all in one round trip)
// and the cancel announced to the watchers of WatchCancels, so that a worker
// running the task cancels its handler with cause tasks.ErrCancelled. On an
// error, the result counts what batches committed before it, and their
// holders are told all the same.
func (d *Dispatcher) CancelMatching(ctx context.Context, p tasks.BulkParams) (_ *tasks.BulkResult, err error) {
	ctx, span := d.tel.tracer.Start(ctx, "dispatcher.cancel_matching")
	defer func() { endSpan(span, err) }()
	res, err := d.store.CancelMatching(ctx, p)
	if res != nil {
		for cat := range res.ByCategory {
			d.cands.invalidate(cat)
		}
		locks := make([]*locker.Lock, len(res.Claims))
		for i, c := range res.Claims {
			locks[i] = d.locks.Lock(d.lockKey(c.TaskID), c.Holder)
		}
		d.releaseLocks(ctx, locks)
		for _, c := range res.Claims {
			d.notify.cancelled(ctx, ClaimRef{TaskID: c.TaskID, Fence: c.Fence})
		}
	}
	if err != nil {
		return res, Unavailable(fmt.Errorf("cancel matching: %w", err))
	}
	return res, nil
}

// PauseCategory pauses a category (see store.Store.PauseCategory): from the
// moment it returns, no claim on any replica takes its tasks, to editors or to
// workers; live claims end as usual. It returns the pause and whether this call
// made it (false: it was paused already). A category tasks cannot have is an
// error wrapping tasks.ErrInvalid.
func (d *Dispatcher) PauseCategory(ctx context.Context, category string) (_ tasks.PausedCategory, paused bool, err error) {
	ctx, span := d.tel.tracer.Start(ctx, "dispatcher.pause", trace.WithAttributes(attrCategory.String(category)))
	defer func() { endSpan(span, err) }()
	p, paused, err := d.store.PauseCategory(ctx, category)
	if err != nil {
		return p, false, Unavailable(err)
	}
	d.cands.invalidate(category)
	return p, paused, nil
}

// resumeWake is how many callers waiting for a resumed category one wake-up
// reaches: all of them, on every process that shares the wake-up channel.
const resumeWake = 1 << 30

// ResumeCategory ends the pause of a category (see
// store.Store.ResumeCategory) and wakes the callers waiting for it. It
// returns whether this call ended a pause (false: it was not paused).
func (d *Dispatcher) ResumeCategory(ctx context.Context, category string) (resumed bool, err error) {
	ctx, span := d.tel.tracer.Start(ctx, "dispatcher.resume", trace.WithAttributes(attrCategory.String(category)))
	defer func() { endSpan(span, err) }()
	resumed, err = d.store.ResumeCategory(ctx, category)
	if err != nil {
		return false, Unavailable(err)
	}
	d.notify.notify(ctx, map[string]int{category: resumeWake})
	return resumed, nil
}
