package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// workerBatchHead opens the statement batches of the workers' writes: their
// transaction, and a SET of its instant, @taskd_now, which goes on with the
// batch's members (membersSetSQL): one statement for both.
const workerBatchHead = "START TRANSACTION;\nSET @taskd_now = NOW(3), "

// membersSetSQL sets the members of a worker's batch (membersJSON) after
// workerBatchHead, or after the SET of a later part of a joined batch.
const membersSetSQL = "@taskd_members = ?;\n"

// errBatchesApart is the error of CompleteAndClaim when the statement batches
// of Complete and ClaimBatch cannot be joined (one does not open or close as
// the other expects): a caller completes and claims apart.
var errBatchesApart = errors.New("the completion's and the claim's statements do not join into one batch")

// CompleteAndClaim ends the claims of os as Complete does and makes the
// claims of ps as ClaimBatch does, in one statement batch: one round trip,
// one transaction, one commit. The completion's statements run first; both
// parts share the batch's instant (the claims' assigned_at is the ended
// claims' end). Each member is ended, claimed or refused on its own, and the
// answers say which, in the order of os and of ps; what a member of one part
// is refused for never refuses a member of the other.
//
// Nothing is acknowledged before the COMMIT: an error means nothing was
// written (but for a COMMIT whose answer was lost, as for Complete), and a
// caller then completes alone and claims after. It returns an error wrapping
// ErrInvalid, writing nothing, for bad params of either part.
func (s *Store) CompleteAndClaim(ctx context.Context, os []tasks.Outcome, ps []tasks.ClaimParams) ([]tasks.Completed, []tasks.ClaimResult, error) {
	fail := func(err error) ([]tasks.Completed, []tasks.ClaimResult, error) {
		return nil, nil, fmt.Errorf("complete and claim: %w", err)
	}
	switch {
	case len(ps) == 0:
		done, err := s.Complete(ctx, os)
		return done, nil, err
	case len(os) == 0:
		claimed, err := s.ClaimBatch(ctx, ps)
		return nil, claimed, err
	}
	trace := traceOf(ctx)
	cq, cargs, dead, err := s.completeSQL(os, trace)
	if err != nil {
		return fail(err)
	}
	kq, kargs, err := s.claimBatchSQL(ps, trace)
	if err != nil {
		return fail(err)
	}
	completion, ok1 := strings.CutSuffix(cq, "COMMIT")
	claims, ok2 := strings.CutPrefix(kq, workerBatchHead)
	if !ok1 || !ok2 || !strings.HasPrefix(cq, workerBatchHead) {
		return fail(errBatchesApart)
	}
	// The claims set their members anew: the completion's have been read.
	claims = "SET " + claims
	ended, made := newCompleteAnswer(os, dead), s.newClaimAnswer(ps)
	scan := func(rows *sqlx.Rows) error {
		if err := ended.scan(rows); err != nil {
			return err
		}
		if !rows.NextResultSet() {
			if err := rows.Err(); err != nil {
				return err
			}
			return fmt.Errorf("%w: the claims", errShortAnswer)
		}
		return made.scan(rows)
	}
	if err := s.batch(ctx, completion+claims, append(cargs, kargs...), scan); err != nil {
		return fail(err)
	}
	return s.markCancelled(ctx, os, ended.results()), made.results(), nil
}
