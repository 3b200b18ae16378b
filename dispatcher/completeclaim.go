package dispatcher

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// CompleteAndClaimMany claims up to one task per holder of holders from
// categories, as NextMany does without waiting, and once it has candidates
// locked to claim, commits the outcomes outcomes gives it then (as
// CompleteMany does, done answering each) in the same store transaction
// (store.Store.CompleteAndClaim): a worker with outcomes to write and free
// slots to fill pays one round trip and one commit for both. outcomes is
// called at most once, and only then: the outcomes wait for a writer of
// their own until a claim is sure to carry them.
//
// The order of the locks is a claim's: the candidates' Redis locks are
// taken before the transaction, and those of the claims it ended (for which
// done returned true) and of the candidates it did not claim are given back
// after its COMMIT; done is called only after it. When the joint
// transaction fails, the outcomes are completed alone, as CompleteMany does
// (the joint one wrote nothing), and the claims it returns are none: the
// caller claims after, with NextMany.
//
// It reports joint false, having written nothing, when it did not call
// outcomes or outcomes gave none: nothing to claim for now (no candidate,
// or none whose lock it got; a takeover of an expired claim is left to
// NextMany), or rate limits apply (Config.RateLimits). The writes are
// bounded by ctx.
//
// ending is how many outcomes outcomes gives, when the caller knows (0
// otherwise): a category at its limit in flight (tasks.Workflow.MaxInFlight)
// then still has candidates for the claim, since the outcomes, written
// first in its transaction, leave as much room (see
// tasks.CandidatesParams.Ending). The claim keeps the limit exactly either
// way: it counts the tasks assigned after the outcomes are written.
func (d *Dispatcher) CompleteAndClaimMany(ctx context.Context, outcomes func() ([]Outcome, func(i int, ended *tasks.Ended, err error) (unlock bool)), ending int, holders, categories []string) (claims []*tasks.Claim, joint bool) {
	if len(holders) == 0 || len(categories) == 0 || d.limits != nil {
		return nil, false
	}
	start := time.Now()
	ctx, span := d.tel.tracer.Start(ctx, "worker.complete_and_claim",
		trace.WithAttributes(attrCategories.StringSlice(categories), attrWanted.Int(len(holders))))
	defer endSpan(span, nil)

	picked, err := d.cands.takeN(ctx, categories, len(holders), map[int64]bool{}, takeOpts{many: true, ending: ending})
	if err != nil || len(picked) == 0 {
		if err != nil {
			d.log.WarnContext(ctx, "claim tasks", "err", err)
		}
		return nil, false
	}
	var st claimStats
	st.candidates = len(picked)
	var claimed []int64
	var back []pooled
	defer func() { d.candidatesDone(picked, claimed, back) }()

	locks, err := d.lockPicked(ctx, holders, picked)
	if err != nil {
		d.releaseLocks(ctx, locks)
		back = picked
		d.log.WarnContext(ctx, "claim tasks: lock candidates", "err", err)
		return nil, false
	}
	st.tried = len(picked)
	var batch []tasks.ClaimParams
	var batched []int // index in picked of each of batch
	var unlock []*locker.Lock
	for i, p := range picked {
		switch {
		case locks[i] == nil:
			st.conflicts++
		case p.Status != tasks.StatusPending:
			// A takeover of an expired claim makes a locking read of its
			// own (Store.Claim): it waits for the next claim.
			unlock = append(unlock, locks[i])
			back = append(back, p)
		default:
			batch = append(batch, tasks.ClaimParams{
				TaskID: p.ID, Fence: p.Fence, Status: p.Status,
				Holder: holders[i], Lease: d.cfg.Lease, TraceContext: traceParent(ctx), Workflow: p.Workflow,
				Category: queueCategory(p.category), LimitKey: p.LimitKey,
			})
			batched = append(batched, i)
		}
	}
	if st.conflicts > 0 {
		d.cands.contended(picked[0].category)
	}
	var os []Outcome
	var done func(i int, ended *tasks.Ended, err error) (unlock bool)
	if len(batch) > 0 {
		os, done = outcomes()
	}
	if len(os) == 0 {
		// Nothing to carry: the candidates go back, for NextMany.
		for _, i := range batched {
			unlock = append(unlock, locks[i])
			back = append(back, picked[i])
		}
		d.releaseLocks(ctx, unlock)
		d.recordClaim(ctx, st)
		return nil, false
	}
	span.SetAttributes(attrBatch.Int(len(os)))

	ps := make([]tasks.Outcome, len(os))
	for i, o := range os {
		ps[i] = o.Outcome
	}
	ended, res, err := d.store.CompleteAndClaim(ctx, ps, batch)
	if err != nil {
		// Nothing was written: the candidates go back, and the outcomes
		// are completed alone.
		for _, i := range batched {
			unlock = append(unlock, locks[i])
			back = append(back, picked[i])
		}
		d.releaseLocks(ctx, unlock)
		if !errors.Is(err, tasks.ErrInvalid) {
			d.log.WarnContext(ctx, "complete and claim; completing alone", "err", err)
		}
		d.CompleteMany(ctx, os, done)
		d.recordClaim(ctx, st)
		return nil, true
	}
	// Committed: the outcomes are acknowledged, the claims made.
	d.wakeLimited(ctx, ended)
	unlock = append(unlock, d.completed(ctx, os, ended, done)...)
	for k, r := range res {
		i := batched[k]
		if r.Err != nil {
			unlock = append(unlock, locks[i])
			back = append(back, d.refusedClaim(ctx, picked[i], r.Err, &st)...)
			continue
		}
		claims = append(claims, r.Claim)
		claimed = append(claimed, picked[i].ID)
	}
	d.releaseLocks(ctx, unlock)
	outcome := "claimed"
	if len(claims) == 0 {
		outcome = "none"
	}
	d.tel.claimLatency.Record(ctx, sinceSeconds(start), metric.WithAttributes(attrOutcome.String(outcome)))
	for _, c := range claims {
		d.emit(ctx, claimEvent(c, time.Since(start)))
	}
	d.recordClaim(ctx, st)
	span.SetAttributes(attrCandidates.Int(st.candidates), attrTried.Int(st.tried),
		attrConflicts.Int(st.conflicts), attrRefused.Int(st.refused), attrClaimed.Int(len(claims)))
	return claims, true
}
