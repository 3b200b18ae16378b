package tasks

import (
	"time"
)

// MedianSubmissions is how many of an editor's latest submissions the median time
// from claim to submit is taken over (EditorStats.MedianClaimToSubmit).
const MedianSubmissions = 100

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
}
