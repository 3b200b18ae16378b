package tasks

import (
	"time"
)

// MedianSubmissions is how many of an editor's latest submissions the median time
// from claim to submit is taken over (EditorStats.MedianClaimToSubmit).
const MedianSubmissions = 100

// RecentClaimsShown is how many of an editor's latest claims EditorStats lists
// (RecentClaims).
const RecentClaimsShown = 10

// RecentClaim is one of an editor's latest claims, from its audit trail.
type RecentClaim struct {
	TaskID, Fence int64
	// ClaimedAt is the claim's time by the database clock.
	ClaimedAt time.Time
	// TraceID is the trace id (32 hex digits) of the sampled trace the claim
	// was made in, or "" when it was not traced.
	TraceID string
}

// EditorStats is what the audit trail says about an editor.
type EditorStats struct {
	// Today counts the editor's events since midnight UTC by the database clock;
	// AllTime counts all of them.
	Today, AllTime EventCounts
	// MedianClaimToSubmit is the median time from claim to submit over the editor's
	// latest MedianSubmissions submissions (by the database clock); MedianOf is how
	// many there were, and MedianClaimToSubmit is 0 when there were none.
	MedianClaimToSubmit time.Duration
	MedianOf            int
	// LastActiveAt is the time of the editor's last claim, heartbeat, submit,
	// release or skip (a release by an operator counts), or nil if it never did any.
	LastActiveAt *time.Time
	// RecentClaims are the editor's latest RecentClaimsShown claims, newest
	// first.
	RecentClaims []RecentClaim
}
