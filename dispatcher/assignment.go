package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// ClaimRef names a claim: the task and the fence the claim was given.
type ClaimRef struct {
	TaskID int64
	Fence  int64
}

// Heartbeat extends the lease of c's claim ref and returns the new deadline
// (database clock). The store decides: it returns tasks.ErrStale when the
// claim is not c's live claim any more (wrong fence, expired, taken over) and
// tasks.ErrHoldLimit when the claim has been held for the maximum hold time.
// The Redis lock is then extended to match, or re-created if Redis lost it.
func (d *Dispatcher) Heartbeat(ctx context.Context, c Claimant, ref ClaimRef) (_ time.Time, err error) {
	ctx, span := d.startWrite(ctx, "dispatcher.heartbeat", c, ref)
	defer func() { endSpan(span, err) }()
	expires, err := d.store.Heartbeat(ctx, tasks.HeartbeatParams{
		TaskID: ref.TaskID, Fence: ref.Fence, Holder: c.Holder, Lease: d.cfg.Lease,
	})
	if err != nil {
		d.countStale(ctx, "heartbeat", err)
		return time.Time{}, Unavailable(err)
	}
	// The store caps the lease at the maximum hold; the lock must not outlive
	// it, or it would keep the task from being claimed once the claim ends.
	ttl := min(d.cfg.Lease, time.Until(expires))
	if ttl >= locker.MinTTL {
		_, err := d.locks.Obtain(ctx, d.lockKey(ref.TaskID), ttl, &locker.Options{Token: c.Holder})
		if err != nil {
			// The claim is live in the store, which is what counts; the
			// sweeper reconciles the lock.
			d.log.WarnContext(ctx, "extend task lock", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
		}
	}
	return expires, nil
}

// Submit commits c's result for its claim ref and returns c's next
// assignment, or nil when nothing is claimable now. It returns
// tasks.ErrStale, changing nothing, when the claim is not c's live claim, and
// tasks.ErrInvalid when result is not valid JSON. Once the result is
// committed Submit does not fail: if finding the next assignment fails, that
// is logged and the next is nil, and the claimant's next Next reports it.
//
// The cycle takes one round trip to each store: the next candidate is chosen
// and its Redis lock taken first, in the call that gives back the submitted
// task's lock (see handover), and then one batch submits and claims. Without
// a candidate to take, the submit goes alone and the lock is given back on
// its own.
func (d *Dispatcher) Submit(ctx context.Context, c Claimant, ref ClaimRef, result json.RawMessage) (next *tasks.Claim, err error) {
	return d.SubmitWith(ctx, c, ref, Submission{Result: result})
}

// Submission is what a claimant submits for its claim: its result and, for a
// task with stages, its decision and notes (see tasks.SubmitParams).
type Submission struct {
	Result   json.RawMessage
	Decision string
	Notes    string
}

// SubmitWith is Submit with a decision and notes: at a task's stage before its
// last, or with tasks.DecisionSendBack, the task goes back to the pool at its
// next stage, or the one before, and callers waiting for its category are
// woken. It returns an error wrapping tasks.ErrInvalid, changing nothing, for a
// send back at a task's first stage, and tasks.ErrSendBackLimit, changing
// nothing, for a send back of a task sent back as many times as its category
// allows (tasks.Workflow.MaxSendBacks).
func (d *Dispatcher) SubmitWith(ctx context.Context, c Claimant, ref ClaimRef, sub Submission) (next *tasks.Claim, err error) {
	// Before anything is sent: a result the store refuses changes nothing,
	// locks included.
	if err := tasks.CheckSubmission(sub.Result, sub.Decision, sub.Notes); err != nil {
		return nil, fmt.Errorf("submit task %d: %w", ref.TaskID, err)
	}
	if sub.Decision == tasks.DecisionSendBack {
		if err := d.checkSendBacks(ctx, c, ref); err != nil {
			return nil, err
		}
	}
	ctx, span := d.startWrite(ctx, "dispatcher.submit", c, ref)
	defer func() { endSpan(span, err) }()
	h := &handover{
		key: d.lockKey(ref.TaskID),
		submit: &tasks.SubmitParams{TaskID: ref.TaskID, Fence: ref.Fence, Holder: c.Holder, Result: sub.Result,
			Decision: sub.Decision, Notes: sub.Notes},
	}
	// The claimant is ending its claim, so next need not look for a held one;
	// should a concurrent request have claimed for it meanwhile, the store
	// turns the claim into that one.
	next, nextErr := d.next(ctx, c, 0, false, h)
	if sp := h.submit; sp != nil {
		// No candidate got as far as a claim: the submit goes alone.
		h.submit = nil
		next = nil
		h.ended, h.err = d.store.Submit(ctx, *sp)
	}
	if h.err != nil {
		d.countStale(ctx, "submit", h.err)
		return nil, Unavailable(h.err)
	}
	if !h.done {
		d.releaseLock(ctx, ref.TaskID, c.Holder)
	}
	d.record(ctx, span, h.ended, "submit")
	if h.ended.Status == tasks.StatusPending {
		// On to another stage: back in the pool for whoever takes it.
		span.SetAttributes(attrStage.String(h.ended.Stage))
		d.wake(ctx, h.ended.Category)
	}
	switch {
	case nextErr == nil, errors.Is(nextErr, ErrNoTask):
	case errors.Is(nextErr, tasks.ErrEditorDisabled):
		// Disabled since its claim began: no next, and nothing is wrong.
		d.log.DebugContext(ctx, "no next assignment after submit: the editor is disabled", "task_id", ref.TaskID, "fence", ref.Fence)
	default:
		d.log.WarnContext(ctx, "find next assignment after submit", "task_id", ref.TaskID, "fence", ref.Fence, "err", nextErr)
	}
	return next, nil
}

// checkSendBacks refuses with tasks.ErrSendBackLimit a send back of ref's task
// by c, its holder, when it was sent back as many times as its category
// allows. Round trips: one, and one more at the limit. The count read
// is the one the submit would add to: a task's results are written only by
// submits of its live claim, which is ref's (if it is not, the submit is
// refused as stale anyway), so no other send back can come in between.
func (d *Dispatcher) checkSendBacks(ctx context.Context, c Claimant, ref ClaimRef) error {
	category, n, err := d.store.SendBacks(ctx, ref.TaskID)
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return nil // the submit says so
	case err != nil:
		return Unavailable(fmt.Errorf("submit task %d: %w", ref.TaskID, err))
	}
	limit := d.cfg.Workflows[category].SendBackLimit()
	if n < limit {
		return nil
	}
	// A claim that is not c's live one is refused as stale by the submit, as
	// any other write of it: the limit is told only to the task's holder.
	t, err := d.store.GetTask(ctx, ref.TaskID)
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return nil
	case err != nil:
		return Unavailable(fmt.Errorf("submit task %d: %w", ref.TaskID, err))
	case t.Status != tasks.StatusAssigned || t.Fence != ref.Fence || t.Holder != c.Holder:
		return nil
	}
	return fmt.Errorf("submit task %d: %w: it was sent back %d times, the most its category %q allows; approve it or decide otherwise", ref.TaskID, tasks.ErrSendBackLimit, n, category)
}

