package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/taskd/taskd/tasks"
)

// SubmitAndClaim submits s's result, as Submit does, and claims c's task, as
// Claim does, in one transaction and one round trip: the cycle of a claimant
// that submits and moves on to its next task. The claim is made only if the
// submit is accepted; a claim the store refuses leaves the submit committed and
// is reported in Handover.Refused. c.Status must be StatusPending (the claim
// of a task whose lease passed takes a locking read of its own: use Submit, then
// Claim), and s and c must name the same holder and different tasks.
//
// Round trips: one, shared with the concurrent writes of other claimants that
// arrive together (see Config.GroupCommit); a ctx that ends while it is in
// flight returns ctx's cause, and the submit and claim may still have committed.
//
// It returns ErrStale, changing nothing, if the submit is refused, and
// ErrInvalid, changing nothing, for bad params.
func (s *Store) SubmitAndClaim(ctx context.Context, sp tasks.SubmitParams, cp tasks.ClaimParams) (*tasks.Handover, error) {
	fail := func(err error) (*tasks.Handover, error) {
		return nil, fmt.Errorf("submit task %d and claim task %d: %w", sp.TaskID, cp.TaskID, err)
	}
	switch {
	case cp.Status != tasks.StatusPending:
		return fail(fmt.Errorf("%w: the task to claim must be pending, not %q", tasks.ErrInvalid, cp.Status))
	case sp.Holder != cp.Holder:
		return fail(fmt.Errorf("%w: the submit's holder %q is not the claim's %q", tasks.ErrInvalid, sp.Holder, cp.Holder))
	case sp.TaskID == cp.TaskID:
		return fail(fmt.Errorf("%w: the task to claim is the one submitted", tasks.ErrInvalid))
	}
	if err := tasks.CheckSubmission(sp.Result, sp.Decision, sp.Notes); err != nil {
		return fail(err)
	}
	lease, err := s.checkClaimParams(cp)
	if err != nil {
		return fail(err)
	}
	// The cycle's rounds keep the project's lock order: the editor's row
	// (none for a worker), then the submitted task's row, then the claimed
	// task's. The claim is guarded by the submit (see Cycles), so a refused
	// submit claims nothing, and its busy check runs after the UPDATE to done
	// cleared the submitted task's editor_id.
	if s.limited(cp) {
		// A claim in a limited category takes Claim's locking path, which
		// keeps the limits: after the submit, which then commits alone.
		return s.submitThenClaim(ctx, sp, cp)
	}
	c := &cycle{submit: &sp, claim: &cp, lease: lease}
	if err := s.groupedCycle(ctx, c); err != nil {
		return fail(lostRace(err))
	}
	ended, err := c.submitted.ended(sp, c.foundSubmitted)
	if err != nil {
		return fail(s.refusal(ctx, claimRef{sp.TaskID, sp.Fence, sp.Holder}, err))
	}
	h := &tasks.Handover{Ended: ended}
	h.Claim, h.Refused = c.claimed.claim(c.foundClaimed)
	switch {
	case errors.Is(h.Refused, errEditorHasTask):
		// Another task names the editor: a claim made by a concurrent request
		// of the editor, which Claim sorts out.
		h.Refused = tasks.ErrEditorBusy
	case errors.Is(h.Refused, errWorkflowTask):
		// The candidate was wrong about the task: a new read says better.
		h.Refused = tasks.ErrStale
	}
	return h, nil
}

// submitThenClaim is SubmitAndClaim in two transactions, for a store with
// limits in flight: the submit, then, when it was accepted, the claim.
func (s *Store) submitThenClaim(ctx context.Context, sp tasks.SubmitParams, cp tasks.ClaimParams) (*tasks.Handover, error) {
	ended, err := s.Submit(ctx, sp)
	if err != nil {
		return nil, fmt.Errorf("submit task %d and claim task %d: %w", sp.TaskID, cp.TaskID, err)
	}
	h := &tasks.Handover{Ended: ended}
	h.Claim, h.Refused = s.Claim(ctx, cp)
	if h.Refused != nil {
		h.Claim = nil
	}
	return h, nil
}
