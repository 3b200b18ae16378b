package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// This file holds the batch forms of the claim's writes, for the worker
// runtime: many claims completed in one store transaction, many leases
// renewed in one round trip to each store. Each claim keeps its own lock
// and fence.

// Outcome is what a worker made of one claimed task, for CompleteMany.
type Outcome struct {
	tasks.Outcome
	// Span, when set, is the span of the handler's run, started linked to
	// the span that made the claim (the claim's Task.TraceContext): it is
	// told the task's category and new status, and the hold time is
	// recorded under it.
	Span trace.Span
}

// CompleteMany commits outcomes with store.Store.Complete, in one
// transaction when it can: a batch the store refused as a whole for one
// member's sake (a value it would not take) or that kept losing lock
// conflicts is split in halves, each written on its own, so that one member
// never fails the others. A result the store refused alone is recorded as
// the failure it is, dead, and os[i] is rewritten so (Result nil, Err saying
// why, Dead): running the handler again would produce it again.
//
// For each outcome, in order, CompleteMany counts what the store answered
// (a ClaimEvent, observed under the outcome's Span when set, or a stale
// write) and calls done with the ended claim, or the
// error (wrapping tasks.ErrStale for a claim the holder no longer has, or
// ErrUnavailable); then it gives back, in one round trip, the Redis locks of
// the claims for which done returned true. The writes are bounded by ctx.
func (d *Dispatcher) CompleteMany(ctx context.Context, os []Outcome, done func(i int, ended *tasks.Ended, err error) (unlock bool)) {
	ctx, span := d.tel.tracer.Start(ctx, "worker.complete", trace.WithAttributes(attrBatch.Int(len(os))))
	defer endSpan(span, nil)
	res := d.complete(ctx, os)
	d.releaseLocks(ctx, d.completed(ctx, os, res, done))
}

// completed counts the store's answers res about os and hands each to done,
// as CompleteMany does, and returns the locks to give back: those of the
// claims for which done returned true.
func (d *Dispatcher) completed(ctx context.Context, os []Outcome, res []tasks.Completed, done func(i int, ended *tasks.Ended, err error) (unlock bool)) []*locker.Lock {
	var unlock []*locker.Lock
	for i, o := range os {
		op := OpSubmit
		switch {
		case o.Result != nil:
		case o.Snooze != nil:
			op = OpSnooze
		default:
			op = OpFail
		}
		ended, err := res[i].Ended, Unavailable(res[i].Err)
		switch {
		case err == nil:
			// Under the run's span: the hold time's exemplar names the
			// task's run, not the batch.
			if o.Span != nil {
				// The run's span was started linked to its claim.
				d.recordEnded(trace.ContextWithSpan(ctx, o.Span), o.Span, ended, string(op))
			} else {
				d.recordEnded(ctx, trace.SpanFromContext(context.Background()), ended, string(op))
			}
		default:
			d.countStale(ctx, string(op), err)
		}
		if done(i, ended, err) {
			unlock = append(unlock, d.locks.Lock(d.lockKey(o.TaskID), o.Holder))
		}
	}
	return unlock
}

// complete writes os and returns each one's answer; see CompleteMany.
func (d *Dispatcher) complete(ctx context.Context, os []Outcome) []tasks.Completed {
	ps := make([]tasks.Outcome, len(os))
	for i, o := range os {
		ps[i] = o.Outcome
	}
	res, err := d.store.Complete(ctx, ps)
	if err == nil {
		d.wakeLimited(ctx, res)
		return res
	}
	splittable := errors.Is(err, tasks.ErrInvalid) || errors.Is(err, tasks.ErrBusy)
	switch {
	case splittable && len(os) > 1 && ctx.Err() == nil:
		half := len(os) / 2
		return append(d.complete(ctx, os[:half]), d.complete(ctx, os[half:])...)
	case errors.Is(err, tasks.ErrInvalid) && os[0].Result != nil:
		o := &os[0].Outcome
		o.Err = fmt.Sprintf("handler result refused: %v", err)
		o.Result, o.Dead = nil, true
		return d.complete(ctx, os)
	}
	res = make([]tasks.Completed, len(os))
	for i := range res {
		res[i].Err = err
	}
	return res
}