// Release gives c's claim ref back to the pool now; reason goes into the
// audit record. An editor is not offered the task again for a while
// (store.Config.ReleaseCooldown); everyone else is at once. It returns tasks.ErrStale, changing nothing, when the claim is
// not c's live claim.
func (d *Dispatcher) Release(ctx context.Context, c Claimant, ref ClaimRef, reason string) error {
	return d.release(ctx, c, ref, reason, false)
}

// Skip is Release for an editor who does not want the task: it is not
// offered to that editor again for a while (store.Config.SkipFor), and is to
// everyone else at once. It returns tasks.ErrStale, changing nothing, when the
// claim is not c's live claim, and an error wrapping tasks.ErrInvalid when c
// is not an editor.
func (d *Dispatcher) Skip(ctx context.Context, c Claimant, ref ClaimRef, reason string) error {
	return d.release(ctx, c, ref, reason, true)
}

func (d *Dispatcher) release(ctx context.Context, c Claimant, ref ClaimRef, reason string, skip bool) (err error) {
	ctx, span := d.startWrite(ctx, "dispatcher.release", c, ref)
	defer func() { endSpan(span, err) }()
	ended, err := d.store.Release(ctx, tasks.ReleaseParams{
		TaskID: ref.TaskID, Fence: ref.Fence, Holder: c.Holder, Reason: reason, Skip: skip,
	})
	if err != nil {
		d.countStale(ctx, "release", err)
		return Unavailable(err)
	}
	if ended.Withheld > 0 && c.EditorID != 0 {
		d.skips.add(c.EditorID, ref.TaskID, time.Now(), ended.Withheld)
	}
	d.finish(ctx, span, ended, "release")
	d.wake(ctx, ended.Category)
	return nil
}

