package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// Span attributes of a batch of claims.
var (
	attrCategories = attribute.Key("taskd.categories")
	attrWanted     = attribute.Key("taskd.claims.wanted")
	attrClaimed    = attribute.Key("taskd.claims.made")
	attrBatch      = attribute.Key("taskd.batch.size")
)

// NextMany claims up to one task per holder of holders (a worker's free
// slots) from categories, as Next does for one: with wait > 0 (capped at
// Config.MaxWait) and nothing claimable, it waits until a task arrives or
// the wait ends, and then returns ErrNoTask. It may claim fewer than asked,
// and returns the claims it made (at least one when err is nil); each
// claim's Task.Holder is the holder it was made for. With rate limits
// (Config.RateLimits), one batch is of one category, and of a limited one
// takes as many claims as its limit lets through. The worker runtime
// claims with it.
func (d *Dispatcher) NextMany(ctx context.Context, holders, categories []string, wait time.Duration) ([]*tasks.Claim, error) {
	return waitForTask(ctx, d, categories, wait, func() ([]*tasks.Claim, error) { return d.claimMany(ctx, holders, categories) })
}

// claimMany makes up to len(holders) claims, one per holder, or returns
// ErrNoTask.
//
// Round trips on the happy path, whatever the number of claims: one
// ObtainEach for the candidates' locks, each under the token of the holder it
// is for, and one store.Store.ClaimBatch for the fenced claims (one commit).
// A candidate whose lock another process holds is skipped; one whose claim
// the store refused has its lock given back (one ReleaseAll for all of
// them). A candidate whose lease passed (not pending) is claimed on its own
// with store.Store.Claim, which records the takeover.
func (d *Dispatcher) claimMany(ctx context.Context, holders, categories []string) (claims []*tasks.Claim, err error) {
	if len(categories) == 0 || len(holders) == 0 {
		return nil, ErrNoTask
	}
	// Traced only once there is something to trace (candidates to try, or an
	// error), unless the caller's span records: a worker's idle polls make no
	// traces. The span is dated from the start of the call.
	start := time.Now()
	parent := ctx
	var span trace.Span
	begin := func() {
		if span == nil {
			ctx, span = d.tel.tracer.Start(parent, "dispatcher.claim_many", trace.WithTimestamp(start),
				trace.WithAttributes(attrCategories.StringSlice(categories), attrWanted.Int(len(holders))))
		}
	}
	if trace.SpanFromContext(ctx).IsRecording() {
		begin()
	}
	var st claimStats
	defer func() {
		outcome := "claimed"
		switch {
		case errors.Is(err, ErrNoTask):
			outcome = "none"
		case err != nil:
			outcome = "error"
			begin()
		}
		d.tel.claimLatency.Record(ctx, sinceSeconds(start), metric.WithAttributes(attrOutcome.String(outcome)))
		for _, c := range claims {
			d.emit(ctx, claimEvent(c, time.Since(start)))
		}
		d.recordClaim(ctx, st)
		if span == nil {
			return
		}
		span.SetAttributes(attrCandidates.Int(st.candidates), attrTried.Int(st.tried),
			attrConflicts.Int(st.conflicts), attrRefused.Int(st.refused), attrClaimed.Int(len(claims)),
			attrOutcome.String(outcome))
		endSpan(span, err)
	}()

	tried := make(map[int64]bool)
	free := holders
	// With rate limits, a batch is of one category, those closed left out,
	// and takes as many claims as the category's limit lets it.
	opt := takeOpts{many: true}
	if d.limits != nil {
		opt.one = d.limits.limited(categories)
	}
	for range claimAttempts {
		open := categories
		if opt.one {
			open = d.limits.open(categories)
		}
		picked, err := d.cands.takeN(ctx, open, len(free), tried, opt)
		if err != nil {
			return claims, Unavailable(fmt.Errorf("next: %w", err))
		}
		if len(picked) == 0 {
			break
		}
		begin()
		st.candidates += len(picked)
		for _, p := range picked {
			tried[p.ID] = true
		}
		if opt.one {
			// Those the limit refused leave the pool without waking anyone
			// (the category is closed until it lets more through); on an
			// error they go back.
			n, err := d.rateLimit(ctx, picked[0].category, len(picked))
			if rest := picked[n:]; len(rest) > 0 {
				var back []pooled
				if err != nil {
					back = rest
				}
				d.candidatesDone(rest, nil, back)
				picked = picked[:n]
			}
			if err != nil {
				if len(claims) > 0 {
					d.log.WarnContext(ctx, "claim tasks", "err", err)
					return claims, nil
				}
				return nil, err
			}
			if n == 0 {
				continue
			}
		}
		got, err := d.claimEach(ctx, free[:len(picked)], picked, &st)
		claims = append(claims, got...)
		if err != nil {
			if len(claims) > 0 {
				// What was claimed stands; the error shows again next time.
				d.log.WarnContext(ctx, "claim tasks", "err", err)
				return claims, nil
			}
			return nil, err
		}
		if len(got) > 0 {
			return claims, nil
		}
		free = holders[len(claims):]
	}
	if len(claims) == 0 {
		return nil, ErrNoTask
	}
	return claims, nil
}