// HeartbeatMany renews many claims' leases with one
// store.Store.HeartbeatBatch, bounded by ctx, and extends the Redis locks of
// those renewed with one ObtainEach (each for the lease, or the time left
// to the maximum hold when that is shorter). Each answer says the lease's
// new end or why it was refused (tasks.ErrStale: the holder no longer has
// the claim; tasks.ErrHoldLimit), and each refusal counts as a stale write.
// The error, wrapping ErrUnavailable when the store is unreachable, is
// that of the whole batch. A lock that could not be extended is only
// logged: the claim is live in the store, which is what counts, and the
// sweeper restores the lock.
func (d *Dispatcher) HeartbeatMany(ctx context.Context, ps []tasks.HeartbeatParams) ([]tasks.Renewed, error) {
	hctx, span := d.tel.tracer.Start(ctx, "worker.heartbeat", trace.WithAttributes(attrBatch.Int(len(ps))))
	res, err := d.store.HeartbeatBatch(hctx, ps)
	endSpan(span, err)
	if err != nil {
		return nil, Unavailable(err)
	}
	var each []locker.Each
	for i, p := range ps {
		if res[i].Err != nil {
			d.countStale(ctx, "heartbeat", res[i].Err)
			continue
		}
		// The store caps the lease at the maximum hold; the lock must not
		// outlive it, or it would keep the task from being claimed once the
		// claim ends.
		if ttl := min(d.cfg.Lease, time.Until(res[i].LeaseExpiresAt)); ttl >= locker.MinTTL {
			each = append(each, locker.Each{Key: d.lockKey(p.TaskID), Token: p.Holder, TTL: ttl})
		}
	}
	if len(each) > 0 {
		if _, err := d.locks.ObtainEach(ctx, each); err != nil {
			d.log.WarnContext(ctx, "extend task locks", "locks", len(each), "err", err)
		}
	}
	return res, nil
}

// ReleaseLock gives back the Redis lock of a claim holder no longer has (a
// lost lease, a release refused as stale), if Redis still has it under
// holder's token: a lock that is gone is no error, and other failures are
// only logged (the lock's time to live frees it). It does not end with ctx.
func (d *Dispatcher) ReleaseLock(ctx context.Context, taskID int64, holder string) {
	d.releaseLock(ctx, taskID, holder)
}

// EndedApart records a claim that its holder ended with a result in a
// transaction of its own (a handler's CompleteTx), once that committed, as
// CompleteMany records the claims it ends: a ClaimEvent of a submit, its hold
// time observed under span (the handler's run, started linked to its claim).
// It writes nothing and gives no lock back.
func (d *Dispatcher) EndedApart(ctx context.Context, span trace.Span, ended *tasks.Ended) {
	d.recordEnded(trace.ContextWithSpan(ctx, span), span, ended, string(OpSubmit))
}

// wakeLimited wakes the callers waiting for the categories with a limit in
// flight (Workflow.Limited) in which res ended claims: a claim refused at the
// limit (tasks.ErrLimited) waits for a wake, and the end of a claim is what
// makes room. Categories without a limit publish nothing.
func (d *Dispatcher) wakeLimited(ctx context.Context, res []tasks.Completed) {
	var counts map[string]int
	for _, r := range res {
		if r.Ended == nil || !d.cfg.Workflows[r.Ended.Category].Limited() {
			continue
		}
		if counts == nil {
			counts = map[string]int{}
		}
		counts[r.Ended.Category]++
	}
	if counts != nil {
		d.notify.notify(ctx, counts)
	}
}