// giveBackTimeout bounds giving back a claim made for a caller whose context
// ended (see settling).
const giveBackTimeout = 5 * time.Second

// giveBack gives back claim, made for c by a request that ended while the
// claim was being made, and so will not answer with it: c never learnt of
// it. Unlike Release, the task is kept from nobody, c included, and its
// 'released' event says "undelivered" (tasks.ReleaseParams.Undelivered).
// Should that fail, the claim ends when its lease passes.
func (d *Dispatcher) giveBack(ctx context.Context, c Claimant, claim *tasks.Claim) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	ref := ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}
	ctx, span := d.startWrite(ctx, "dispatcher.give_back", c, ref)
	ended, err := d.store.Release(ctx, tasks.ReleaseParams{
		TaskID: ref.TaskID, Fence: ref.Fence, Holder: c.Holder, Undelivered: true,
	})
	if err != nil {
		endSpan(span, err)
		d.log.WarnContext(ctx, "give back a claim made for a request that ended", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
		return
	}
	d.finish(ctx, span, ended, "release")
	endSpan(span, nil)
	d.wake(ctx, ended.Category)
	d.log.DebugContext(ctx, "claim given back: its request ended", "task_id", ref.TaskID, "fence", ref.Fence)
}

// settling returns the context a claim's store write runs under: ctx's
// values, and ctx's end only giveBackTimeout after ctx ends, but never after
// ctx's deadline. A claim in flight when ctx is cancelled (a long poll
// replaced, a client gone) so learns whether it was made, and one made is
// given back (giveBack) instead of being left to its lease: a store write
// whose caller stops waiting may still commit (see store.Store.Claim). A
// deadline bounds the caller's answer (an API request's
// http.request_timeout): a write still in flight then ends with ctx, and a
// claim it committed is left to its lease. Call stop once the write
// returned.
func settling(ctx context.Context) (_ context.Context, stop func()) {
	sctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer
	done := false
	unhook := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		grace := giveBackTimeout
		if deadline, ok := ctx.Deadline(); ok {
			grace = min(grace, time.Until(deadline))
		}
		if grace <= 0 {
			cancel(context.Cause(ctx))
			return
		}
		timer = time.AfterFunc(grace, func() { cancel(context.Cause(ctx)) })
	})
	return sctx, func() {
		unhook()
		mu.Lock()
		done = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}

// finish follows a store write that ended a claim: it frees the claim's
// Redis lock, records how long the claim was held, and links the write's
// span to the span that made the claim.
func (d *Dispatcher) finish(ctx context.Context, span trace.Span, ended *tasks.Ended, op string) {
	d.releaseLock(ctx, ended.TaskID, ended.Holder)
	d.record(ctx, span, ended, op)
}

