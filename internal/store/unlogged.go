package store

import (
	"context"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Unlogged claims. A worker's batch claim (ClaimBatch) writes no 'claimed' event:
// it sets tasks.claim_unlogged instead, on the row it writes anyway. Its
// successful submit (Complete, or a Submit) writes no 'submitted' event either:
// the task_results row, with the claim's time in claimed_at and the claim's and
// the submit's trace ids, is the record of both, and TaskEvents shows it as the
// two events it stands for. Every other end of a marked claim (failed, dead,
// snoozed, released, force released, recycled, taken over) writes the missing
// 'claimed' event first, with logClaimsSQL, in the transaction that ends it, and
// clears the mark. So each fence a task had is accounted for by exactly one
// record: a 'claimed' event, or a result row with claimed_at. Editors' claims
// never set the mark and keep every event.

const (
	// claimTraceSQL is the trace id of the row's current claim: that of its
	// trace_context, a W3C traceparent ("00-<trace id>-<span id>-<flags>"),
	// or NULL without one. ClaimBatch leaves a claim unlogged only when its
	// events would have had exactly this trace id.
	claimTraceSQL = "UNHEX(SUBSTRING(trace_context, 4, 32))"

	// logClaimsSQL writes the 'claimed' events a claim_unlogged claim did not
	// write, as ClaimBatch would have (at assigned_at, the claim's fence,
	// holder and trace id), for the rows the condition that follows it
	// names: the rows of claims a statement of the same transaction is about
	// to end, locked. It must run before the statement that ends them (which
	// clears claim_unlogged and the holder) and before that statement's own
	// events, so that each claim's events come in the order they happened.
	logClaimsSQL = logClaimsSelectSQL + " FROM " + tasksByKeySQL + " WHERE claim_unlogged = 1 AND "

	// logClaimsSelectSQL is logClaimsSQL up to its FROM, for the rows of a
	// join that names tasks' columns alone.
	logClaimsSelectSQL = "INSERT INTO task_events (task_id, kind, fence, holder, editor_id, trace_id, `at`)\n\tSELECT id, 'claimed', fence, holder, editor_id, " +
		claimTraceSQL + ", assigned_at"

	// logClaimSQL is logClaimsSQL for one row, by id and fence.
	logClaimSQL = logClaimsSQL + "id = ? AND fence = ?"

	// unloggedResultSQL are the values of task_results' claimed_at and
	// claim_trace_id of a submit, and the start of its trace_id's (the
	// submit's trace id, then unloggedResultEndSQL): set for a claim without
	// a 'claimed' event, whose submit writes no 'submitted' event either.
	unloggedResultSQL    = "IF(claim_unlogged = 1, assigned_at, NULL), IF(claim_unlogged = 1, " + claimTraceSQL + ", NULL), IF(claim_unlogged = 1, "
	unloggedResultEndSQL = ", NULL)"

	// resultClaimColumns are the columns unloggedResultSQL writes.
	resultClaimColumns = "claimed_at, claim_trace_id, trace_id"

	// loggedSQL limits a submit's 'submitted' events to the claims that
	// wrote their 'claimed' event.
	loggedSQL = " AND claim_unlogged = 0"
)

// logClaim writes the 'claimed' event of the claim of task id with fence
// fence, which a statement of tx is about to end, when the claim was made
// without one (claim_unlogged; the caller read it on the locked row).
func logClaim(ctx context.Context, tx *sqlx.Tx, unlogged bool, id, fence int64) error {
	if !unlogged {
		return nil
	}
	_, err := tx.ExecContext(ctx, logClaimSQL, id, fence)
	return err
}

// writeUnloggedResultSQL writes the values of resultClaimColumns of a submit
// to q, the submit's trace id written by trace, and returns their arguments.
func writeUnloggedResultSQL(q *strings.Builder, trace func(q *strings.Builder) []any) []any {
	q.WriteString(unloggedResultSQL)
	args := trace(q)
	q.WriteString(unloggedResultEndSQL)
	return args
}

// claimTraceIs says whether claimTraceSQL reads traceID (traceOf's) from a row
// whose trace_context is traceContext: both empty, or traceContext a W3C
// traceparent of that trace id.
func claimTraceIs(traceContext string, traceID any) bool {
	id, ok := traceID.(string)
	if !ok {
		return traceContext == ""
	}
	return len(traceContext) == 55 && traceContext[2] == '-' && traceContext[35] == '-' && traceContext[3:35] == id
}
