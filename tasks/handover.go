package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// submitClaimSQL is SubmitAndClaim's statement batch (see batch): Submit's
// statements and claimPendingSQL's in one transaction, in the project's lock
// order: the editor's row (none for a worker), then the submitted task's row,
// then the claimed task's. The claim is guarded by the submit as well
// (claimUpdateSQL reads @taskd_submitted), so a refused submit claims nothing.
// The claim's busy check runs after the UPDATE to done cleared the submitted
// task's editor_id, which the transaction sees as its own change.
//
// Each event is written by an INSERT ... SELECT whose WHERE checks the row's
// state itself, as Submit's and Claim's do, never a row count: a server whose
// client went away mid-batch may run the batch to its COMMIT without the row
// counts of statements whose answers it could not send.
func submitClaimSQL(outbox bool) string {
	return `SET @taskd_editor = (` + lockEditorSQL + `), @taskd_now = NOW(3);
` + submitWritesSQL(outbox) + `SET @taskd_submitted = ROW_COUNT(), ` + claimCheckSQL + `;
` + submitSelectSQL + claimUpdateSQL + claimSelectSQL + `INSERT INTO task_events (task_id, kind, fence, holder, editor_id, ` + "`at`" + `)
	` + claimEventSQL + `;
`
}

// Handover is what SubmitAndClaim did: the claim it ended, and the claim it
// made or why it made none.
type Handover struct {
	// Ended is the submitted claim.
	Ended *Ended
	// Claim is the new claim, nil if the store refused it.
	Claim *Claim
	// Refused says why the store refused the new claim: ErrStale, ErrSkipped,
	// ErrPaused, ErrEditorDisabled or ErrEditorBusy, as Claim would. Nil when
	// Claim is not.
	Refused error
}

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
func (s *Store) SubmitAndClaim(ctx context.Context, sp SubmitParams, cp ClaimParams) (*Handover, error) {
	fail := func(err error) (*Handover, error) {
		return nil, fmt.Errorf("submit task %d and claim task %d: %w", sp.TaskID, cp.TaskID, err)
	}
	switch {
	case cp.Status != StatusPending:
		return fail(fmt.Errorf("%w: the task to claim must be pending, not %q", ErrInvalid, cp.Status))
	case sp.Holder != cp.Holder:
		return fail(fmt.Errorf("%w: the submit's holder %q is not the claim's %q", ErrInvalid, sp.Holder, cp.Holder))
	case sp.TaskID == cp.TaskID:
		return fail(fmt.Errorf("%w: the task to claim is the one submitted", ErrInvalid))
	}
	if err := CheckResult(sp.Result); err != nil {
		return fail(err)
	}
	lease, err := s.checkClaimParams(cp)
	if err != nil {
		return fail(err)
	}
	var submitted submittedRow
	var claimed claimedRow
	var foundSubmitted, foundClaimed bool
	// The arguments in the order of submitClaimSQL's placeholders: the
	// editor's lock, Submit's but for its SELECT's, which follows the claim's
	// checks, then the claim's.
	ca := newClaimArgs(cp, lease)
	sa := s.submitArgs(sp)
	last := len(sa) - 1
	args := slices.Concat([]any{nullID(cp.EditorID)}, sa[:last], ca.check, sa[last:], ca.update, ca.sel, ca.event)
	err = s.grouped(ctx, s.submitClaimSQL, args, scanOne(&submitted, &foundSubmitted), scanOne(&claimed, &foundClaimed))
	if err != nil {
		return fail(lostRace(err))
	}
	ended, err := submitted.ended(sp, foundSubmitted)
	if err != nil {
		return fail(err)
	}
	h := &Handover{Ended: ended}
	h.Claim, h.Refused = claimed.claim(foundClaimed)
	if errors.Is(h.Refused, errEditorHasTask) {
		// Another task names the editor: a claim made by a concurrent request
		// of the editor, which Claim sorts out.
		h.Refused = ErrEditorBusy
	}
	return h, nil
}