// lockPicked obtains the lock of each candidate of picked, picked[i]'s under
// holders[i]'s token, for a lease, in one round trip (locker.ObtainEach).
func (d *Dispatcher) lockPicked(ctx context.Context, holders []string, picked []pooled) ([]*locker.Lock, error) {
	each := make([]locker.Each, len(picked))
	for i, p := range picked {
		each[i] = locker.Each{Key: d.lockKey(p.ID), Token: holders[i], TTL: d.cfg.Lease}
	}
	return d.locks.ObtainEach(ctx, each)
}

// claimEach tries to claim picked[i] for holders[i], each: one ObtainEach
// over their locks, then one ClaimBatch for the pending ones whose lock it
// got. It returns the claims made; holders whose candidate was not claimed
// are left free.
func (d *Dispatcher) claimEach(ctx context.Context, holders []string, picked []pooled, st *claimStats) (claims []*tasks.Claim, err error) {
	var claimed []int64
	var back []pooled
	defer func() { d.candidatesDone(picked, claimed, back) }()

	locks, err := d.lockPicked(ctx, holders, picked)
	if err == nil && ctx.Err() != nil {
		// The caller is gone: nobody would run a claim.
		d.releaseLocks(ctx, locks)
		back = picked
		return nil, context.Cause(ctx)
	}
	if err != nil {
		// A store that cannot answer: give back whatever was taken.
		d.releaseLocks(ctx, locks)
		back = picked
		return nil, fmt.Errorf("next: lock candidates: %w: %w", ErrUnavailable, err)
	}
	st.tried += len(picked)
	// Under a context that outlives ctx by a little (never past its
	// deadline), so that claims made as ctx is cancelled are known, and given
	// back.
	sctx, settled := settling(ctx)
	defer settled()
	defer func() {
		if ctx.Err() != nil && len(claims) > 0 {
			for _, c := range claims {
				d.giveBack(ctx, Claimant{Holder: c.Task.Holder}, c)
			}
			claims, err = nil, context.Cause(ctx)
		}
	}()
	var batch []tasks.ClaimParams
	var batched []int // index in picked of each of batch
	var unlock []*locker.Lock
	conflicts := false
	for i, p := range picked {
		if locks[i] == nil {
			st.conflicts++
			conflicts = true
			continue
		}
		cp := tasks.ClaimParams{
			TaskID: p.ID, Fence: p.Fence, Status: p.Status,
			Holder: holders[i], Lease: d.cfg.Lease, TraceContext: traceParent(ctx), Workflow: p.Workflow,
			Category: queueCategory(p.category), LimitKey: p.LimitKey,
		}
		if p.Status == tasks.StatusPending {
			batch = append(batch, cp)
			batched = append(batched, i)
			continue
		}
		// A takeover of an expired claim: a locking read of its own.
		claim, err := d.store.Claim(sctx, cp)
		if err != nil {
			unlock = append(unlock, locks[i])
			back = append(back, d.refusedClaim(ctx, p, err, st)...)
			continue
		}
		claims = append(claims, claim)
		claimed = append(claimed, p.ID)
	}
	if conflicts {
		d.cands.contended(picked[0].category)
	}
	if len(batch) > 0 {
		res, err := d.store.ClaimBatch(sctx, batch)
		if err != nil {
			for _, i := range batched {
				unlock = append(unlock, locks[i])
				back = append(back, picked[i])
			}
			d.releaseLocks(ctx, unlock)
			return claims, Unavailable(fmt.Errorf("next: %w", err))
		}
		for k, r := range res {
			i := batched[k]
			if r.Err != nil {
				unlock = append(unlock, locks[i])
				back = append(back, d.refusedClaim(ctx, picked[i], r.Err, st)...)
				continue
			}
			claims = append(claims, r.Claim)
			claimed = append(claimed, picked[i].ID)
		}
	}
	d.releaseLocks(ctx, unlock)
	return claims, nil
}

// refusedClaim notes a worker's claim of p that the store refused with err,
// and returns p when it should go back to the pool.
func (d *Dispatcher) refusedClaim(ctx context.Context, p pooled, err error, st *claimStats) []pooled {
	switch {
	case errors.Is(err, tasks.ErrPaused), errors.Is(err, tasks.ErrLimited):
		// Paused, or at a limit in flight: not stale. The category's
		// candidates are read again, which leaves out what is at its limit.
		d.cands.paused(p.category)
		return nil
	case errors.Is(err, tasks.ErrStale), errors.Is(err, tasks.ErrNotFound):
		st.refused++
		d.cands.contended(p.category)
		d.cands.stale(p.category)
		return nil
	default:
		d.log.WarnContext(ctx, "claim task", "task_id", p.ID, "err", err)
		return []pooled{p}
	}
}

// releaseLocks gives back many claims' Redis locks in one round trip, as
// releaseLock does one. Nil locks are skipped.
func (d *Dispatcher) releaseLocks(ctx context.Context, locks []*locker.Lock) {
	if len(locks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockCleanupTimeout)
	defer cancel()
	if _, err := d.locks.ReleaseAll(ctx, locks); err != nil {
		d.log.WarnContext(ctx, "release task locks", "locks", len(locks), "err", err)
	}
}