// record notes a claim the store ended: its Event (with how long it was
// held), the task's new status as the write's span's outcome, and a link
// from that span to the span that made the claim.
func (d *Dispatcher) record(ctx context.Context, span trace.Span, ended *tasks.Ended, op string) {
	for _, l := range claimLink(ended.TraceContext) {
		span.AddLink(l)
	}
	d.recordEnded(ctx, span, ended, op)
}

// recordEnded is record without the link, for a span that was started with
// it (a worker's run).
func (d *Dispatcher) recordEnded(ctx context.Context, span trace.Span, ended *tasks.Ended, op string) {
	span.SetAttributes(attrCategory.String(ended.Category), attrOutcome.String(string(ended.Status)))
	d.emit(ctx, ClaimEvent{Op: Op(op), Category: ended.Category, Held: ended.EndedAt.Sub(ended.AssignedAt)})
}

// ForceRelease takes a task back from whoever holds it (an operator's
// action): the store bumps the fence, so everything the old holder sends
// afterwards is refused as stale. It returns tasks.ErrNotFound for an unknown
// task and tasks.ErrStale when nobody holds it.
func (d *Dispatcher) ForceRelease(ctx context.Context, taskID int64) (err error) {
	ctx, span := d.tel.tracer.Start(ctx, "dispatcher.force_release", trace.WithAttributes(attrTaskID.Int64(taskID)))
	defer func() { endSpan(span, err) }()
	ended, err := d.store.ForceRelease(ctx, taskID)
	if err != nil {
		return Unavailable(fmt.Errorf("force release: %w", err))
	}
	d.finish(ctx, span, ended, "force_release")
	d.wake(ctx, ended.Category)
	return nil
}

// DisableEditor disables an editor (an operator's action) and revokes the
// claims it holds, as ForceRelease does: from then on the store refuses the
// editor every claim with tasks.ErrEditorDisabled, whatever a caller's
// Claimant says. It returns the revoked claims, and tasks.ErrNotFound for an
// unknown editor.
func (d *Dispatcher) DisableEditor(ctx context.Context, editorID int64) (_ []tasks.Revoked, err error) {
	ctx, span := d.tel.tracer.Start(ctx, "dispatcher.disable_editor", trace.WithAttributes(attrEditorID.Int64(editorID)))
	defer func() { endSpan(span, err) }()
	revoked, err := d.store.DisableEditor(ctx, editorID)
	if err != nil {
		return nil, Unavailable(fmt.Errorf("disable editor: %w", err))
	}
	for i := range revoked {
		r := &revoked[i]
		if i == 0 {
			span.SetAttributes(attrTaskID.Int64(r.TaskID), attrFence.Int64(r.Fence))
		}
		d.finish(ctx, span, &r.Ended, "disable_editor")
		d.wake(ctx, r.Category)
	}
	return revoked, nil
}

// wake wakes a caller waiting for a task of category.
func (d *Dispatcher) wake(ctx context.Context, category string) {
	d.notify.notify(ctx, map[string]int{category: 1})
}

// startWrite starts the span of a write about a claim.
func (d *Dispatcher) startWrite(ctx context.Context, name string, c Claimant, ref ClaimRef) (context.Context, trace.Span) {
	return d.tel.tracer.Start(ctx, name, trace.WithAttributes(claimerAttrs(c)...),
		trace.WithAttributes(attrTaskID.Int64(ref.TaskID), attrFence.Int64(ref.Fence)))
}

// countStale counts a write about a claim that the store refused as stale.
func (d *Dispatcher) countStale(ctx context.Context, op string, err error) {
	if errors.Is(err, tasks.ErrStale) {
		d.stats.refusedWrites.Add(1)
		d.tel.staleWrites.Add(ctx, 1, metric.WithAttributes(attrOperation.String(op)))
	}
}
