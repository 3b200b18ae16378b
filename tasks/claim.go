package tasks

import (
	"time"
)

// ClaimParams are the arguments of Claim.
type ClaimParams struct {
	TaskID int64
	// Fence is the fence the caller saw in Candidates.
	Fence int64
	// Status is the status the caller saw in Candidates. StatusPending claims with
	// one statement batch (one round trip); anything else, StatusAssigned for a
	// claim whose lease passed or "" when unknown, goes through a locking read that
	// also records the takeover.
	Status Status
	// Holder identifies the claimant: EditorHolder(id) for editors, a worker id for
	// workers. 1..128 characters.
	Holder string
	// EditorID is the claiming editor, or 0 for workers.
	EditorID int64
	// Lease is how long the claim lives without a heartbeat: LeaseMin..the store's MaxHold,
	// truncated to milliseconds.
	Lease time.Duration
	// TraceContext is the W3C traceparent of the claim span; may be empty.
	TraceContext string
	// Workflow is the candidate's Workflow: an editor's claim of a task with
	// stages, a group or a reservation reads the workflow's checks in its
	// batch, and one of a task without them only checks that it has none. A
	// claim that turns out wrong about it is made the locking way, which
	// reads the checks itself: the rules hold whatever this says.
	Workflow bool
	// Capacity is the claiming editor's capacity (Editor.Capacity) as the
	// caller knows it; 0 means 1. The store keeps the editor's own capacity
	// whatever this says: it only picks the check, a cheaper one for an
	// editor of capacity 1, and a claim that turns out wrong about it is
	// made the locking way.
	Capacity int
	// Category and LimitKey are the task's category and limit key as the
	// caller knows them (a candidate's): with limits in flight (see
	// Workflow.MaxInFlight), they pick the claim's checks, none for a
	// category without limits. The store keeps the limits whatever they say:
	// a claim of a task whose category or key is not the one named is
	// refused (ErrStale), and an empty Category is read under the claim's
	// locks. ClaimBatch, in a store with a limited category, needs Category.
	Category string
	LimitKey string
}
